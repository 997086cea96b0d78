#pragma once
// The fused attention paths that are taken before today's scalar kernels where they fit:
// split-K flash decoding (few query rows against a long cache) and flash attention on
// cooperative matrices. Each declares, in one place (attention_flash.cpp's table), its kernels,
// when it fits a problem on the device (the tuning's launch, and kernels the device can run)
// and how it is emitted.
#include <cstdint>

#include "lowering.hpp"
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
};

// The problem the tuning sees for these operands.
kernels::AttentionProblem attention_problem(const Lowering& l, const AttentionOperands& in);

// Throws unsupported where per-sequence KV slots (in.kv_slot) would need k and v split into
// windows: a slot may be anywhere in them. `what` names the kernel.
void require_whole_kv(const Lowering& l, const AttentionOperands& in, size_t windows, const char* what);

// Emits the first path of the table that fits and returns its name ("decode" or "flash"), or
// returns nullptr where none does (then the scalar kernels or the unfused chain run).
const char* emit_flash_paths(Lowering& l, const AttentionOperands& in);

}  // namespace vkformer::ops
