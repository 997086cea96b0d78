#pragma once
// What `vkformer tune` may change on a device, declared once per kernel path.
//
// A Tunable names one choice of the static table (src/kernels/tuning*.cpp): its candidate values
// for a device, the static choice first, each with how it changes a Tuning; and which ops, at
// which shapes, time it. Three users share that one list:
//   - the tuner (tools/cli/cmd_tune.cpp) times every candidate beside the static choice and keeps a
//     candidate only where it beats the static one by a margin measured in the same run;
//   - the tuning cache (tuning_cache.cpp) stores winners as (id, value text) and applies a
//     stored value only if it is still one of the candidates, so the cache can only ever pick
//     a configuration the code offers (anything else is stale);
//   - tests/tunables_test.cpp runs every candidate of every tunable against the references.
//
// A new matmul path declares its tunables in its own entry of the matmul path table
// (MatmulPathEntry::tunables, matmul_paths_*.cpp); nothing else changes. all_tunables() sweeps
// them after the ones its order names (tunables.cpp).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tuning.hpp"
#include "vkformer/dtype.hpp"

namespace vkformer::kernels {

// The ops that time candidates; the tuner builds one graph per (op, shape).
enum class TuneOp : uint8_t {
  linear,            // x·Wᵀ + bias, W [n, k] in the activation dtype (nn.Linear)
  matmul,            // A·B, B [k, n]
  linear_quantized,  // x·Wᵀ, W [n, k] in a ggml block dtype (`weight`), activations `dtype`
  attention,         // fused attention, q [batch, heads, m, head_dim], k/v [batch, kv_heads, n, ..]
  softmax,           // `m` rows of `n` (attention scores)
  layer_norm,        // `m` rows of `n`
  rms_norm,          // `m` rows of `n`
};
const char* tune_op_name(TuneOp op);

// One shape of one op, as the tuner times it.
struct TuneShape {
  TuneOp op = TuneOp::linear;
  DType dtype = DType::f32;   // activations
  DType weight = DType::f32;  // linear_quantized: the weight's block type
  int64_t m = 1, n = 1, k = 1;
  int64_t batch = 1, heads = 1, kv_heads = 1, head_dim = 64;  // attention
  bool causal = false;                                        // attention
  std::string text() const;  // "linear f32 m=64 n=1536 k=576", stable: used in reports
};

// One value of a tunable: `text` is what `vkformer tune` prints and the cache stores (in the
// syntax of the tunable's environment variable where it has one); `apply` sets it.
struct TunableValue {
  std::string text;
  std::function<void(Tuning&)> apply;
};

// Rule: each tunable owns its fields of Tuning (no two change the same field), and its candidate
// list depends only on the device and on fields no tunable changes or it owns itself. Then the
// tuner may sweep them in any order and the cache apply them in this one.
struct Tunable {
  std::string id;           // "matmul.texel.nt": the cache key, stable across versions
  std::string env;          // the override that wins over the cache ("" if none): while it is
                            // set, neither the tuner nor the cache touches this tunable
  std::string description;  // one line for `vkformer tune --list`
  std::vector<TuneOp> ops;  // the ops whose shapes time it
  // Which of those shapes it affects (null: all), e.g. only M = 1 for a mat-vec tiling.
  std::function<bool(const TuneShape&)> measures;
  // The candidates on a device whose tuning is `base` (the static table, with the winners of
  // the tunables before this one applied): the current choice first, then the others, each
  // fitting the device. Fewer than two: the tunable does not apply there.
  std::function<std::vector<TunableValue>(const DeviceInfo&, const Tuning& base)> candidates;
};

// Every tunable, in the order the tuner sweeps them and the cache applies them.
const std::vector<Tunable>& all_tunables();
const Tunable* find_tunable(const std::string& id);

// Whether the tunable's environment override is set (then it is left alone).
bool tunable_overridden(const Tunable& t);

// The candidate of `t` on this device whose text is `text`, or nullptr.
const TunableValue* find_candidate(const std::vector<TunableValue>& candidates,
                                   const std::string& text);

// Attention's (tunables_attention.cpp). Each matmul path declares its own in its entry of the
// matmul path table (MatmulPathEntry::tunables, matmul_paths_*.cpp), and the row reductions'
// is in tunables.cpp.
void add_attention_tunables(std::vector<Tunable>& list);

}  // namespace vkformer::kernels
