#include "tuning_cache.hpp"

#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "../io/io_util.hpp"
#include "instance.hpp"
#include "kernel_table.hpp"
#include "tunables.hpp"
#include "vkformer/error.hpp"

namespace vkformer::kernels {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

namespace {

constexpr const char* kFormat = "vkformer tuning cache 1";
// A cache file is a few kilobytes; anything much larger is not one of ours.
constexpr uintmax_t kMaxFileBytes = 1 << 20;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : "";
}

// VKFORMER_TUNING: "static" ignores the cache; "" or "cache" uses it.
bool static_requested() {
  const std::string v = env("VKFORMER_TUNING");
  if (v.empty() || v == "cache") return false;
  if (v == "static") return true;
  throw Error(ErrorCode::invalid_argument,
              "VKFORMER_TUNING='" + v + "': expected static (ignore the tuning cache) or cache "
              "(use it where it matches the device: the default)");
}

// Why the static table applies regardless of any file, or "".
std::string static_reason(const DeviceInfo& info) {
  if (static_requested()) return "VKFORMER_TUNING=static";
  if (vk::env_flag("VKFORMER_TUNING_AS_GPU")) return "VKFORMER_TUNING_AS_GPU is set (a test mode)";
  if (info.uuid.empty()) return "the device reports no UUID";
  return "";
}

std::mutex g_mutex;
std::optional<std::vector<std::pair<std::string, std::string>>> g_trial;  // under g_mutex
std::set<std::string> g_warned;                                            // under g_mutex

void warn_once(const fs::path& path, const std::string& problem) {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (!g_warned.insert(path.string()).second) return;
  }
  std::fprintf(stderr,
               "vkformer: warning: ignoring the tuning cache %s: %s; using the static tuning "
               "table (run 'vkformer tune' to measure again)\n",
               path.string().c_str(), problem.c_str());
}

TuningCacheFile from_json(const json& j) {
  TuningCacheFile f;
  if (!j.is_object()) throw std::runtime_error("not a JSON object");
  if (!j.contains("format") || j["format"] != kFormat)
    throw std::runtime_error("not a vkformer tuning cache of this version (\"format\" is not \"" +
                             std::string(kFormat) + "\")");
  const json& d = j.at("device");
  f.uuid = d.at("uuid").get<std::string>();
  f.device_name = d.at("name").get<std::string>();
  f.driver_version = d.at("driver_version").get<std::string>();
  f.kernels = j.at("kernels").get<std::string>();
  f.vkformer_version = j.value("vkformer_version", "");
  f.date = j.value("date", "");
  f.shapes = j.value("shapes", "");
  f.budget_s = j.value("budget_s", 0.0);
  f.took_s = j.value("took_s", 0.0);
  for (const json& c : j.at("choices")) {
    TunedChoice t;
    t.tunable = c.at("tunable").get<std::string>();
    t.value = c.at("value").get<std::string>();
    t.static_value = c.at("static").get<std::string>();
    t.static_us = c.value("static_us", 0.0);
    t.tuned_us = c.value("tuned_us", 0.0);
    f.choices.push_back(std::move(t));
  }
  return f;
}

json to_json(const TuningCacheFile& f) {
  json j;
  j["format"] = kFormat;
  j["device"] = {{"uuid", f.uuid}, {"name", f.device_name}, {"driver_version", f.driver_version}};
  j["kernels"] = f.kernels;
  j["vkformer_version"] = f.vkformer_version;
  j["date"] = f.date;
  j["shapes"] = f.shapes;
  j["budget_s"] = f.budget_s;
  j["took_s"] = f.took_s;
  j["choices"] = json::array();
  for (const TunedChoice& c : f.choices)
    j["choices"].push_back({{"tunable", c.tunable}, {"value", c.value}, {"static", c.static_value},
                            {"static_us", c.static_us}, {"tuned_us", c.tuned_us}});
  return j;
}

constexpr int kReadAttempts = 50;

// One look at the file: absent (nullopt, no problem), a problem, or its bytes. `transient` is
// set where another process replacing the file could explain the failure.
std::optional<std::string> read_once(const fs::path& path, std::string* problem, bool* transient) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);  // one call: no gap between "exists" and "is a file"
  if (st.type() == fs::file_type::not_found) return std::nullopt;
  if (ec) {
    *transient = true;
    *problem = "cannot be examined: " + ec.message();
    return std::nullopt;
  }
  if (!fs::is_regular_file(st)) {
    *problem = "not a regular file";
    return std::nullopt;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in.is_open()) {
    *transient = true;
    *problem = "cannot be opened";
    return std::nullopt;
  }
  // The size is that of what was read, not a separate stat that a rename could outdate.
  std::string text(kMaxFileBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) {
    *transient = true;
    *problem = "cannot be read";
    return std::nullopt;
  }
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxFileBytes) {
    *problem = "too large for a tuning cache (more than " + std::to_string(kMaxFileBytes) + " bytes)";
    return std::nullopt;
  }
  return text;
}

