// What rope_kv_cache.comp and rope_kv_cache_quant.comp share: their inputs, the push block
// (RopeKvCachePush in src/ops/rope_kv_cache.cpp) and the work item's columns. The kernel declares
// its caches (bindings 6 and 7) and PER_SEQUENCE before including this.
#ifndef VKF_ROPE_KV_CACHE_GLSL
#define VKF_ROPE_KV_CACHE_GLSL

layout(set = 0, binding = 0) readonly buffer SrcQ { T src_q[]; };
layout(set = 0, binding = 1) readonly buffer SrcK { T src_k[]; };
layout(set = 0, binding = 2) readonly buffer SrcV { T src_v[]; };
layout(set = 0, binding = 3) readonly buffer InvFreq { float inv_freq[]; };  // [dims / 2]
layout(set = 0, binding = 4) readonly buffer Position { int position[]; };
layout(set = 0, binding = 5) writeonly buffer QOut { T q_out[]; };
layout(set = 0, binding = 8) readonly buffer CacheSlot { int cache_slot[]; };  // [B] (PER_SEQUENCE)
layout(push_constant) uniform Push {
  uint s;          // S new rows
  uint d;          // D
  uint half_dims;  // dims / 2
  uint heads;      // H
  uint kv_heads;   // Hkv
  uint group;      // H / Hkv
  uint t;          // cache rows T
  uint q_stride, k_stride, v_stride;  // elements per (b, s) row of each source
  uint q_off, k_off, v_off;           // first column of the heads in those rows
  uint slice_base;                    // first (b, g) of this dispatch's cache window
  int base;                           // the static position offset
  uint cache_batches;                 // PER_SEQUENCE: batches of the caches
} p;

// Where row s of work item (b, g) reads and writes.
struct RopeKvItem {
  uint b, g;
  uint first;      // the cache row of s = 0
  uint dst_slice;  // the cache slice written
};

RopeKvItem rope_kv_item(uint local) {
  const uint slice = p.slice_base + local;
  RopeKvItem it;
  it.b = slice / p.kv_heads;
  it.g = slice % p.kv_heads;
  it.first = uint(clamp(position[PER_SEQUENCE ? it.b : 0u], 0, int(p.t - p.s)));
  // The cache slice written: this window's, or the sequence's slot (clamped: set_input refuses
  // slots outside the caches, a computed one must not write out of range).
  it.dst_slice = PER_SEQUENCE
      ? uint(clamp(cache_slot[it.b], 0, int(p.cache_batches) - 1)) * p.kv_heads + it.g : local;
  return it;
}

#endif
