// `vkformer bench --model FILE.gguf`: prompt processing and generation speed of a GGUF language
// model measured as llama-bench measures them, so the numbers compare with ggml's:
//   pp<P>  P random tokens run as one prompt (batched passes) from an empty cache;
//   tg<N>  N random tokens run one at a time (one decode pass each) from an empty cache;
// each repeated -r times after one untimed warm-up run; tokens/s of every run, then mean and
// sample standard deviation over the runs. Wall-clock time on the host, as llama-bench takes it.
// Then what one decoded token's pass and one prompt chunk's pass execute, from the executors'
// recordings: dispatches, pipeline barriers, pipeline binds and weight bytes read. Then where a
// decoded token's time goes, per kernel (op × weight type: GPU timestamps around every op of the
// decode graph), and the weight bytes a decoded token reads per second against the device's
// measured copy bandwidth (bench/peak.hpp), the bound a decoding step approaches.
#include <chrono>
#include <algorithm>
#include <cmath>
#include <map>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io_util.hpp"
#include "llm_cli.hpp"
#include "peak.hpp"
#include "sample_stats.hpp"
#include "version.hpp"
#include "vkformer/error.hpp"
#include "vkformer/gguf.hpp"

namespace vkformer::cli {

namespace {

using json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

// Deterministic "random" ids (a 64-bit LCG), so every run and machine processes the same tokens.
std::vector<int32_t> random_ids(size_t n, int64_t vocab, uint64_t seed) {
  std::vector<int32_t> ids(n);
  uint64_t x = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (auto& id : ids) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    id = static_cast<int32_t>((x >> 33) % static_cast<uint64_t>(vocab));
  }
  return ids;
}

struct Test {
  std::string name;
  int64_t n_prompt = 0, n_gen = 0;
  std::vector<double> seconds;
  std::vector<double> tps() const {
    std::vector<double> v;
    for (double s : seconds) v.push_back(static_cast<double>(n_prompt + n_gen) / s);
    return v;
  }
};


json pass_json(const ExecutorStats& s, int64_t layers, int64_t tokens) {
  return {{"tokens", tokens},
          {"dispatches", s.dispatches},
          {"dispatches_per_layer", static_cast<double>(s.dispatches) / static_cast<double>(layers)},
          {"barriers", s.pipeline_barriers},
          {"pipeline_binds", s.pipeline_binds},
          {"weight_bytes_read", s.weight_bytes_read}};
}

void print_pass(const char* name, const ExecutorStats& s, int64_t layers) {
  std::printf("| %-18s | %10zu | %9.2f | %8zu | %14zu | %15.1f |\n", name, s.dispatches,
              static_cast<double>(s.dispatches) / static_cast<double>(layers), s.pipeline_barriers,
              s.pipeline_binds, static_cast<double>(s.weight_bytes_read) / 1e6);
}

// One decoded token's ops, timed `runs` times at position 0 and grouped by kernel: the kernel
// variant names the op and its weight type ("matmul_wq_rows_q6_k_f32").
struct KernelShare {
  std::string kernels;
  size_t ops = 0, dispatches = 0;
  double microseconds = 0;  // per token, all its ops
  uint64_t weight_bytes = 0;
};
std::vector<KernelShare> profile_decode(LanguageModel& lm, int runs, double& total_us) {
  std::map<std::string, KernelShare> by_kernel;
  lm.reset();
  lm.profile_decode_step(1);  // compiles the profiled graph
  for (int r = 0; r < runs; ++r)
    for (const OpTime& t : lm.profile_decode_step(1)) {
      KernelShare& k = by_kernel[t.kernels];
      k.kernels = t.kernels;
      k.microseconds += t.microseconds / runs;
      if (r == 0) k.ops += 1, k.dispatches += t.dispatches, k.weight_bytes += t.weight_bytes_read;
    }
  std::vector<KernelShare> v;
  total_us = 0;
  for (auto& [name, k] : by_kernel) v.push_back(k), total_us += k.microseconds;
  std::sort(v.begin(), v.end(), [](auto& a, auto& b) { return a.microseconds > b.microseconds; });
  return v;
}

// A test's run after the first `depth` tokens, which stay in the cache (truncate keeps them).
double time_run(LanguageModel& lm, const Test& t, const std::vector<int32_t>& ids, int64_t depth) {
  if (lm.position() < depth) {
    lm.reset();
    for (int64_t at = 0; at < depth; at += 512)  // prefilled once, in prompt passes
      lm.append(std::span(ids).subspan(static_cast<size_t>(at), static_cast<size_t>(std::min<int64_t>(512, depth - at))));
  }
  lm.truncate(depth);
  const auto t0 = Clock::now();
  if (t.n_prompt > 0) lm.append(std::span(ids).subspan(static_cast<size_t>(depth), static_cast<size_t>(t.n_prompt)));
  for (int64_t i = 0; i < t.n_gen; ++i) lm.append(std::span(ids).subspan(static_cast<size_t>(depth + i), 1));
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

int bench_llm(const std::string& model, int64_t n_prompt, int64_t n_gen, int repeats, const std::string& json_path,
              bool no_peak, const GlobalOptions& globals, const LlmArgs& kv, int64_t depth) {
  return run_llm_command([&] {
    if (n_prompt < 0 || n_gen < 0 || n_prompt + n_gen == 0)
      usage_error("-p and -n must be >= 0 and not both 0, got -p " + std::to_string(n_prompt) +
                                                   " -n " + std::to_string(n_gen));
    if (repeats < 1) usage_error("-r must be at least 1, got " + std::to_string(repeats));
    if (depth < 0) usage_error("-d must be >= 0, got " + std::to_string(depth));
    LlmArgs args = kv;
    args.model = model;
    args.context = std::max<int64_t>(depth + std::max(n_prompt, n_gen), 1);
    check_llm_args(args);
    Device device = Device::open(globals.device_options());
    std::fprintf(stderr, "vkformer bench: loading %s\n", model.c_str());  // progress: nothing else shows for seconds
    const auto t_load = Clock::now();
    LanguageModel lm = load_llm(device, args);
    const double load_s = std::chrono::duration<double>(Clock::now() - t_load).count();
    const LanguageModelConfig& c = lm.config();
    const std::string type = std::string(GgufFile(model).get_string_or("general.name", c.architecture));

    std::vector<Test> tests;
    const std::string at_depth = depth > 0 ? " @ d" + std::to_string(depth) : "";
    if (n_prompt > 0) tests.push_back({"pp" + std::to_string(n_prompt) + at_depth, n_prompt, 0, {}});
    if (n_gen > 0) tests.push_back({"tg" + std::to_string(n_gen) + at_depth, 0, n_gen, {}});
    const auto ids = random_ids(static_cast<size_t>(depth + std::max(n_prompt, n_gen)), c.vocab_size, 42);

    const DeviceInfo& d = device.info();
    std::printf("vkformer bench: %s (%s, %lld layers, width %lld), loaded in %.2f s, on %s (%s)\n", model.c_str(),
                type.c_str(), static_cast<long long>(c.n_layers), static_cast<long long>(c.d_model), load_s,
                d.name.c_str(), d.driver_name.c_str());
    const KvCacheInfo kv_cache = lm.kv_cache();
    std::printf("kv cache: %s\n", describe_kv_cache(kv_cache, lm.context()).c_str());
    std::printf("| %-8s | %-22s |\n|----------|------------------------|\n", "test", "t/s");
    for (auto& t : tests) {
      std::fprintf(stderr, "%s warm-up (compiles the graphs, reads the weights in)...\n", t.name.c_str());
      std::fprintf(stderr, "%s warm-up: %.2f s\n", t.name.c_str(), time_run(lm, t, ids, depth));  // compiles, faults weights in
      for (int r = 0; r < repeats; ++r) {
        t.seconds.push_back(time_run(lm, t, ids, depth));
        std::fprintf(stderr, "%s run %d/%d: %.2f s\n", t.name.c_str(), r + 1, repeats, t.seconds.back());
      }
      const auto v = t.tps();
      std::printf("| %-8s | %10.2f ± %-9.2f |\n", t.name.c_str(), mean(v), sample_stddev(v));
      std::fflush(stdout);
    }
    lm.reset();
    const ExecutorStats decode = lm.decode_step_stats(), chunk = lm.prompt_chunk_stats();
    const std::string chunk_name = "prompt chunk (" + std::to_string(lm.prompt_chunk()) + ")";
    std::printf("\nper pass (counted from the recording; every token or chunk replays it):\n");
    std::printf("| %-18s | %10s | %9s | %8s | %14s | %15s |\n", "pass", "dispatches", "per layer",
                "barriers", "pipeline binds", "weight MB read");
    std::printf("|--------------------|------------|-----------|----------|----------------|-----------------|\n");
    print_pass("decoded token", decode, c.n_layers);
    print_pass(chunk_name.c_str(), chunk, c.n_layers);
    std::fflush(stdout);

    // Where a decoded token's time goes, and its weight bytes against the copy bandwidth.
    json kernels = json::array();
    double profiled_us = 0, copy_gbps = 0, decode_gbps = 0;
    if (d.timestamps) {
      std::fprintf(stderr, "profiling a decoded token op by op...\n");
      const std::vector<KernelShare> shares = profile_decode(lm, 5, profiled_us);
      lm.reset();
      std::printf("\ndecoded token by kernel (GPU timestamps around every op, ops serialized; "
                  "mean of 5 tokens at position 0): %.0f us in all\n", profiled_us);
      std::printf("| %-40s | %4s | %10s | %7s | %9s | %7s |\n", "kernel", "ops", "dispatches",
                  "share", "weight MB", "GB/s");
      std::printf("|------------------------------------------|------|------------|---------|-----------|---------|\n");
      for (const KernelShare& k : shares) {
        const double gbps = k.microseconds > 0 ? k.weight_bytes / (k.microseconds * 1e3) : 0;
        std::printf("| %-40s | %4zu | %10zu | %6.1f%% | %9.2f | %7.2f |\n", k.kernels.c_str(), k.ops,
                    k.dispatches, 100 * k.microseconds / profiled_us, k.weight_bytes / 1e6, gbps);
        kernels.push_back({{"kernels", k.kernels},
                           {"ops", k.ops},
                           {"dispatches", k.dispatches},
                           {"microseconds", k.microseconds},
                           {"share", k.microseconds / profiled_us},
                           {"weight_bytes_read", k.weight_bytes},
                           {"weight_gbps", gbps}});
      }
      if (!no_peak) {
        std::fprintf(stderr, "measuring the copy bandwidth...\n");
        // A source as large as the weights a token reads: out of the caches, as they are.
        copy_gbps = bench::copy_gbps_at(device, std::max<uint64_t>(decode.weight_bytes_read, 64ull << 20));
      }
    }
    for (const auto& t : tests)
      if (t.n_gen > 0) decode_gbps = mean(t.tps()) * static_cast<double>(decode.weight_bytes_read) / 1e9;
    if (decode_gbps > 0) {
      std::printf("\ndecode reads weights at %.2f GB/s (%.1f MB per token x tg t/s)", decode_gbps,
                  decode.weight_bytes_read / 1e6);
      if (copy_gbps > 0)
        std::printf(": %.0f%% of the device's copy bandwidth, %.2f GB/s (bytes read + written)",
                    100 * decode_gbps / copy_gbps, copy_gbps);
      std::printf("\n");
    }
    std::fflush(stdout);

    if (!json_path.empty()) {
      json doc;
      doc["vkformer_version"] = VKFORMER_VERSION;
      doc["model"] = {{"file", model},
                      {"name", type},
                      {"n_layers", c.n_layers},
                      {"d_model", c.d_model},
                      {"vocab_size", c.vocab_size}};
      doc["device"] = {{"name", d.name}, {"driver", d.driver_name}, {"driver_version", d.driver_version}};
      doc["timer"] = "host wall clock per run, as llama-bench";
      doc["load_s"] = load_s;
      doc["kv_cache"] = {{"type_k", std::string(dtype_name(kv_cache.type_k))},
                         {"type_v", std::string(dtype_name(kv_cache.type_v))},
                         {"bytes", kv_cache.bytes},
                         {"bytes_per_token", kv_cache.bytes_per_token},
                         {"context", lm.context()},
                         {"depth", depth}};
      doc["per_decoded_token"] = pass_json(decode, c.n_layers, 1);
      doc["per_prompt_chunk"] = pass_json(chunk, c.n_layers, lm.prompt_chunk());
      doc["decoded_token_by_kernel"] = {{"microseconds", profiled_us}, {"kernels", kernels}};
      doc["decode_weight_gbps"] = decode_gbps;
      doc["copy_gbps"] = copy_gbps > 0 ? json(copy_gbps) : json(nullptr);
      doc["llm"] = json::array();
      for (const auto& t : tests) {
        const auto v = t.tps();
        doc["llm"].push_back({{"test", t.name},
                              {"n_prompt", t.n_prompt},
                              {"n_gen", t.n_gen},
                              {"repetitions", repeats},
                              {"avg_ts", mean(v)},
                              {"stddev_ts", sample_stddev(v)},
                              {"samples_ts", v},
                              {"samples_s", t.seconds}});
      }
      const std::string text = doc.dump(2) + "\n";
      io::OutputFile f(json_path, "--json");
      f.write(text.data(), text.size());
      f.close();
    }
    return report_validation(device) ? 1 : 0;
  });
}

}  // namespace vkformer::cli
