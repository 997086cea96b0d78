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
// Work items: invocation x < ceil(D / 2) of workgroup (chunk, slice) of the grid, for each of
// the ROWS rows s of its chunk, where a slice is one (b, g) of the caches' window (the lowering
// splits caches beyond one binding into windows of whole slices). Invocation x writes two
// columns of each of the slice's rows: of q (its GROUP query heads g * GROUP + i) and k, the
// rotated pair x (x < dims / 2), with one cos/sin for all of them, or two copied columns
// dims + 2 (x - dims / 2) and the one after; of v, columns 2x and 2x + 1. The grid replaces
// divisions by run-time values (scalarized on CPU devices) per item; on CPU devices ROWS > 1
// also spreads each workgroup's set-up and divisions over several rows (a prompt chunk's 64 rows
// as 960 one-row workgroups took as long as 5% of its matmuls on lavapipe). One invocation per
// column pair, not per column, and one angle per pair for all heads: with an invocation per
// column and a workgroup per head, half the lanes of q and k idled and each of the GROUP + 1
// heads recomputed the same cos/sin.
// PER_SEQUENCE (a batched decoding step, one sequence per b): item b writes at its own
// position[b] into batch cache_slot[b] of the caches (bound whole, with more batches than q).

layout(local_size_x_id = 0) in;  // ceil(D / 2) rounded up to a multiple of the subgroup
layout(constant_id = 1) const uint NEOX = 0;
layout(constant_id = 2) const bool PER_SEQUENCE = false;
layout(constant_id = 3) const uint ROWS = 1;  // rows per workgroup

layout(set = 0, binding = 6) writeonly buffer CacheK { T cache_k[]; };
layout(set = 0, binding = 7) writeonly buffer CacheV { T cache_v[]; };
#include "rope_kv_cache.glsl"

void main() {
  const uint x = gl_LocalInvocationID.x;
  if (2u * x >= p.d) return;
  const uint chunk = gl_WorkGroupID.x, local = gl_WorkGroupID.y;
  const RopeKvItem it = rope_kv_item(local);
  const uint b = it.b, g = it.g, first = it.first, dst_slice = it.dst_slice;
  // The q and k columns of this invocation: a rotated pair, or two copied ones (the second may
  // be past D).
  const bool rotates = x < p.half_dims;
  uint ia = 2u * x, ib = ia + 1u;
  if (rotates && NEOX != 0u) {
    ia = x;
    ib = x + p.half_dims;
  }
  const bool second = ib < p.d;
  const float inv = rotates ? inv_freq[x] : 0.0;
  const uint s_end = min(chunk * ROWS + ROWS, p.s);
  for (uint s = chunk * ROWS; s < s_end; ++s) {
    const uint row = first + s;
    const uint cache_row = (dst_slice * p.t + row) * p.d;
    const uint v_src = (b * p.s + s) * p.v_stride + p.v_off + g * p.d;
    cache_v[cache_row + 2u * x] = src_v[v_src + 2u * x];
    if (2u * x + 1u < p.d) cache_v[cache_row + 2u * x + 1u] = src_v[v_src + 2u * x + 1u];
    const uint k_src = (b * p.s + s) * p.k_stride + p.k_off + g * p.d;
    const uint q_src = (b * p.s + s) * p.q_stride + p.q_off + g * p.group * p.d;
    const uint q_dst = ((b * p.heads + g * p.group) * p.s + s) * p.d;
    if (!rotates) {  // copies, exact whatever the values
      cache_k[cache_row + ia] = src_k[k_src + ia];
      if (second) cache_k[cache_row + ib] = src_k[k_src + ib];
      for (uint i = 0; i < p.group; ++i) {
        q_out[q_dst + i * p.s * p.d + ia] = src_q[q_src + i * p.d + ia];
        if (second) q_out[q_dst + i * p.s * p.d + ib] = src_q[q_src + i * p.d + ib];
      }
      continue;
    }
    const vec2 cs = rope_cos_sin(clamp(p.base + int(row), 0, kMaxPosition), inv);
    float xa = float(src_k[k_src + ia]), xb = float(src_k[k_src + ib]);
    cache_k[cache_row + ia] = T(xa * cs.x - xb * cs.y);
    cache_k[cache_row + ib] = T(xa * cs.y + xb * cs.x);
    for (uint i = 0; i < p.group; ++i) {
      xa = float(src_q[q_src + i * p.d + ia]);
      xb = float(src_q[q_src + i * p.d + ib]);
      q_out[q_dst + i * p.s * p.d + ia] = T(xa * cs.x - xb * cs.y);
      q_out[q_dst + i * p.s * p.d + ib] = T(xa * cs.y + xb * cs.x);
    }
  }
}
