#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_16bit_storage : require
#include "common.glsl"
#include "rope.glsl"
#include "kv_cache_types.glsl"
// rope_kv_cache.comp for caches in another type than the activations T (K_TYPE and V_TYPE of
// kv_cache_types.glsl: f32, f16, q8_0, q4_0, each cache its own): the same rotation of q and k
// and the same rows written, each row of k and v stored in its cache's type as it is written.
// Quantized as ggml's quantize_row_q8_0 / q4_0 reference: per block of 32,
//   q8_0: d = amax / 127, q = round(x / d) (halves away from zero), stored d in f16;
//   q4_0: m = the element of largest magnitude (with its sign), d = m / -8,
//         q = min(15, int(x / d + 8.5)), stored d in f16;
// the reciprocal 1 / d (0 where d = 0) multiplied as ggml does.
//
// A block spans 16 column pairs, so a row is built in shared memory first: invocation x
// rotates its pair (as rope_kv_cache.comp) into k_row and copies its v pair into v_row; after a
// barrier, invocation x stores the halfword(s) of its pair's place in the cache: element pair
// (2x, 2x + 1) of f16 and q8_0 (one halfword), f32's four, for q4_0 the byte pairs (x < 8 of a
// block: elements 2x', 2x' + 1 and 16 later ones), and the block's first invocation its scale,
// each taking its block's scale from the shared row itself (32 reads, cheaper than another
// barrier). The caches are bound as 16-bit words: blocks are 2-byte aligned only, and 16-bit
// stores let neighbouring invocations write neighbouring halfwords without a race.
//
// The attention rotation (KvRotation, llama.cpp's for quantized caches): with ROT_K > 0 the
// rotated queries (the group's rows, in q_rows) and the key row are multiplied by the
// orthonormal Walsh-Hadamard matrix of blocks of ROT_K values, with ROT_V > 0 the value row by
// that of ROT_V, between the rope and the quantization: the fast Walsh-Hadamard transform in
// shared memory, log2 n passes in which invocation x computes butterfly x of every rotated row,
// a barrier after each (the n² sums of a pair's outputs it replaced made the rotation most of
// what q8_0 caches cost a 2048-token prompt, bench/RESULTS.md). q·kᵀ is unchanged; a channel of
// large keys is spread over the whole block instead of deciding the scale of its 32.

layout(local_size_x_id = 0) in;  // ceil(D / 2) rounded up to a multiple of the subgroup
layout(constant_id = 1) const uint NEOX = 0;
layout(constant_id = 2) const bool PER_SEQUENCE = false;
layout(constant_id = 3) const uint ROWS = 1;  // rows per workgroup
layout(constant_id = 4) const uint K_TYPE = KV_Q8_0;
layout(constant_id = 5) const uint V_TYPE = KV_Q8_0;
layout(constant_id = 6) const uint ROW_CAP = 64;  // >= D: 2 x the workgroup size
layout(constant_id = 7) const uint ROT_K = 0;     // Hadamard block of q and k (0: none)
layout(constant_id = 8) const uint ROT_V = 0;     // Hadamard block of v (0: none)
layout(constant_id = 9) const uint Q_ROWS = 1;    // the group's query rows (ROT_K > 0)

layout(set = 0, binding = 6) writeonly buffer CacheK { uint16_t cache_k[]; };
layout(set = 0, binding = 7) writeonly buffer CacheV { uint16_t cache_v[]; };
#include "rope_kv_cache.glsl"

shared float k_row[ROW_CAP];
shared float v_row[ROW_CAP];
shared float q_rows[Q_ROWS * ROW_CAP];  // ROT_K > 0: the group's rotated queries

#include "kv_cache_row.glsl"

