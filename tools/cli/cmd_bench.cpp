// `vkformer bench`: op and block benchmarks timed with GPU timestamps, next to the device's
// measured FMA and copy peaks (a roofline view), on one device or on every device (--device all).
// Tables go to stdout, a progress line to stderr, and --json FILE writes everything for
// bench/plot.py and for comparing devices. The benchmarks themselves live in bench/.

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <re2/re2.h>
#include <string>
#include <vector>

#include "benchmarks.hpp"
#include "cli.hpp"
#include "cli_options.hpp"
#include "device_identity.hpp"
#include "format.hpp"
#include "io_util.hpp"
#include "llm_cli.hpp"
#include "peak.hpp"
#include "runner.hpp"
#include "terminal.hpp"
#include "version.hpp"
#include "vkformer/error.hpp"

namespace vkformer::cli {

// What `vkformer bench --help` says first.
constexpr const char* kBenchHelp =
    "Benchmark ops (matmul, softmax, layer norm, attention) and transformer blocks with GPU "
    "timestamps, next to the device's measured FMA and copy peaks; --device all runs every "
    "Vulkan device in turn (bench/README.md)";

namespace {

using bench::Benchmark;
using bench::Bound;
using bench::Peak;
using bench::Result;
using json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

struct BenchOptions {
  std::string filter;
  std::string json_path;
  int repeats = 10;
  int warmup = 3;
  bool quick = false;
  bool list = false;
  bool no_peak = false;
  bool quick_peak = false;
  double budget_s = 2.0;
  double max_run_s = 5.0;
  // A GGUF language model instead of the op benchmarks (cmd_bench_llm.cpp).
  std::string model;
  int64_t n_prompt = 512, n_gen = 128;
  int llm_repeats = 3;
  int64_t depth = 0;  // -d: tokens in the cache before each test
  LlmArgs kv;         // --cache-type-k/--cache-type-v, and the speculative options
  std::vector<std::string> spec_prompts;  // --spec-prompt FILE: the speculative row's prompts
};

// One line on stderr that a terminal overwrites in place; elsewhere (logs, CI) one line per
// benchmark, without the per-run updates.
class Progress {
 public:
  Progress() : tty_(platform::is_terminal(stderr)) {}
  void begin(size_t i, size_t n, const std::string& id) {
    prefix_ = "[" + std::to_string(i + 1) + "/" + std::to_string(n) + "] " + id;
    if (!tty_) std::fprintf(stderr, "%s\n", prefix_.c_str());
  }
  void stage(const std::string& s) {
    if (!tty_) return;
    std::fprintf(stderr, "\r\033[K%s: %s", prefix_.c_str(), s.c_str());
    std::fflush(stderr);
  }
  void note(const std::string& s) {  // a line that stays
    clear();
    std::fprintf(stderr, "%s\n", s.c_str());
  }
  void clear() {
    if (tty_) std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
  }

