#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
// Fused attention, flash-attention style: out = softmax(q kᵀ * scale + masks) v for one (b, h).
//
// A workgroup owns BR query rows of one (b, h) and walks the keys in tiles of BC. Per tile:
//   1. K tile [BC, D] -> shared (kv_s); q (pre-scaled, [BR, D]) stays in shared all along.
//   2. Scores s = q·kᵀ + mask, -inf where a boolean mask hides the key -> shared [BR, BC].
//   3. V tile [BC, DV] -> kv_s (K is no longer needed) while invocation r < BR updates row r's
//      online softmax: m' = max(m, max_c s), p = exp(s - m'), l' = l exp(m - m') + sum p, and
//      publishes alpha = exp(m - m') for the accumulator.
//   4. acc[r, d] = acc[r, d] * alpha_r + sum_c p[r, c] v[c, d], in registers (ACC per invocation).
// At the end out = acc / l, or 0 for a row without a single visible key. Memory is O(BR*D +
// BC*DV) per workgroup whatever Sq and Sk are; the Sq x Sk score matrix never exists. Arithmetic
// is fp32. While m is -inf (every key so far hidden) p and alpha are set explicitly, so -inf
// never meets -inf in a subtraction and no NaN appears.
// Keys the workgroup's last row cannot see (causal) and keys >= key_length (read here, at run
// time, so a KV cache can grow between replays) are never loaded.
// Head dims are push constants under capacities D_CAP/DV_CAP that size shared memory and the
// accumulators; the accumulator loop (ACC) unrolls so acc stays in registers, the loop over the
// tile's keys in step 4 does not (unrolling both made lavapipe's JIT take seconds per pipeline).

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 128;
layout(constant_id = 1) const uint BR = 16;        // query rows per workgroup (<= WG)
layout(constant_id = 2) const uint BC = 16;        // keys per tile
// Capacities, not the head dims themselves (push constants): one pipeline serves every D <= D_CAP.
layout(constant_id = 3) const uint D_CAP = 64;     // >= D, head dim of q and k
layout(constant_id = 4) const uint DV_CAP = 64;    // >= DV, head dim of v
layout(constant_id = 5) const uint KV_CAP = 65;    // >= kv_stride = max(D, DV) + 1
layout(constant_id = 6) const bool HAS_MASK = false;
layout(constant_id = 7) const bool HAS_KEY_PADDING = false;
layout(constant_id = 8) const bool HAS_KEY_LENGTH = false;
layout(constant_id = 9) const bool CAUSAL = false;

const uint ACC = (BR * DV_CAP + WG - 1) / WG;  // accumulator elements per invocation

// Absent optional inputs are bound to q and never read.
layout(set = 0, binding = 0) readonly buffer Q { T q[]; };   // [B, H, Sq, D]
layout(set = 0, binding = 1) readonly buffer K { T k[]; };   // [B, H, Sk, D]
layout(set = 0, binding = 2) readonly buffer V { T v[]; };   // [B, H, Sk, DV]
layout(set = 0, binding = 3) readonly buffer Mask { T mask[]; };
layout(set = 0, binding = 4) readonly buffer KeyPadding { int key_padding[]; };  // [B, Sk]
layout(set = 0, binding = 5) readonly buffer KeyLength { int key_length[]; };   // [1]
layout(set = 0, binding = 6) writeonly buffer Out { T o[]; };  // [B, H, Sq, DV]
layout(push_constant) uniform Push {
  uint sq;
  uint sk;
  uint heads;
  uint q_blocks;          // ceil(sq / BR)
  uint groups;            // B * H * q_blocks
  float scale;
  uint d;                 // head dim of q and k
  uint dv;                // head dim of v
  uint kv_stride;         // row stride of kv_s: max(d, dv) + 1, odd for even dims (bank conflicts)
  uint mask_stride[4];    // over [B, H, Sq, Sk]; 0 where the mask broadcasts
} p;

shared float q_s[BR * D_CAP];   // [BR, d], packed
shared float kv_s[BC * KV_CAP]; // [BC, kv_stride]
shared float p_s[BR * BC];  // scores, then probabilities
shared float row_m[BR];     // running max of row r
shared float row_l[BR];     // running sum of exp(s - row_m)
shared float row_alpha[BR]; // rescale factor of this tile

