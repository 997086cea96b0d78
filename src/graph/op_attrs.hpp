#pragma once
// The attributes each op kind carries in a graph node. Optional tensor arguments are node inputs
// in a fixed order; the has_* flags say which are present.
#include <cstdint>
#include <optional>
#include <variant>
#include <vector>

#include "vkformer/graph.hpp"

namespace vkformer {

enum class OpKind : uint8_t {
  input,
  constant,
  external,
  reshape,
  matmul,
  scale,
  softmax,
  split_heads,
  concat_heads,
  attention,
  add,
  layer_norm,
  activation,
  cast,
  embedding,
  positional_encoding,
  update_cache,
  add_layer_norm,
  pool,
  l2_normalize,
  mul,
  swiglu,
  rms_norm,
  rope,
  rope_kv_cache,
  cache_after,
  hadamard,
  rope_shift,
  argmax,
  count
};

struct MatmulAttrs {  // inputs: a, b, [bias], [norm], [residual]
  bool transpose_b = false;
  bool has_bias = false;
  float alpha = 1.0f;
  Activation activation = Activation::none;
  // linear's fusions (LinearOptions)
  bool has_norm = false;
  float norm_eps = 0.0f;
  bool gated = false;
  bool has_residual = false;
};
struct ScaleAttrs {  // inputs: x
  float alpha = 1.0f;
  float cap = 0.0f;  // > 0: soft_cap, cap * tanh(x / cap), instead of alpha * x
};
struct SoftmaxAttrs {  // inputs: x, [mask], [key_padding_mask]
  float scale = 1.0f;
  bool causal = false;
  bool has_mask = false;
  bool has_key_padding_mask = false;
  bool log = false;
};
struct SplitHeadsAttrs {  // inputs: x
  int heads = 1;
  int64_t width = 0;
  int64_t offset = 0;
};
// rope_kv_cache inputs: q, k, v (the same packed [B, S, C] tensor three times, or three), cache_k,
// cache_v, position. Its output is the rotated q [B, H, S, D]; each cache after the write is a
// cache_after node (inputs: the rope_kv_cache result, the cache) whose value is the cache's bytes.
struct RopeKvCacheAttrs {
  int heads = 1, kv_heads = 1;
  int64_t q_offset = 0, k_offset = 0, v_offset = 0;  // first column of each in its rows
  RopeOptions::Style style = RopeOptions::Style::interleaved;
  int64_t dims = 0;
  double freq_base = 10000.0;
  double freq_scale = 1.0;
  std::vector<float> freq_factors;
  int64_t offset = 0;
  bool has_cache_slot = false;  // a seventh input: the cache batch of each batch item
  int rotate_k = 0, rotate_v = 0;  // KvRotation's Hadamard blocks (0: none)
  // Set by the executor, not the graph: the attention that reads this decoding step's rotated q
  // rotates it itself and writes the caches (AttentionAttrs::rope_kv), so this node lowers to
  // nothing.
  bool in_attention = false;
};
struct AttentionAttrs {  // inputs: q, k, v, [mask], [key_padding_mask], [key_length], [kv_slot]
  float scale = 1.0f;
  bool causal = false;
  bool causal_at_key_length = false;  // AttentionOptions::causal_at_key_length
  bool has_mask = false;
  bool has_key_padding_mask = false;
  bool has_key_length = false;
  bool has_kv_slot = false;  // per-sequence KV slots (AttentionOptions::kv_slot)
  float softcap = 0.0f;      // > 0: soft-capped scores (AttentionOptions::softcap)
  AttentionOptions::Path path = AttentionOptions::Path::automatic;
  // Set by the executor, not the graph (src/graph/executor_build.cpp): q is a decoding step's
  // rope_kv_cache result and k, v its caches after the write; that op's work is this node's, its
  // inputs q, k, v, cache_k, cache_v and position follow the ones above.
  std::optional<RopeKvCacheAttrs> rope_kv;
  // Also set by the executor: the node is the linear y = residual + concat_heads(attention) · W_Oᵀ
  // of such a decoding step (its output y [1, 1, N]); W_O and the residual follow the inputs above.
  bool out_proj = false;
};
// layer_norm inputs: x, gamma, beta; add_layer_norm: a, b, gamma, beta; rms_norm: x, weight
// (rms_norm_add: and the residual; rms_norm_qk: qkv, q_weight, k_weight)
struct LayerNormAttrs {
  float eps = 1e-5f;
  int heads = 0, kv_heads = 0;  // rms_norm_qk: query and key/value heads of the packed qkv
};
struct ActivationAttrs {  // inputs: x
  Activation activation = Activation::relu;
};
struct CastAttrs {  // inputs: x
  DType to = DType::f32;
};
struct UpdateCacheAttrs {  // inputs: cache, rows, position
  // Set by the executor, not the graph: rows is then the packed [B, n, C] input of the
  // split_heads that made them (heads of D = the cache's last dim from column `offset`), read in
  // place instead of through the split's copy.
  bool packed = false;
  int64_t offset = 0;
};
struct PositionalEncodingAttrs {  // inputs: x, [offset_tensor]
  float input_scale = 1.0f;
  int64_t offset = 0;
  bool has_offset_tensor = false;
  int64_t max_len = 5000;
};

struct PoolAttrs {  // inputs: x, attention_mask
  PoolMode mode = PoolMode::mean;
};
struct L2NormalizeAttrs {  // inputs: x
  float eps = 1e-12f;
};

struct RopeAttrs {  // inputs: x, [offset_tensor]
  RopeOptions::Style style = RopeOptions::Style::interleaved;
  int64_t dims = 0;
  double freq_base = 10000.0;
  double freq_scale = 1.0;
  std::vector<float> freq_factors;
  int64_t offset = 0;
  bool has_offset_tensor = false;
};

struct HadamardAttrs {  // inputs: x
  int block = 64;
};
struct RopeShiftAttrs {  // inputs: cache, shift (i32 [3]); the output is the cache, moved in place
  bool has_rope = false;  // a key cache: the moved keys turned by the position change
  RopeOptions::Style style = RopeOptions::Style::interleaved;
  int64_t dims = 0;
  double freq_base = 10000.0;
  double freq_scale = 1.0;
  std::vector<float> freq_factors;
  int rotation = 0;  // the keys' KvRotation block (0: none)
};

using OpAttrs = std::variant<std::monostate, MatmulAttrs, ScaleAttrs, SoftmaxAttrs,
                             SplitHeadsAttrs, AttentionAttrs, LayerNormAttrs, ActivationAttrs,
                             CastAttrs, PositionalEncodingAttrs, UpdateCacheAttrs, PoolAttrs,
                             L2NormalizeAttrs, RopeAttrs, RopeKvCacheAttrs, HadamardAttrs,
                             RopeShiftAttrs>;

}  // namespace vkformer