// The file's bytes, or nullopt with `problem` set (empty when there is no file at all). Another
// process replacing the file renames a whole new one over it; on Windows the old one is renamed
// aside first and may be locked for an instant, so a failure that could be that is retried, and a
// file gone by then is "no file" (the writer puts a whole one back), never a broken one.
std::optional<std::string> read_bytes(const fs::path& path, std::string* problem) {
  for (int attempt = 0;; ++attempt) {
    bool transient = false;
    problem->clear();
    std::optional<std::string> text = read_once(path, problem, &transient);
    if (text || problem->empty() || !transient || attempt + 1 == kReadAttempts) return text;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

// The file, or nullopt with `problem` set (empty when there is no file at all).
std::optional<TuningCacheFile> read_file(const fs::path& path, std::string* problem) {
  const std::optional<std::string> bytes = read_bytes(path, problem);
  if (!bytes) return std::nullopt;
  const size_t size = bytes->size();
  const json j = json::parse(*bytes, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    *problem = "corrupt: not valid JSON (" + std::to_string(size) + " bytes; cut short?)";
    return std::nullopt;
  }
  try {
    return from_json(j);
  } catch (const std::exception& e) {
    *problem = std::string("corrupt: ") + e.what();
    return std::nullopt;
  }
}

// Applies `choices` (tunable id, value) to `t` in the order of all_tunables(), each against the
// candidates of the tuning so far, as the tuner chose them. Returns "" or the first problem;
// `static_values` (optional) are checked against each tunable's current choice. Tunables whose
// environment override is set are skipped and listed in `overridden`.
std::string apply_choices(const DeviceInfo& info,
                          const std::vector<std::pair<std::string, std::string>>& choices,
                          const std::vector<std::string>* static_values, Tuning* t,
                          std::vector<std::string>* overridden) {
  for (size_t i = 0; i < choices.size(); ++i)
    if (!find_tunable(choices[i].first))
      return "unknown tunable '" + choices[i].first + "' (made by another vkformer version)";
  for (const Tunable& tunable : all_tunables()) {
    for (size_t i = 0; i < choices.size(); ++i) {
      if (choices[i].first != tunable.id) continue;
      if (tunable_overridden(tunable)) {
        if (overridden) overridden->push_back(tunable.id + " (" + tunable.env + ")");
        continue;
      }
      const std::vector<TunableValue> candidates = tunable.candidates(info, *t);
      if (candidates.empty())
        return tunable.id + " does not apply to this device any more";
      if (static_values && (*static_values)[i] != candidates.front().text)
        return tunable.id + " was measured against the static choice " + (*static_values)[i] +
               ", which is now " + candidates.front().text;
      const TunableValue* v = find_candidate(candidates, choices[i].second);
      if (!v) return tunable.id + "=" + choices[i].second + " is not one of its candidates any more";
      v->apply(*t);
    }
  }
  return "";
}

std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// Checks a file against the device and the build; returns "" when it applies, and then applies
// it to `t` (left as it was otherwise).
std::string check_and_apply(const DeviceInfo& info, const TuningCacheFile& f, Tuning* t,
                            std::vector<std::string>* overridden) {
  if (f.uuid != info.uuid || f.device_name != info.name)
    return "foreign: made for device '" + f.device_name + "' (UUID " + f.uuid + "), not '" +
           info.name + "' (UUID " + info.uuid + ")";
  if (f.driver_version != info.driver_version)
    return "stale: made with driver version " + f.driver_version + ", the device has " +
           info.driver_version;
  if (f.kernels != kernels_hash())
    return "stale: made for other kernels (" + f.kernels + ", this build has " + kernels_hash() +
           ")";
  std::vector<std::pair<std::string, std::string>> choices;
  std::vector<std::string> statics;
  for (const TunedChoice& c : f.choices) {
    choices.emplace_back(c.tunable, c.value);
    statics.push_back(c.static_value);
  }
  Tuning copy = *t;
  const std::string problem = apply_choices(info, choices, &statics, &copy, overridden);
  if (problem.empty()) *t = copy;
  return problem.empty() ? "" : "stale: " + problem;
}

}  // namespace

fs::path tuning_cache_dir() {
  fs::path cache = env("VKFORMER_CACHE_DIR");
  if (cache.empty()) {
    fs::path base = env("XDG_CACHE_HOME");
    if (base.empty() && !env("HOME").empty()) base = fs::path(env("HOME")) / ".cache";
    if (base.empty() && !env("LOCALAPPDATA").empty()) base = env("LOCALAPPDATA");  // Windows
    if (base.empty()) return {};
    cache = base / "vkformer";
  }
  return cache / "tuning";
}

fs::path tuning_cache_path(const DeviceInfo& info) {
  const fs::path dir = tuning_cache_dir();
  if (dir.empty()) return {};
  // The UUID is hex digits (physical_device.cpp), safe as a file name; a made-up one is not used.
  std::string name = info.uuid;
  for (char& c : name)
    if (!std::isxdigit(static_cast<unsigned char>(c))) c = '_';
  return dir / (name + ".json");
}

const std::string& kernels_hash() {
  static const std::string hash = [] {
    uint64_t h = 1469598103934665603ull;  // FNV-1a, 64 bits
    auto mix = [&h](const void* data, size_t n) {
      const auto* p = static_cast<const unsigned char*>(data);
      for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
    };
    for (size_t i = 0; i < kernels::kVariantCount; ++i) {
      const kernels::VariantEntry& v = kernels::kVariantTable[i];
      mix(v.name, std::strlen(v.name) + 1);
      if (v.spirv) mix(v.spirv, v.words * 4);
    }
    return "fnv1a64:" + hex64(h);
  }();
  return hash;
}

TuningCacheFile tuning_cache_file_for(const DeviceInfo& info) {
  TuningCacheFile f;
  f.uuid = info.uuid;
  f.device_name = info.name;
  f.driver_version = info.driver_version;
  f.kernels = kernels_hash();
  return f;
}

TuningCacheState tuning_cache_state(const DeviceInfo& info) {
  TuningCacheState s;
  s.reason = static_reason(info);
  if (!s.reason.empty()) {
    s.status = TuningCacheState::Status::static_table;
    return s;
  }
  s.path = tuning_cache_path(info);
  if (s.path.empty()) {
    s.status = TuningCacheState::Status::absent;
    return s;
  }
  std::optional<TuningCacheFile> f = read_file(s.path, &s.problem);
  if (!f) {
    s.status = s.problem.empty() ? TuningCacheState::Status::absent
                                 : TuningCacheState::Status::ignored;
    return s;
  }
  Tuning t = tuning_for(info, /*tuned=*/false);
  s.problem = check_and_apply(info, *f, &t, &s.overridden);
  s.status = s.problem.empty() ? TuningCacheState::Status::tuned : TuningCacheState::Status::ignored;
  if (s.problem.empty()) s.choices = f->choices;
  return s;
}

fs::path write_tuning_cache(const DeviceInfo& info, const TuningCacheFile& file) {
  const fs::path path = tuning_cache_path(info);
  if (path.empty())
    throw Error(ErrorCode::io, "tuning cache: no cache directory (set VKFORMER_CACHE_DIR, "
                               "XDG_CACHE_HOME or HOME)");
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  if (ec)
    throw Error(ErrorCode::io, "tuning cache: cannot create " + path.parent_path().string() +
                                   ": " + ec.message());
  const std::string text = to_json(file).dump(2) + "\n";
  io::OutputFile out(path, "tuning cache");  // a temporary file renamed over `path` by close()
  out.write(text.data(), text.size());
  out.close();
  return path;
}

void apply_tuned_choices(const DeviceInfo& info, Tuning* t) {
  std::optional<std::vector<std::pair<std::string, std::string>>> trial;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    trial = g_trial;
  }
  if (trial) {
    Tuning copy = *t;
    const std::string problem = apply_choices(info, *trial, nullptr, &copy, nullptr);
    if (!problem.empty())
      throw Error(ErrorCode::invalid_argument, "tuning trial on device '" + info.name + "': " + problem);
    *t = copy;
    return;
  }
  if (!static_reason(info).empty()) return;
  const fs::path path = tuning_cache_path(info);
  if (path.empty()) return;
  std::string problem;
  std::optional<TuningCacheFile> f = read_file(path, &problem);
  if (f) problem = check_and_apply(info, *f, t, nullptr);
  if (!problem.empty()) warn_once(path, problem);
}

ScopedTuningTrial::ScopedTuningTrial(std::vector<std::pair<std::string, std::string>> choices) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_trial)
    throw Error(ErrorCode::invalid_argument, "a tuning trial is already active in this process");
  g_trial = std::move(choices);
}

ScopedTuningTrial::~ScopedTuningTrial() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_trial.reset();
}

}  // namespace vkformer::kernels