 private:
  bool tty_;
  std::string prefix_;
};

// Numbers people can read at a glance: 3 significant digits for most, integers for large.
std::string num(double v) {
  if (v >= 10000) return fmt("%.0f", v);
  if (v >= 100) return fmt("%.1f", v);
  if (v >= 1) return fmt("%.2f", v);
  return fmt("%.3f", v);
}

// Column widths for the table: fixed from the selected benchmarks before any runs, so rows can
// be printed as they finish.
struct Table {
  size_t name = 9, shape = 5;
  void fit(const std::vector<const Benchmark*>& list) {
    for (auto* b : list) {
      name = std::max(name, b->name.size() + 1 + b->variant.size());
      shape = std::max(shape, b->shape_text().size());
    }
  }
  void header() const {
    std::printf("%-*s  %-*s  %-5s  %10s  %21s  %9s  %9s  %9s  %16s\n", int(name), "benchmark", int(shape),
                "shape", "dtype", "median us", "min .. max us", "GFLOP/s", "GB/s", "% peak",
                "% same-size copy");
  }
  void row(const Benchmark& b, const Result& r) const {
    std::string label = b.name + " " + b.variant;
    std::printf("%-*s  %-*s  %-5s  ", int(name), label.c_str(), int(shape), b.shape_text().c_str(),
                std::string(dtype_name(b.dtype)).c_str());
    if (r.status != "ok") {
      std::printf("%s: %s\n", r.status.c_str(), r.reason.c_str());
    } else {
      std::string spread = num(r.min_us) + " .. " + num(r.max_us);
      std::string pct = r.peak_fraction > 0
                            ? fmt("%.1f%%", r.peak_fraction * 100) +
                                  (b.bound == Bound::compute ? " fma" : " bw")
                            : "-";
      // Memory-bound ops: also the share of a copy kernel moving the same bytes.
      std::string same = r.same_size_fraction > 0 ? fmt("%.1f%%", r.same_size_fraction * 100) : "-";
      std::printf("%10s  %21s  %9s  %9s  %9s  %16s\n", num(r.median_us).c_str(), spread.c_str(),
                  num(r.gflops).c_str(), num(r.gbps).c_str(), pct.c_str(), same.c_str());
    }
    std::fflush(stdout);
  }
};

json device_json(const DeviceInfo& d) {
  json j;
  j["index"] = d.index;
  put_device_identity(j, d);
  j["driver"] = d.driver_name;
  j["driver_info"] = d.driver_info;
  j["driver_version"] = d.driver_version;
  j["api_version"] = d.api_version;
  j["subgroup_size"] = d.subgroup_size;
  j["fp16_arithmetic"] = d.fp16_arithmetic;
  j["storage_16bit"] = d.storage_16bit;
  j["shared_memory_bytes"] = d.shared_memory_bytes;
  j["max_storage_buffer_range"] = d.max_storage_buffer_range;
  j["device_local_memory_bytes"] = d.device_local_memory_bytes;
  j["timestamps"] = d.timestamps;
  j["timestamp_period_ns"] = d.timestamp_period_ns;
  j["cooperative_matrix_nv"] = d.cooperative_matrix_nv;
  j["cooperative_matrix_khr"] = d.cooperative_matrix_khr;
  return j;
}

json peak_json(const Peak& p) {
  json j;
  j["fma_gflops"] = p.fma_gflops;
  j["copy_gbps"] = p.copy_gbps;
  j["copy_bytes"] = p.copy_bytes;
  auto trials = [](const std::vector<bench::PeakTrial>& v) {
    json a = json::array();
    for (auto& t : v) a.push_back({{"config", t.config}, {"us", t.microseconds}, {"value", t.value}});
    return a;
  };
  j["fma_trials"] = trials(p.fma);
  j["copy_trials"] = trials(p.copy);
  if (!p.error.empty()) j["error"] = p.error;
  return j;
}

json result_json(const Benchmark& b, const Result& r) {
  json j;
  j["name"] = b.name;
  j["variant"] = b.variant;
  j["id"] = b.id();
  json shape = json::object();
  for (auto& [k, v] : b.shape) shape[k] = v;
  j["shape"] = shape;
  json params = json::object();
  for (auto& [k, v] : b.params) {
    if (v == "true" || v == "false")
      params[k] = v == "true";
    else
      params[k] = v;
  }
  j["params"] = params;
  j["dtype"] = std::string(dtype_name(b.dtype));
  j["status"] = r.status;
  j["reason"] = r.status == "ok" ? json(nullptr) : json(r.reason);
  const bool ok = r.status == "ok";
  auto value = [&](double v) { return ok ? json(v) : json(nullptr); };
  j["median_us"] = value(r.median_us);
  j["min_us"] = value(r.min_us);
  j["max_us"] = value(r.max_us);
  j["gflops"] = value(r.gflops);
  j["gbps"] = value(r.gbps);
  j["peak_fraction"] = ok && r.peak_fraction > 0 ? json(r.peak_fraction) : json(nullptr);
  j["bound"] = b.bound == Bound::compute ? "compute" : "memory";
  j["copy_same_size_gbps"] = ok && r.copy_same_size_gbps > 0 ? json(r.copy_same_size_gbps) : json(nullptr);
  j["same_size_fraction"] = ok && r.same_size_fraction > 0 ? json(r.same_size_fraction) : json(nullptr);
  j["roofline_fraction"] = ok && r.roofline_fraction > 0 ? json(r.roofline_fraction) : json(nullptr);
  j["flops"] = b.flops;
  j["bytes"] = b.bytes;
  j["repeats"] = r.times_us.size();
  j["warmup"] = r.warmup_runs;
  j["times_us"] = r.times_us;
  j["prepare_s"] = r.prepare_s;
  j["predicted_s"] = r.predicted_s;
  j["dispatches"] = r.dispatches;
  j["barriers"] = r.barriers;
  j["timer"] = "gpu timestamps";
  return j;
}

std::string iso_time() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

// Through a temporary file renamed over `path` (io::OutputFile): a cut run never leaves a
// half-written file, and a link, FIFO or device at `path` is refused instead of replaced or
// blocked on.
void write_json(const std::string& path, const json& j) {
  const std::string text = j.dump(2) + "\n";
  io::OutputFile f(path, "--json");
  f.write(text.data(), text.size());
  f.close();
}

// The filter as quoted in messages: a pattern may be tens of kilobytes.
std::string quoted_filter(const std::string& filter) {
  constexpr size_t kShown = 80;
  if (filter.size() <= kShown) return "'" + filter + "'";
  return "'" + filter.substr(0, kShown) + "...' (" + std::to_string(filter.size()) + " characters)";
}

std::vector<const Benchmark*> select(const std::vector<Benchmark>& all, const BenchOptions& o) {
  // RE2, not std::regex: std::regex recurses per nesting level and overflowed the stack on
  // 30,000 nested parentheses; RE2 bounds nesting and runs in linear time.
  RE2::Options options;
  options.set_log_errors(false);  // the error is reported below, not logged to stderr
  RE2 re(o.filter, options);
  if (!re.ok()) {
    std::string why = re.error();  // RE2 quotes the rest of the pattern: keep it short
    if (why.size() > 120) why = why.substr(0, 120) + "...";
    throw Error(ErrorCode::invalid_argument, "--filter " + quoted_filter(o.filter) +
                                                 " is not a valid regular expression: " + why);
  }
  std::vector<const Benchmark*> out;
  for (auto& b : all)
    if ((!o.quick || b.quick) && RE2::PartialMatch(b.id(), re)) out.push_back(&b);
  return out;
}

// With its range in plain words: CLI11's PositiveNumber writes its upper bound, the largest
// double, as a 300-digit number.
CLI::Validator seconds_above_zero() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        double v = 0;
        if (CLI::detail::lexical_cast(text, v) && v > 0 && v <= 1e6) return "";
        return "expected a number of seconds above 0 and at most 1000000, got '" + text + "'";
      },
      "");
}

