#pragma once
// rope_kv_cache's dispatch for callers other than its own node: the attention that a decoding
// step's rope_kv_cache was fused into (AttentionAttrs::rope_kv) emits it where its kernel does
// not rotate and write itself, and checks the position as the op would.
#include <cstdint>

#include "lowering.hpp"

namespace vkformer::ops {

// The values rope_kv_cache reads and writes: the unrotated q, k and v (rows of one packed
// projection or three), the caches, the position, the per-sequence slots (kNoValue: none) and
// the rotated q it yields.
struct RopeKvOperands {
  uint32_t q = kNoValue, k = kNoValue, v = kNoValue;
  uint32_t cache_k = kNoValue, cache_v = kNoValue, position = kNoValue;
  uint32_t cache_slot = kNoValue;
  uint32_t q_out = kNoValue;
};

// The position's bounds for `rows` new rows in a cache of `cache_rows` (Lowering::require_index_bound).
void require_rope_kv_position(Lowering& l, const RopeKvCacheAttrs& a, uint32_t position, int64_t rows,
                              int64_t cache_rows);

// rope_kv_cache's dispatch(es) (shaders/rope_kv_cache*.comp).
void emit_rope_kv_cache(Lowering& l, const RopeKvCacheAttrs& a, const RopeKvOperands& in);

}  // namespace vkformer::ops
