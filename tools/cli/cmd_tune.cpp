// `vkformer tune`: measures the tunable kernel choices (src/kernels/tunables.hpp) on one device at the
// shapes of a GGUF model or of the standard bench set, within a time budget, and keeps the winners
// in the device's tuning cache (src/kernels/tuning_cache.hpp), which every later process applies.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli.hpp"
#include "cli_options.hpp"
#include "io_util.hpp"
#include "model_kind.hpp"
#include "tune_verify.hpp"
#include "tune_workloads.hpp"
#include "tuner.hpp"
#include "tuning_cache.hpp"
#include "vkformer/error.hpp"

#ifndef VKFORMER_VERSION
#define VKFORMER_VERSION "unknown"
#endif

namespace vkformer::cli {

// What `vkformer tune --help` says first.
constexpr const char* kTuneHelp =
    "Time the kernel choices that can be tuned (tile shapes, mat-vec widths, attention blocks, "
    "...) on one device at a model's shapes or the standard bench set, and keep those that beat "
    "the static table in the device's tuning cache, which later runs use (docs/tuning.md)";

namespace {

using json = nlohmann::ordered_json;

struct TuneOptions {
  std::string model;
  double budget_s = 120;
  double margin = 0.05;
  std::vector<std::string> only;
  std::string json_path;
  bool list = false;
  bool no_save = false;
  bool verify = false;
  std::string verify_filter;
};

std::string iso_time() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

bool env_set(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && std::string(v) != "0";
}

// --list: every tunable, whether it applies here, its candidates and the shapes that time it.
int list_tunables(const DeviceOptions& options, const std::vector<kernels::TuneShape>& shapes) {
  DeviceInfo info;
  kernels::Tuning base;
  {
    kernels::ScopedTuningTrial trial({});  // the static table
    Device d = Device::open(options);
    info = d.info();
    base = kernels::tuning_for(info);
  }
  std::printf("Tunables on device %u: %s (static choice first)\n", info.index, info.name.c_str());
  for (const kernels::Tunable& t : kernels::all_tunables()) {
    const std::vector<kernels::TunableValue> c = t.candidates(info, base);
    std::printf("\n%s: %s\n", t.id.c_str(), t.description.c_str());
    if (kernels::tunable_overridden(t)) std::printf("  fixed by %s\n", t.env.c_str());
    if (c.size() < 2) {
      std::printf("  does not apply to this device\n");
      continue;
    }
    std::string values;
    for (const kernels::TunableValue& v : c) values += (values.empty() ? "" : " ") + v.text;
    std::printf("  candidates: %s\n", values.c_str());
    for (const kernels::TuneShape& s : shapes)
      if (std::find(t.ops.begin(), t.ops.end(), s.op) != t.ops.end() && (!t.measures || t.measures(s)))
        std::printf("  shape: %s\n", s.text().c_str());
  }
  return 0;
}

json report_json(const TuneReport& r, const TuneSettings& s, const std::string& cache_path) {
  json j;
  j["vkformer_version"] = VKFORMER_VERSION;
  j["date"] = iso_time();
  j["device"] = {{"name", r.device.name}, {"uuid", r.device.uuid},
                 {"driver", r.device.driver_name}, {"driver_version", r.device.driver_version}};
  j["settings"] = {{"shapes", s.shapes_label}, {"budget_s", s.budget_s}, {"margin", s.margin},
                   {"shape_tolerance", s.shape_tolerance}, {"rounds", s.rounds}};
  j["took_s"] = r.took_s;
  j["longest_step_s"] = r.longest_step_s;
  j["budget_spent"] = r.budget_spent;
  j["cache"] = cache_path.empty() ? json(nullptr) : json(cache_path);
  j["tunables"] = json::array();
  for (const TunableResult& t : r.tunables) {
    json e = {{"id", t.id}, {"status", t.status}, {"note", t.note}, {"winner", t.winner},
              {"static_us", t.static_us}, {"winner_us", t.winner_us}, {"score", t.score},
              {"rounds", t.rounds},
              {"shapes", t.shapes}};
    e["candidates"] = json::array();
    for (const CandidateResult& c : t.candidates)
      e["candidates"].push_back({{"value", c.value}, {"median_us", c.median_us},
                                 {"total_us", c.total_us}, {"prepare_s", c.prepare_s},
                                 {"error", c.error.empty() ? json(nullptr) : json(c.error)}});
    j["tunables"].push_back(e);
  }
  return j;
}

void print_summary(const TuneReport& r) {
  std::printf("\n%-30s  %-18s  %-18s  %10s  %10s  %s\n", "tunable", "static", "kept", "static ms",
              "kept ms", "result");
  for (const TunableResult& t : r.tunables) {
    const std::string stat = t.candidates.empty() ? "-" : t.candidates.front().value;
    if (!t.measured()) {
      std::printf("%-30s  %-18s  %-18s  %10s  %10s  %s: %s\n", t.id.c_str(), stat.c_str(), "-",
                  "-", "-", t.status.c_str(), t.note.c_str());
      continue;
    }
    std::printf("%-30s  %-18s  %-18s  %10.2f  %10.2f  %s: %s\n", t.id.c_str(), stat.c_str(),
                t.winner.c_str(), t.static_us / 1000, t.winner_us / 1000, t.status.c_str(),
                t.note.c_str());
  }
}

int run_tune(const GlobalOptions& globals, const TuneOptions& o) {
  if (o.verify) {
    VerifyOptions v;
    v.filter = o.verify_filter;
    v.tolerance = o.margin;
    return verify_tuning(globals.device_options(), v);
  }
  TuneSettings s;
  s.device = globals.device_options();
  s.budget_s = o.budget_s;
  s.margin = o.margin;
  s.only = o.only;
  std::vector<std::string> ids;
  for (const kernels::Tunable& t : kernels::all_tunables()) ids.push_back(t.id);
  for (const std::string& id : o.only)
    if (!kernels::find_tunable(id)) {
      const std::string near = closest_match(id, ids);
      usage_error("--only '" + id + "': no such tunable" +
                  (near.empty() ? "" : "; did you mean '" + near + "'?") +
                  " ('vkformer tune --list' lists them)");
    }
  if (!o.model.empty()) require_model_kind("tune", o.model, model_kind(o.model));
  bool cpu_device = false;
  {
    kernels::ScopedTuningTrial trial({});
    Device d = Device::open(s.device);
    cpu_device = kernels::tuning_for(d.info()).cpu_device;
  }
  if (o.model.empty()) {
    s.shapes = standard_tune_shapes(cpu_device);
    s.shapes_label = "the standard bench set";
  } else {
    s.shapes = model_tune_shapes(o.model);
    s.shapes_label = o.model;
  }
  if (o.list) return list_tunables(s.device, s.shapes);
  // Fail on an unwritable --json now, not after the sweep.
  if (!o.json_path.empty()) io::OutputFile(o.json_path, "--json");

  std::printf("vkformer tune: %zu shapes (%s), budget %.0f s, margin %.0f%%\n", s.shapes.size(),
              s.shapes_label.c_str(), s.budget_s, s.margin * 100);
  std::fflush(stdout);
  const TuneReport report = run_tuner(s, [](const std::string& line) {
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  });
  print_summary(report);

  std::string cache_path;
  size_t changed = 0, measured = 0;
  for (const TunableResult& t : report.tunables) {
    measured += t.measured();
    changed += t.status == "tuned";
  }
  if (o.no_save) {
    std::printf("\nNot saved (--no-save).\n");
  } else if (env_set("VKFORMER_TUNING_AS_GPU")) {
    std::printf("\nNot saved: VKFORMER_TUNING_AS_GPU is set (a test mode the cache does not "
                "apply to).\n");
  } else {
    kernels::TuningCacheFile f = kernels::tuning_cache_file_for(report.device);
    f.vkformer_version = VKFORMER_VERSION;
    f.date = iso_time();
    f.shapes = s.shapes_label;
    f.budget_s = s.budget_s;
    f.took_s = report.took_s;
    f.choices = tuned_choices(report);
    cache_path = kernels::write_tuning_cache(report.device, f).string();
    std::printf("\nTuning cache: %s (%zu of %zu measured tunables changed)\n", cache_path.c_str(),
                changed, measured);
    const char* mode = std::getenv("VKFORMER_TUNING");
    if (mode && std::string(mode) == "static")
      std::printf("VKFORMER_TUNING=static is set: processes ignore the cache while it is.\n");
  }
  std::printf("Took %.1f s of a %.0f s budget%s.\n", report.took_s, s.budget_s,
              report.budget_spent ? " (spent: the tunables not reached keep the static table)" : "");
  if (!o.json_path.empty()) {
    const std::string text = report_json(report, s, cache_path).dump(2) + "\n";
    io::OutputFile f(o.json_path, "--json");
    f.write(text.data(), text.size());
    f.close();
  }
  return report.validation_messages ? 1 : 0;
}

}  // namespace

Command add_tune_command(CLI::App& app, const GlobalOptions& globals) {
  auto* sub = app.add_subcommand("tune", kTuneHelp);
  auto o = std::make_shared<TuneOptions>();
  add_gguf_option(*sub, "-m,--model", o->model,
                  "Tune at the shapes of this GGUF language model (its linears at M = 1 and 64, "
                  "its attention and norms) instead of the standard bench set");
  sub->add_option("--budget", o->budget_s,
                  "Wall-clock seconds for the whole sweep (default 120): it stops early, keeping "
                  "what it measured, and the tunables it did not reach keep the static table")
      ->check(CLI::Range(1.0, 1e6))
      ->type_name("SECONDS");
  sub->add_option("--margin", o->margin,
                  "How much faster in total a candidate must be than the static choice, measured "
                  "in the same run, to replace it (default 0.05)")
      ->check(CLI::Range(0.0, 0.9))
      ->type_name("FRACTION");
  sub->add_option("--only", o->only, "Sweep only this tunable (repeatable; ids from --list)")
      ->type_name("ID");
  add_json_file_option(*sub, o->json_path, "Also write every candidate's timings per shape as JSON to FILE");
  sub->add_flag("--list", o->list,
                "List the tunables, their candidates on the device and the shapes, and exit");
  sub->add_flag("--no-save", o->no_save, "Measure and report, but leave the tuning cache alone");
  sub->add_flag("--verify", o->verify,
                "Instead of tuning: run the benchmarks of 'vkformer bench --quick' with the tuned "
                "choices and with the static table side by side (alternating runs in one process) "
                "and report the ratios; exit status 1 if one is slower by more than --margin");
  sub->add_option("--verify-filter", o->verify_filter,
                  "With --verify: the bench ids to run instead of the --quick set (RE2, searched)")
      ->type_name("REGEX");
  return {sub, [&globals, o]() { return run_tune(globals, *o); }};
}

}  // namespace vkformer::cli