// Runs the selection on one device; returns its JSON entry and counts failures.
json bench_device(Device& device, const std::vector<const Benchmark*>& list, const BenchOptions& o,
                  Progress& progress, size_t* failures, json* partial) {
  const DeviceInfo& info = device.info();
  std::printf("\nDevice %u: %s (%s, %s %s, Vulkan %s)\n", info.index, info.name.c_str(),
              info.type.c_str(), info.driver_name.c_str(), info.driver_version.c_str(),
              info.api_version.c_str());
  std::fflush(stdout);
  json entry;
  entry["device"] = device_json(info);
  entry["results"] = json::array();
  if (!info.timestamps) {
    std::printf("  skipped: the device has no timestamp queries on its compute queue\n");
    entry["error"] = "the device has no timestamp queries";
    return entry;
  }

  Peak peak;
  if (!o.no_peak) {
    progress.begin(0, 1, "peak probes (fma, copy)");
    progress.stage("measuring");
    bench::PeakOptions po;
    po.quick = o.quick || o.quick_peak;
    po.repeats = po.quick ? 3 : 5;
    peak = bench::measure_peak(device, po);
    progress.clear();
    auto best = [](const std::vector<bench::PeakTrial>& v, double value) {
      for (auto& t : v)
        if (t.value == value) return t.config;
      return std::string();
    };
    std::printf("Peak: FMA %s GFLOP/s (%s), copy %s GB/s (%s)\n", num(peak.fma_gflops).c_str(),
                best(peak.fma, peak.fma_gflops).c_str(), num(peak.copy_gbps).c_str(),
                best(peak.copy, peak.copy_gbps).c_str());
    if (!peak.error.empty()) std::printf("Peak probe error: %s\n", peak.error.c_str());
  }
  entry["peak"] = peak_json(peak);
  std::printf("GPU time per run from timestamps: median and min .. max of up to %d runs after "
              "up to %d warm-up runs (%.3g s budget each). %% peak: GFLOP/s of the FMA peak "
              "(fma) or GB/s of the copy peak (bw).\n\n",
              o.repeats, o.warmup, o.budget_s);
  Table table;
  table.fit(list);
  table.header();
  std::fflush(stdout);

  bench::RunOptions ro;
  ro.repeats = o.repeats;
  ro.warmup = o.warmup;
  ro.budget_s = o.budget_s;
  ro.max_run_s = o.max_run_s;
  bench::Efficiency efficiency;
  size_t above_peak = 0;
  for (size_t i = 0; i < list.size(); ++i) {
    const Benchmark& b = *list[i];
    progress.begin(i, list.size(), b.id());
    Result r = bench::run_benchmark(device, b, peak, ro, efficiency,
                                    [&](const std::string& s) { progress.stage(s); });
    progress.clear();
    if (r.status == "failed") ++*failures;
    if (r.status == "ok" && r.peak_fraction > 1.0) ++above_peak;
    table.row(b, r);
    entry["results"].push_back(result_json(b, r));
    if (partial) {
      (*partial)["devices"].back() = entry;  // keep the file current: a long run may be cut
      write_json(o.json_path, *partial);
    }
  }
  if (above_peak)
    std::printf("Note: %zu result%s above 100%% of the measured peak: the probes ran at a busier "
                "moment (a shared machine), or the data fit in a cache larger than the copy "
                "probe's buffer.\n",
                above_peak, above_peak == 1 ? " is" : "s are");
  return entry;
}

}  // namespace

