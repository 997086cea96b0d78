#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "rope.glsl"
// A decoder step's attention inputs in one dispatch (Graph::rope_kv_cache): for the S new rows
// at cache position p = position[0] (clamped so the rows fit the cache), with
//   q rows  src_q[b, s, q_off + h D ..],   h < H,
//   k rows  src_k[b, s, k_off + g D ..],   g < Hkv,
//   v rows  src_v[b, s, v_off + g D ..],
//   q_out[b, h, s, :] = rope(q row, p + base + s)
//   cache_k[b, g, p + s, :] = rope(k row, p + base + s),   cache_v[b, g, p + s, :] = v row,
// rope pairing columns (2i, 2i + 1) (NEOX = 0) or (i, i + dims / 2) (NEOX = 1) for i < dims / 2
// and copying columns dims .. D - 1, with rope.glsl's angle. The sources may be one packed
// projection bound three times.
//
// Work items: invocation x < D of workgroup (slot, chunk, slice) of the grid, for each of the
// ROWS rows s of its chunk, where a slice is one (b, g) of the caches' window (the lowering
// splits caches beyond one binding into windows of whole slices), slot < GROUP is query head
// g * GROUP + slot, slot GROUP the key and GROUP + 1 the value head, and x a rotated pair
// (x < dims / 2) or a copied column for q and k, a column for v. The grid replaces divisions by
// run-time values (scalarized on CPU devices) per item; on CPU devices ROWS > 1 also spreads
// each workgroup's set-up and divisions over several rows (a prompt chunk's 64 rows as 960
// one-row workgroups took as long as 5% of its matmuls on lavapipe).
// PER_SEQUENCE (a batched decoding step, one sequence per b): item b writes at its own
// position[b] into batch cache_slot[b] of the caches (bound whole, with more batches than q).

layout(local_size_x_id = 0) in;  // D rounded up to a multiple of the subgroup
layout(constant_id = 1) const uint NEOX = 0;
layout(constant_id = 2) const bool PER_SEQUENCE = false;
layout(constant_id = 3) const uint ROWS = 1;  // rows per workgroup

layout(set = 0, binding = 0) readonly buffer SrcQ { T src_q[]; };
layout(set = 0, binding = 1) readonly buffer SrcK { T src_k[]; };
layout(set = 0, binding = 2) readonly buffer SrcV { T src_v[]; };
layout(set = 0, binding = 3) readonly buffer InvFreq { float inv_freq[]; };  // [dims / 2]
layout(set = 0, binding = 4) readonly buffer Position { int position[]; };
layout(set = 0, binding = 5) writeonly buffer QOut { T q_out[]; };
layout(set = 0, binding = 6) writeonly buffer CacheK { T cache_k[]; };
layout(set = 0, binding = 7) writeonly buffer CacheV { T cache_v[]; };
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

void main() {
  const uint j = gl_LocalInvocationID.x;
  if (j >= p.d) return;
  const uint chunks = (p.s + ROWS - 1u) / ROWS;
  const uint slot = gl_WorkGroupID.x, chunk = gl_WorkGroupID.y % chunks, local = gl_WorkGroupID.y / chunks;
  const uint slice = p.slice_base + local;
  const uint b = slice / p.kv_heads, g = slice % p.kv_heads;
  const uint first = uint(clamp(position[PER_SEQUENCE ? b : 0u], 0, int(p.t - p.s)));
  // The cache slice written: this window's, or the sequence's slot (clamped: set_input refuses
  // slots outside the caches, a computed one must not write out of range).
  const uint dst_slice = PER_SEQUENCE
      ? uint(clamp(cache_slot[b], 0, int(p.cache_batches) - 1)) * p.kv_heads + g : local;
  const bool is_q = slot < p.group;
  const uint head = is_q ? g * p.group + slot : g;
  const uint s_end = min(chunk * ROWS + ROWS, p.s);
  for (uint s = chunk * ROWS; s < s_end; ++s) {
    const uint row = first + s;
    if (slot == p.group + 1u) {  // value: a copy
      cache_v[(dst_slice * p.t + row) * p.d + j] = src_v[(b * p.s + s) * p.v_stride + p.v_off + g * p.d + j];
      continue;
    }
    const uint src = is_q ? (b * p.s + s) * p.q_stride + p.q_off + head * p.d
                          : (b * p.s + s) * p.k_stride + p.k_off + head * p.d;
    // Where the row goes: q_out[b, head, s, :] or the key cache's row.
    const uint dst = is_q ? ((b * p.heads + head) * p.s + s) * p.d : (dst_slice * p.t + row) * p.d;
    if (j >= p.half_dims) {  // a copied column, or nothing (j >= D - half_dims)
      const uint c = p.half_dims + j;
      if (c >= p.d) continue;
      if (is_q) q_out[dst + c] = src_q[src + c];
      else cache_k[dst + c] = src_k[src + c];
      continue;
    }
    const int pos = clamp(p.base + int(row), 0, kMaxPosition);
    const vec2 cs = rope_cos_sin(pos, inv_freq[j]);
    const uint ia = NEOX != 0u ? j : 2u * j;
    const uint ib = ia + (NEOX != 0u ? p.half_dims : 1u);
    const float xa = float(is_q ? src_q[src + ia] : src_k[src + ia]);
    const float xb = float(is_q ? src_q[src + ib] : src_k[src + ib]);
    const float ya = xa * cs.x - xb * cs.y, yb = xa * cs.y + xb * cs.x;
    if (is_q) {
      q_out[dst + ia] = T(ya);
      q_out[dst + ib] = T(yb);
    } else {
      cache_k[dst + ia] = T(ya);
      cache_k[dst + ib] = T(yb);
    }
  }
}
