#pragma once
// What the tunable declarations (beside each matmul path in matmul_paths_*.cpp, and
// tunables_attention.cpp) build their candidate lists from: a list without duplicates, the
// device-limit checks, value texts, and the two shapes most tunables have — a list of values of a
// few fields of Tuning, or a single integer of it — each with its static value first.
#include <cstdint>
#include <initializer_list>
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

inline bool is_pow2(uint32_t v) { return v && !(v & (v - 1)); }

// "AxBxC" from numbers (sep "x"), as the VKFORMER_* overrides write blocks and tiles.
inline std::string join(std::initializer_list<uint32_t> v, const char* sep = "x") {
  std::string s;
  // Two appends, not (sep) + to_string(x): GCC 12 warns falsely (-Wrestrict) on that form.
  for (uint32_t x : v) s.append(s.empty() ? "" : sep).append(std::to_string(x));
  return s;
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

// A tunable whose candidates are values of type V (a block, a tiling: a few fields of Tuning).
template <class V>
struct ListChoice {
  bool (*applies)(const Tuning& base);               // false: its kernel is not taken here
  std::function<V(const Tuning& base)> current;      // the static value, the first candidate
  std::vector<V> others;                             // the values to time beside it ...
  std::vector<V> (*others_on)(const DeviceInfo&) = nullptr;  // ... and these, if set
  std::function<bool(const DeviceInfo&, const Tuning& base, const V&)> fits;  // empty: all fit
  std::function<std::string(const V&)> text;         // as its VKFORMER_* override writes it
  std::function<void(Tuning&, const V&)> apply;      // sets its fields
};

// `t` with the candidates of `choice`: the static value first, then the others that fit, each
// once.
template <class V>
Tunable list_tunable(Tunable t, ListChoice<V> choice) {
  t.candidates = [choice](const DeviceInfo& info, const Tuning& base) {
    Candidates c;
    if (!choice.applies(base)) return c.take();
    std::vector<V> values{choice.current(base)};
    values.insert(values.end(), choice.others.begin(), choice.others.end());
    if (choice.others_on) {
      const std::vector<V> more = choice.others_on(info);
      values.insert(values.end(), more.begin(), more.end());
    }
    for (const V& v : values)
      if (!choice.fits || choice.fits(info, base, v))
        c.add(choice.text(v), [apply = choice.apply, v](Tuning& u) { apply(u, v); });
    return c.take();
  };
  return t;
}

// A tunable that sets one integer of Tuning.
struct IntegerChoice {
  uint32_t& (*field)(Tuning&);             // the integer it sets
  bool (*applies)(const Tuning& base);     // false: its kernel is not taken on this device
  std::vector<uint32_t> others;            // the values to time beside the static one ...
  std::vector<uint32_t> (*others_on)(const DeviceInfo&) = nullptr;  // ... and these, if set
  bool (*fits)(const DeviceInfo&, uint32_t) = nullptr;              // null: every value fits
};

// `t` with the candidates of `choice` (list_tunable's, as decimal text).
inline Tunable integer_tunable(Tunable t, IntegerChoice choice) {
  ListChoice<uint32_t> list{
      .applies = choice.applies,
      .current = [field = choice.field](const Tuning& base) {
        Tuning read = base;  // the field accessor takes a mutable Tuning
        return field(read);
      },
      .others = std::move(choice.others),
      .others_on = choice.others_on,
      .text = [](const uint32_t& v) { return std::to_string(v); },
      .apply = [field = choice.field](Tuning& u, const uint32_t& v) { field(u) = v; }};
  if (choice.fits)
    list.fits = [fits = choice.fits](const DeviceInfo& info, const Tuning&, const uint32_t& v) {
      return fits(info, v);
    };
  return list_tunable(std::move(t), std::move(list));
}

}  // namespace vkformer::kernels::tunable_candidates
