#pragma once
// The per-device tuning cache: what `vkformer tune` measured, applied where kernels::Tuning is built.
//
// One JSON file per device, ${VKFORMER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/vkformer}/
// tuning/<device UUID>.json (as scripts/fetch_*.sh place models), holding the device's UUID,
// name and driver version, a hash of the kernels (every embedded SPIR-V variant) and one entry
// per tunable measured: its value, and the static choice it was measured against. It applies
// only when all of those still match and every value is still a candidate (tunables.hpp);
// otherwise the whole file is ignored, with one warning per process. Written atomically
// (a temporary file renamed over the old one), so a reader never sees half a file.
//
// Precedence: an environment override (VKFORMER_MATMUL_TILES, ...) > the cache > the static
// table. VKFORMER_TUNING=static ignores the cache; VKFORMER_TUNING_AS_GPU (a test mode) too.
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "tuning.hpp"

namespace vkformer::kernels {

// One tunable as `vkformer tune` left it: `value` is the winner, equal to `static_value` where
// no candidate beat the static choice by the margin. Times: the medians summed over its shapes.
struct TunedChoice {
  std::string tunable;
  std::string value;
  std::string static_value;
  double static_us = 0, tuned_us = 0;
};

struct TuningCacheFile {
  std::string uuid, device_name, driver_version, kernels;  // the key
  std::string vkformer_version, date, shapes;               // how it was made, for people
  double budget_s = 0, took_s = 0;
  std::vector<TunedChoice> choices;
};

// What a device gets: `vkformer devices` reports it.
struct TuningCacheState {
  enum class Status {
    static_table,  // VKFORMER_TUNING=static, VKFORMER_TUNING_AS_GPU, or a device without UUID
    absent,        // no file (or no cache directory: no VKFORMER_CACHE_DIR, XDG_CACHE_HOME, HOME)
    tuned,         // the file applies
    ignored,       // corrupt, stale or foreign: `problem` says why
  };
  Status status = Status::absent;
  std::filesystem::path path;
  std::string problem;
  std::string reason;                // static_table: why
  std::vector<TunedChoice> choices;  // tuned: every entry of the file
  std::vector<std::string> overridden;  // tuned: tunables an environment override keeps
};

// The cache directory for tuning files, or empty when none can be named.
std::filesystem::path tuning_cache_dir();
std::filesystem::path tuning_cache_path(const DeviceInfo& info);  // empty when no directory

// "fnv1a64:<16 hex digits>" over the names and SPIR-V of every kernel variant built in.
const std::string& kernels_hash();

// The key fields of `file` for `info` (uuid, name, driver version, kernels).
TuningCacheFile tuning_cache_file_for(const DeviceInfo& info);

// Reads and checks the device's file without applying it (no warning).
TuningCacheState tuning_cache_state(const DeviceInfo& info);

// Writes `file` for `info` atomically, creating the directory; returns the path. Throws io.
std::filesystem::path write_tuning_cache(const DeviceInfo& info, const TuningCacheFile& file);

// The hook in tuning_for(): applies the trial (below) or the cache to `t`, after the static
// table and the environment overrides. A file that cannot apply prints one warning per process
// and leaves `t` as it was.
void apply_tuned_choices(const DeviceInfo& info, Tuning* t);

// For the tuner and the tests: while one lives, every tuning_for() applies `choices` (tunable
// id, value text) in place of the cache (a value that is not a candidate there throws
// invalid_argument). One at a time per process.
class ScopedTuningTrial {
 public:
  explicit ScopedTuningTrial(std::vector<std::pair<std::string, std::string>> choices);
  ~ScopedTuningTrial();
  ScopedTuningTrial(const ScopedTuningTrial&) = delete;
  ScopedTuningTrial& operator=(const ScopedTuningTrial&) = delete;
};

}  // namespace vkformer::kernels
