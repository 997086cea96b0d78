#pragma once
// The fused attention paths that are taken before today's scalar kernels where they fit:
// split-K flash decoding (few query rows against a long cache) and flash attention on
// cooperative matrices. Each declares, in one place (attention_flash.cpp's table), its kernels,
// when it fits a problem on the device (the tuning's launch, and kernels the device can run)
// and how it is emitted.
#include <cstdint>
#include <vector>

#include "lowering.hpp"
#include "rope_kv_cache.hpp"
#include "tuning.hpp"

namespace vkformer::ops {

// The operands of one attention node as its lowering sees them (a grouped decoding step may
// have been restacked: src/ops/attention.cpp).
struct AttentionOperands {
  uint32_t q = kNoValue, k = kNoValue, v = kNoValue;
  uint32_t mask = kNoValue, key_padding = kNoValue, key_length = kNoValue;
  uint32_t kv_slot = kNoValue;  // per-sequence KV slots (AttentionOptions::kv_slot)
  uint32_t out = kNoValue;
  bool causal = false;
  bool causal_at_key_length = false;  // causal aligned to key_length (AttentionOptions)
  // A decoding step's rope_kv_cache fused in (AttentionAttrs::rope_kv): the kernel rotates q
  // (rope_in.q_out: the q above before any restacking) and writes the caches; nullptr once its
  // dispatch has been emitted apart (emit_rope_apart).
  const RopeKvCacheAttrs* rope = nullptr;
  RopeKvOperands rope_in;
  // The output projection fused in (AttentionAttrs::out_proj): y = proj_residual + the heads
  // concatenated · proj_weightᵀ, `out` then a temporary [B, H, Sq, DV]; proj_weight is kNoValue
  // once a kernel has done it (src/ops/attention.cpp emits the linear after any other).
  uint32_t proj_weight = kNoValue, proj_residual = kNoValue, proj_y = kNoValue;
};

// The push fields after a kernel's own of the ROPE_KV variants (attention_flash.glsl,
// attention_rows.comp): where the new row's q, k and v start in their projections' rows, and its
// rope.
struct RopeKvPush {
  uint32_t q_stride, k_stride, v_stride;
  uint32_t q_off, k_off, v_off;
  uint32_t q_heads;    // H, before a grouped step is restacked
  uint32_t half_dims;  // rotated dims / 2
  int32_t base;        // the static position offset
  uint32_t neox;       // pairs (i, i + dims / 2), else (2i, 2i + 1)
};

// in.rope's push fields, and its inputs as the ROPE_KV variants bind them after their own: q, k
// and v unrotated, the frequency table, the position (checked as rope_kv_cache checks it).
RopeKvPush rope_kv_push(const Lowering& l, const AttentionOperands& in);
std::vector<Binding> rope_kv_inputs(Lowering& l, const AttentionOperands& in);

// Emits rope_kv_cache's own dispatch where the chosen attention kernel does not rotate and write
// itself, and clears in.rope.
void emit_rope_apart(Lowering& l, AttentionOperands& in);

// The problem the tuning sees for these operands.
kernels::AttentionProblem attention_problem(const Lowering& l, const AttentionOperands& in);

// Throws unsupported where per-sequence KV slots (in.kv_slot) would need k and v split into
// windows: a slot may be anywhere in them. `what` names the kernel.
void require_whole_kv(const Lowering& l, const AttentionOperands& in, size_t windows, const char* what);

// Emits the first path of the table that fits and returns its name ("decode" or "flash"), or
// returns nullptr where none does (then the scalar kernels or the unfused chain run).
const char* emit_flash_paths(Lowering& l, AttentionOperands in);

}  // namespace vkformer::ops
