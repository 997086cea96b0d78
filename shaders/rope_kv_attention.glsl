// What the attention kernels with a decoding step's rope_kv_cache inside share (ROPE_KV:
// attention_flash_decode.comp, attention_rows.comp; src/graph/executor_build.cpp fuses it): the
// new row's unrotated q, k and v (rope_kv_cache.comp's sources) and its rope. The kernel declares
// the push fields of RopeKvPush (src/ops/attention_flash.hpp) at the end of its block and
// defines ROPE_KV_BINDING, the first of the five bindings below, before including this.
#ifndef VKF_ROPE_KV_ATTENTION_GLSL
#define VKF_ROPE_KV_ATTENTION_GLSL

#include "rope.glsl"

layout(set = 0, binding = ROPE_KV_BINDING) readonly buffer SrcQ { T src_q[]; };
layout(set = 0, binding = ROPE_KV_BINDING + 1) readonly buffer SrcK { T src_k[]; };
layout(set = 0, binding = ROPE_KV_BINDING + 2) readonly buffer SrcV { T src_v[]; };
layout(set = 0, binding = ROPE_KV_BINDING + 3) readonly buffer InvFreq { float inv_freq[]; };  // [dims / 2]
layout(set = 0, binding = ROPE_KV_BINDING + 4) readonly buffer Position { int position[]; };   // [1]

// The rotated pair (ia, ib) that column d < 2 * half_dims belongs to, and its frequency i.
uvec3 rope_pair(uint d) {
  const uint h = p.half_dims;
  if (p.neox != 0u) {
    const uint i = d < h ? d : d - h;
    return uvec3(i, i + h, i);
  }
  return uvec3(d & ~1u, d | 1u, d / 2u);
}

// Column d of the row whose first column is buf[base], rotated at position `at` (the pair's
// arithmetic of rope_kv_cache.comp), or copied past the rotated dims, into `out`.
#define ROPE_COLUMN(buf, base, d, at, out)                                              \
  if ((d) >= 2u * p.half_dims) {                                                        \
    out = float(buf[(base) + (d)]);                                                     \
  } else {                                                                              \
    const uvec3 pr = rope_pair(d);                                                      \
    const vec2 cs = rope_cos_sin(at, inv_freq[pr.z]);                                   \
    const float xa = float(buf[(base) + pr.x]), xb = float(buf[(base) + pr.y]);         \
    out = (d) == pr.y ? xa * cs.y + xb * cs.x : xa * cs.x - xb * cs.y;                 \
  }

// The new row: position[0] clamped into the cache of `rows` rows (as rope_kv_cache writes it).
uint rope_kv_row(uint rows) { return uint(clamp(position[0], 0, int(rows) - 1)); }

#endif