Command add_bench_command(CLI::App& app, const GlobalOptions& globals) {
  auto* sub = app.add_subcommand("bench", kBenchHelp);
  auto o = std::make_shared<BenchOptions>();
  sub->add_option("--filter", o->filter,
                  "Run only benchmarks whose id matches this regular expression (RE2 syntax, "
                  "searched anywhere), e.g. 'matmul/square/f32' or 'attention/(fused|unfused)'; "
                  "ids are listed by --list")
      ->type_name("REGEX");
  add_json_file_option(*sub, o->json_path,
                       "Also write every result, the device and the peaks as JSON to FILE (for "
                       "bench/plot.py)");
  add_whole_number(*sub, "--repeats", o->repeats, 1, 1000000, "Timed runs per benchmark, at most (default 10)");
  add_whole_number(*sub, "--warmup", o->warmup, 0, 1000000, "Untimed runs before timing, at most (default 3)");
  sub->add_flag("--quick", o->quick,
                "A small subset that finishes in well under a minute even on a CPU device");
  sub->add_option("--budget", o->budget_s,
                  "Seconds of timed runs per benchmark: repeating stops when they are spent "
                  "(default 2)")
      ->check(seconds_above_zero())
      ->type_name("SECONDS");
  sub->add_option("--max-run-seconds", o->max_run_s,
                  "Skip benchmarks predicted to take longer than this per run: roofline time "
                  "over the efficiency the family last reached here, else 10% (default 5)")
      ->check(seconds_above_zero())
      ->type_name("SECONDS");
  sub->add_flag("--list", o->list, "List the benchmark ids (after --quick and --filter) and exit");
  sub->add_flag("--no-peak", o->no_peak,
                "Skip the peak probes (then no % of peak is reported)");
  sub->add_flag("--quick-peak", o->quick_peak,
                "The peak probes of --quick (a 128 MiB copy, one pass) with any selection: the "
                "GPU run's smoke test on lavapipe");

  add_gguf_option(*sub, "-m,--model", o->model,
                  "Benchmark a GGUF language model instead, as llama-bench does: prompt processing "
                  "(pp, -p tokens) and generation (tg, -n tokens), tokens/s mean ± stddev over -r runs");
  add_whole_number(*sub, "-p", o->n_prompt, 0, INT32_MAX, "With --model: prompt tokens for the pp test; 0 = none (default 512)");
  add_whole_number(*sub, "-n", o->n_gen, 0, INT32_MAX, "With --model: generated tokens for the tg test; 0 = none (default 128)");
  add_whole_number(*sub, "-r", o->llm_repeats, 1, 1000000, "With --model: timed runs of each test (default 3)");
  add_whole_number(*sub, "-d,--depth", o->depth, 0, INT32_MAX,
                   "With --model: tokens in the KV cache before each test, as llama-bench's -d (default 0)");
  add_cache_type_options(*sub, o->kv);
  add_speculative_options(*sub, o->kv);
  sub->add_option("--spec-prompt", o->spec_prompts,
                  "With --model and --spec/--model-draft: a text file whose text (a user message in the "
                  "model's chat template) is answered -n tokens greedily, plain and speculative by turns; "
                  "repeatable")
      ->type_name("FILE");

  return {sub, [&globals, o]() {
            if (!o->model.empty() && (!o->kv.spec.empty() || !o->kv.model_draft.empty()))
              return bench_speculative(o->model, o->kv, o->spec_prompts, o->n_gen, o->llm_repeats, o->json_path,
                                       globals);
            if (!o->spec_prompts.empty()) usage_error("--spec-prompt is for bench --model with --spec or --model-draft");
            if (!o->model.empty())
              return bench_llm(o->model, o->n_prompt, o->n_gen, o->llm_repeats, o->json_path, o->no_peak, globals,
                               o->kv, o->depth);
            const auto all = bench::all_benchmarks();
            const auto list = select(all, *o);
            if (o->list) {
              for (auto* b : list) std::printf("%s\n", b->id().c_str());
              return 0;
            }
            if (list.empty())
              throw Error(ErrorCode::invalid_argument,
                          "no benchmark matches --filter " + quoted_filter(o->filter) +
                              (o->quick ? " within --quick" : "") + " (see --list)");

            // Which devices: "all", or the one --device / VKFORMER_DEVICE / the default picks.
            std::vector<std::string> selectors;
            if (globals.device == "all") {
              for (auto& d : Device::enumerate(globals.instance_options()))
                selectors.push_back(std::to_string(d.index));
              if (selectors.empty())
                throw Error(ErrorCode::device_not_found, "no Vulkan device on this machine");
            } else {
              selectors.push_back(globals.device);
            }

            json doc;
            doc["vkformer_version"] = VKFORMER_VERSION;
            doc["date"] = iso_time();
            doc["settings"] = {{"quick", o->quick},       {"filter", o->filter},
                               {"repeats", o->repeats},   {"warmup", o->warmup},
                               {"budget_s", o->budget_s}, {"max_run_s", o->max_run_s}};
            doc["devices"] = json::array();
            // An unwritable --json fails now, not after minutes of benchmarks.
            if (!o->json_path.empty()) write_json(o->json_path, doc);
            std::printf("vkformer bench: %zu benchmark%s on %zu device%s\n", list.size(),
                        list.size() == 1 ? "" : "s", selectors.size(),
                        selectors.size() == 1 ? "" : "s");
            Progress progress;
            size_t failures = 0, validation = 0;
            const auto start = Clock::now();
            for (auto& selector : selectors) {
              DeviceOptions dopts = globals.device_options();
              dopts.selector = selector;
              doc["devices"].push_back(json::object());
              try {
                Device device = Device::open(dopts);
                doc["devices"].back() = bench_device(device, list, *o, progress, &failures,
                                                     o->json_path.empty() ? nullptr : &doc);
                validation += report_validation(device);
              } catch (const Error& e) {
                // One device (lost, or failing to open) need not end a run over all of them.
                if (selectors.size() == 1) throw;
                progress.clear();
                std::printf("Device %s: error: %s\n", selector.c_str(), e.what());
                doc["devices"].back()["error"] = e.what();
                ++failures;
              }
            }
            if (!o->json_path.empty()) write_json(o->json_path, doc);
            const double took = std::chrono::duration<double>(Clock::now() - start).count();
            std::printf("\n%zu benchmark%s x %zu device%s in %.1f s%s%s\n", list.size(),
                        list.size() == 1 ? "" : "s", selectors.size(),
                        selectors.size() == 1 ? "" : "s", took,
                        failures ? (", " + std::to_string(failures) + " failed").c_str() : "",
                        o->json_path.empty() ? "" : ("; JSON in " + o->json_path).c_str());
            std::fflush(stdout);
            return failures || validation ? 1 : 0;
          }};
}

}  // namespace vkformer::cli