void main() {
  uint group = flat_workgroup_id();
  if (group >= p.groups) return;  // uniform: the whole workgroup leaves
  uint t = gl_LocalInvocationID.x;
  uint bh = group / p.q_blocks;
  uint q0 = (group % p.q_blocks) * BR;
  uint b = bh / p.heads, h = bh % p.heads;
  uint rows = min(BR, p.sq - q0);  // valid query rows in this block

  const uint D = p.d, DV = p.dv, KV_STRIDE = p.kv_stride;
  uint q_base = (bh * p.sq + q0) * D;
  for (uint e = t; e < BR * D; e += WG)
    q_s[e] = e / D < rows ? float(q[q_base + e]) * p.scale : 0.0;
  if (t < BR) {
    row_m[t] = NEG_INF;
    row_l[t] = 0.0;
  }
  float acc[ACC];
  for (uint a = 0; a < ACC; ++a) acc[a] = 0.0;

  // Keys at or past key_end are hidden from every row of the block.
  int key_end = int(p.sk);
  if (HAS_KEY_LENGTH) key_end = min(key_end, key_length[0]);
  int causal_shift = int(p.sk) - int(p.sq);  // row i sees keys j <= i + causal_shift
  if (CAUSAL) key_end = min(key_end, int(q0 + rows - 1) + causal_shift + 1);
  uint keys = uint(max(key_end, 0));

  uint k_base = bh * p.sk * D, v_base = bh * p.sk * DV;
  uint mask_base = b * p.mask_stride[0] + h * p.mask_stride[1];
  for (uint c0 = 0; c0 < keys; c0 += BC) {
    barrier();  // the previous tile's V and probabilities are consumed
    for (uint e = t; e < BC * D; e += WG) {
      uint c = e / D, d = e % D;
      kv_s[c * KV_STRIDE + d] = c0 + c < keys ? float(k[k_base + (c0 + c) * D + d]) : 0.0;
    }
    barrier();

    for (uint e = t; e < BR * BC; e += WG) {
      uint r = e / BC, c = e % BC, j = c0 + c;
      float s = NEG_INF;
      bool visible = r < rows && j < keys;
      if (CAUSAL) visible = visible && int(j) <= int(q0 + r) + causal_shift;
      if (HAS_KEY_PADDING && visible) visible = key_padding[b * p.sk + j] == 0;
      if (visible) {
        float dot_qk = 0.0;
        for (uint d = 0; d < D; ++d) dot_qk += q_s[r * D + d] * kv_s[c * KV_STRIDE + d];
        s = dot_qk;
        if (HAS_MASK)
          s += float(mask[mask_base + (q0 + r) * p.mask_stride[2] + j * p.mask_stride[3]]);
      }
      p_s[e] = s;
    }
    barrier();

    for (uint e = t; e < BC * DV; e += WG) {
      uint c = e / DV, d = e % DV;
      kv_s[c * KV_STRIDE + d] = c0 + c < keys ? float(v[v_base + (c0 + c) * DV + d]) : 0.0;
    }
    if (t < BR) {
      float m_old = row_m[t], m_new = m_old;
      for (uint c = 0; c < BC; ++c) m_new = max(m_new, p_s[t * BC + c]);
      float alpha = 1.0, l = row_l[t];
      if (m_new == NEG_INF) {
        for (uint c = 0; c < BC; ++c) p_s[t * BC + c] = 0.0;
      } else {
        alpha = exp(m_old - m_new);  // 0 when m_old is -inf: the accumulator is still zero
        l *= alpha;
        for (uint c = 0; c < BC; ++c) {
          float pc = exp(p_s[t * BC + c] - m_new);
          p_s[t * BC + c] = pc;
          l += pc;
        }
      }
      row_m[t] = m_new;
      row_l[t] = l;
      row_alpha[t] = alpha;
    }
    barrier();

    for (uint a = 0; a < ACC; ++a) {
      uint e = t + a * WG;
      if (e < BR * DV) {
        uint r = e / DV, d = e % DV;
        float sum = acc[a] * row_alpha[r];
        [[dont_unroll]] for (uint c = 0; c < BC; ++c) sum += p_s[r * BC + c] * kv_s[c * KV_STRIDE + d];
        acc[a] = sum;
      }
    }
  }
  barrier();  // row_l is visible even when no tile ran

  uint o_base = (bh * p.sq + q0) * DV;
  for (uint a = 0; a < ACC; ++a) {
    uint e = t + a * WG;
    if (e < rows * DV) {
      float l = row_l[e / DV];
      o[o_base + e] = T(l > 0.0 ? acc[a] / l : 0.0);
    }
  }
}
