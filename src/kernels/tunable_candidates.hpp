#pragma once
// What the tunable declarations (tunables_builtin.cpp, tunables_coopmat.cpp) build their
// candidate lists from: a list without duplicates, the device-limit checks, and the one shape
// most tunables have — a single integer of Tuning, its static value first.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tunables.hpp"

namespace vkformer::kernels::tunable_candidates {

// A candidate list without duplicates: the first value added is the current choice.
class Candidates {
 public:
  void add(std::string text, std::function<void(Tuning&)> apply) {
    if (!find_candidate(list_, text)) list_.push_back({std::move(text), std::move(apply)});
  }
  std::vector<TunableValue> take() { return std::move(list_); }

 private:
  std::vector<TunableValue> list_;
};

inline bool workgroup_fits(const DeviceInfo& info, uint64_t invocations) {
  return invocations >= 1 && invocations <= info.max_workgroup_invocations &&
         invocations <= info.max_workgroup_size[0];
}

// Split-K targets in workgroups: 0 (never split) and multiples of the compute units, a guess
// by device type where the driver does not report them.
inline std::vector<uint32_t> split_targets(const DeviceInfo& info) {
  const uint32_t units = info.compute_units ? info.compute_units : info.type == "discrete" ? 64 : 16;
  return {0u, units, 2 * units, 4 * units, 8 * units};
}

// Which shapes a tunable measures, by the rows of the product: decoding (one row) or more.
inline bool one_row(const TuneShape& s) { return s.m == 1; }
inline bool several_rows(const TuneShape& s) { return s.m > 1; }

// A tunable that sets one integer of Tuning.
struct IntegerChoice {
  uint32_t& (*field)(Tuning&);             // the integer it sets
  bool (*applies)(const Tuning& base);     // false: its kernel is not taken on this device
  std::vector<uint32_t> others;            // the values to time beside the static one ...
  std::vector<uint32_t> (*others_on)(const DeviceInfo&) = nullptr;  // ... and these, if set
  bool (*fits)(const DeviceInfo&, uint32_t) = nullptr;              // null: every value fits
};

// `t` with the candidates of `choice`: the static value first, then the others that fit, each
// once, as decimal text.
inline Tunable integer_tunable(Tunable t, IntegerChoice choice) {
  t.candidates = [choice](const DeviceInfo& info, const Tuning& base) {
    Candidates c;
    if (!choice.applies(base)) return c.take();
    Tuning read = base;  // the field accessor takes a mutable Tuning
    std::vector<uint32_t> values{choice.field(read)};
    values.insert(values.end(), choice.others.begin(), choice.others.end());
    if (choice.others_on) {
      const std::vector<uint32_t> more = choice.others_on(info);
      values.insert(values.end(), more.begin(), more.end());
    }
    for (uint32_t v : values)
      if (!choice.fits || choice.fits(info, v))
        c.add(std::to_string(v), [field = choice.field, v](Tuning& u) { field(u) = v; });
    return c.take();
  };
  return t;
}

}  // namespace vkformer::kernels::tunable_candidates
