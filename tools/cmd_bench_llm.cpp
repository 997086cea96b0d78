// `vkformer bench --model FILE.gguf`: prompt processing and generation speed of a GGUF language
// model measured as llama-bench measures them, so the numbers compare with ggml's:
//   pp<P>  P random tokens run as one prompt (batched passes) from an empty cache;
//   tg<N>  N random tokens run one at a time (one decode pass each) from an empty cache;
// each repeated -r times after one untimed warm-up run; tokens/s of every run, then mean and
// sample standard deviation over the runs. Wall-clock time on the host, as llama-bench takes it.
// Then what one decoded token's pass and one prompt chunk's pass execute, from the executors'
// recordings: dispatches, pipeline barriers, pipeline binds and weight bytes read.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io_util.hpp"
#include "llm_cli.hpp"
#include "vkformer/error.hpp"
#include "vkformer/gguf.hpp"

#ifndef VKFORMER_VERSION
#define VKFORMER_VERSION "unknown"
#endif

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

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}
double stddev(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const double m = mean(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(v.size() - 1));
}

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
              const GlobalOptions& globals, const LlmArgs& kv, int64_t depth) {
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
      std::printf("| %-8s | %10.2f ± %-9.2f |\n", t.name.c_str(), mean(v), stddev(v));
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
      doc["llm"] = json::array();
      for (const auto& t : tests) {
        const auto v = t.tps();
        doc["llm"].push_back({{"test", t.name},
                              {"n_prompt", t.n_prompt},
                              {"n_gen", t.n_gen},
                              {"repetitions", repeats},
                              {"avg_ts", mean(v)},
                              {"stddev_ts", stddev(v)},
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