void main() {
  const uint x = gl_LocalInvocationID.x;
  const bool in_row = 2u * x < p.d;  // no early return: every invocation reaches the barriers
  const uint chunk = gl_WorkGroupID.x, local = gl_WorkGroupID.y;
  const RopeKvItem it = rope_kv_item(local);
  const bool rotates = x < p.half_dims;
  uint ia = 2u * x, ib = ia + 1u;
  if (rotates && NEOX != 0u) {
    ia = x;
    ib = x + p.half_dims;
  }
  const bool second = ib < p.d;
  const float inv = rotates ? inv_freq[x] : 0.0;
  const uint k_row_hw = row_halfwords(K_TYPE, p.d), v_row_hw = row_halfwords(V_TYPE, p.d);
  const uint s_end = min(chunk * ROWS + ROWS, p.s);
  for (uint s = chunk * ROWS; s < s_end; ++s) {
    const uint row = it.first + s;
    const uint q_dst = ((it.b * p.heads + it.g * p.group) * p.s + s) * p.d;
    if (in_row) {
      const uint v_src = (it.b * p.s + s) * p.v_stride + p.v_off + it.g * p.d;
      v_row[2u * x] = float(src_v[v_src + 2u * x]);
      if (2u * x + 1u < p.d) v_row[2u * x + 1u] = float(src_v[v_src + 2u * x + 1u]);
      const uint k_src = (it.b * p.s + s) * p.k_stride + p.k_off + it.g * p.d;
      const uint q_src = (it.b * p.s + s) * p.q_stride + p.q_off + it.g * p.group * p.d;
      if (!rotates) {  // copies, exact whatever the values
        k_row[ia] = float(src_k[k_src + ia]);
        if (second) k_row[ib] = float(src_k[k_src + ib]);
        for (uint i = 0; i < p.group; ++i) {
          if (ROT_K != 0u) {
            q_rows[i * ROW_CAP + ia] = float(src_q[q_src + i * p.d + ia]);
            if (second) q_rows[i * ROW_CAP + ib] = float(src_q[q_src + i * p.d + ib]);
            continue;
          }
          q_out[q_dst + i * p.s * p.d + ia] = src_q[q_src + i * p.d + ia];
          if (second) q_out[q_dst + i * p.s * p.d + ib] = src_q[q_src + i * p.d + ib];
        }
      } else {
        const vec2 cs = rope_cos_sin(clamp(p.base + int(row), 0, kMaxPosition), inv);
        float xa = float(src_k[k_src + ia]), xb = float(src_k[k_src + ib]);
        // Rounded to T first, as rope_kv_cache.comp stores a T cache: the same keys, then
        // quantized.
        k_row[ia] = float(T(xa * cs.x - xb * cs.y));
        k_row[ib] = float(T(xa * cs.y + xb * cs.x));
        for (uint i = 0; i < p.group; ++i) {
          xa = float(src_q[q_src + i * p.d + ia]);
          xb = float(src_q[q_src + i * p.d + ib]);
          if (ROT_K != 0u) {  // rotated below, rounded to T once
            q_rows[i * ROW_CAP + ia] = xa * cs.x - xb * cs.y;
            q_rows[i * ROW_CAP + ib] = xa * cs.y + xb * cs.x;
            continue;
          }
          q_out[q_dst + i * p.s * p.d + ia] = T(xa * cs.x - xb * cs.y);
          q_out[q_dst + i * p.s * p.d + ib] = T(xa * cs.y + xb * cs.x);
        }
      }
    }
    barrier();  // the row is in shared memory
    if (ROT_K != 0u || ROT_V != 0u) {
      // The fast transform in place: pass h, butterfly x of each rotated row, a barrier a pass.
      for (uint h = 1u; h < max(ROT_K, ROT_V); h <<= 1) {
        if (in_row) {
          if (h < ROT_K) {
            for (uint i = 0; i < p.group; ++i) HADAMARD_ROW_PASS(q_rows, i * ROW_CAP, x, h, ROT_K)
            HADAMARD_ROW_PASS(k_row, 0u, x, h, ROT_K)
          }
          if (h < ROT_V) HADAMARD_ROW_PASS(v_row, 0u, x, h, ROT_V)
        }
        barrier();  // the pass is in shared memory
      }
      if (in_row && ROT_K != 0u)
        for (uint i = 0; i < p.group; ++i) {
          q_out[q_dst + i * p.s * p.d + 2u * x] = T(q_rows[i * ROW_CAP + 2u * x]);
          q_out[q_dst + i * p.s * p.d + 2u * x + 1u] = T(q_rows[i * ROW_CAP + 2u * x + 1u]);
        }
    }
    if (in_row) {
      STORE_ROW(cache_k, k_row, K_TYPE, (it.dst_slice * p.t + row) * k_row_hw, x)
      STORE_ROW(cache_v, v_row, V_TYPE, (it.dst_slice * p.t + row) * v_row_hw, x)
    }
    barrier();  // the row is stored before the next one overwrites it
  }
}
