#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
// Fused attention for GPUs, flash-attention style: out = softmax(q kᵀ * scale + masks) v for one
// (b, h), with tiles of K and V staged in shared memory. (CPU devices use attention_rows.comp.)
//
// A workgroup of WG invocations owns BR query rows of one (b, h) and walks the keys in tiles of
// BC. q (pre-scaled, [BR, D]) stays in shared memory all along. Per tile:
//   1. K tile [BC, D] -> shared (kv_s).
//   2. Scores s = q·kᵀ (soft-capped with SOFT_CAP) + mask, -inf where a boolean mask hides the
//      key -> shared p_s [BR, BC].
//      Register-blocked: an invocation computes SR x SC scores at a time, reading SR + SC shared
//      values per SR * SC multiply-adds.
//   3. V tile [BC, DV] -> kv_s (K is no longer needed), while G = WG / BR invocations per row run
//      its online softmax in parallel: m' = max(m, max_c s), p = exp(s - m'),
//      l' = l exp(m - m') + sum p; the G partial maxima and sums meet in shared memory.
//   4. acc = acc * exp(m - m') + p v in registers, register-blocked too: an invocation owns
//      OR x OD outputs per unit (KU units), reading OR + OD shared values per OR * OD FMAs.
// At the end out = acc / l, or 0 for a row without a single visible key. Memory is
// O(BR * D + BC * DV) per workgroup whatever Sq and Sk are; the Sq x Sk score matrix never
// exists. Arithmetic is fp32. While m is -inf (every key so far hidden) p and alpha are set
// explicitly, so -inf never meets -inf in a subtraction and no NaN appears.
// Keys the workgroup's last row cannot see (causal) and keys >= key_length (read here, at run
// time, so a KV cache can grow between replays) are never loaded.
// Head dims are push constants under capacities D_CAP/DV_CAP that size shared memory and the
// accumulators: one pipeline serves every D <= D_CAP. BR, BC, WG and the blockings are
// specialization constants (vk::AttentionLaunch); SR | BR, SC | BC, OR | BR and OD | DV_CAP.

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 128;
layout(constant_id = 1) const uint BR = 32;        // query rows per workgroup (<= WG)
layout(constant_id = 2) const uint BC = 32;        // keys per tile
// Capacities, not the head dims themselves (push constants).
layout(constant_id = 3) const uint D_CAP = 64;     // >= D, head dim of q and k
layout(constant_id = 4) const uint DV_CAP = 64;    // >= DV, head dim of v
layout(constant_id = 5) const uint KV_CAP = 65;    // >= kv_stride = max(D, DV) + 1
layout(constant_id = 6) const bool HAS_MASK = false;
layout(constant_id = 7) const bool HAS_KEY_PADDING = false;
layout(constant_id = 8) const bool HAS_KEY_LENGTH = false;
layout(constant_id = 9) const bool CAUSAL = false;
layout(constant_id = 10) const uint SR = 2;        // score block: rows
layout(constant_id = 11) const uint SC = 4;        // score block: keys
layout(constant_id = 12) const uint OR = 4;        // output block: rows
layout(constant_id = 13) const uint OD = 4;        // output block: head-dim columns
layout(constant_id = 14) const bool PER_SEQUENCE = false;  // attention_sequences.glsl
layout(constant_id = 15) const bool SOFT_CAP = false;      // attention_soft_cap.glsl
#ifdef KV_QUANT
// KV_QUANT: k and v in their own types (kv_cache_types.glsl), read as 32-bit words and
// dequantized 4 values per load; head dims are multiples of 32.
#include "kv_cache_types.glsl"
layout(constant_id = 16) const uint K_TYPE = KV_Q8_0;
layout(constant_id = 17) const uint V_TYPE = KV_Q8_0;
#endif

const uint S_UNITS = (BR / SR) * (BC / SC);          // score blocks per tile
const uint O_COLS = DV_CAP / OD;                     // output blocks per row group
const uint O_UNITS = (BR / OR) * O_COLS;             // output blocks
const uint KU = (O_UNITS + WG - 1) / WG;             // output blocks per invocation
const uint G = WG / BR;                              // invocations per row in the softmax

// Absent optional inputs are bound to q and never read.
layout(set = 0, binding = 0) readonly buffer Q { T q[]; };   // [B, H, Sq, D]
#ifdef KV_QUANT
layout(set = 0, binding = 1) readonly buffer K { uint kw[]; };  // [B, Hkv, Sk, D] of K_TYPE
layout(set = 0, binding = 2) readonly buffer V { uint vw[]; };  // [B, Hkv, Sk, DV] of V_TYPE
#define KV_READ_FN kv_read_k
#define KV_READ_BUF kw
#define KV_READ_TYPE K_TYPE
#include "kv_cache_read.glsl"
#define KV_READ_FN kv_read_v
#define KV_READ_BUF vw
#define KV_READ_TYPE V_TYPE
#include "kv_cache_read.glsl"
#else
layout(set = 0, binding = 1) readonly buffer K { T k[]; };   // [B, Hkv, Sk, D]
layout(set = 0, binding = 2) readonly buffer V { T v[]; };   // [B, Hkv, Sk, DV]
#endif
layout(set = 0, binding = 3) readonly buffer Mask { T mask[]; };
layout(set = 0, binding = 4) readonly buffer KeyPadding { int key_padding[]; };  // [B, Sk]
layout(set = 0, binding = 5) readonly buffer KeyLength { int key_length[]; };   // [1]
layout(set = 0, binding = 6) writeonly buffer Out { T o[]; };  // [B, H, Sq, DV]
layout(set = 0, binding = 7) readonly buffer KvSlot { int kv_slot[]; };  // [B] (PER_SEQUENCE)
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
  uint bh_base;           // the first (b, h) of this dispatch: q, k, v and out are bound as
                          // windows from there, the mask and key padding whole
  uint group;             // query heads per KV head (H / Hkv; 1 without grouped-query attention)
  uint kv_batches;        // batches of k and v (PER_SEQUENCE: slots, more than q's)
  float softcap;          // SOFT_CAP: the cap
  uint causal_at_length;  // causal aligned to key_length: row i sees keys j <= i + key_length - sq
} p;

#include "attention_sequences.glsl"
#include "attention_soft_cap.glsl"

const uint PS = BC + 1;     // row stride of p_s (odd: rows of a column in different banks)
shared float q_s[BR * D_CAP];   // [BR, d], packed
shared float kv_s[BC * KV_CAP]; // [BC, kv_stride]
shared float p_s[BR * PS];      // scores, then probabilities
shared float red_m[BR * G];     // softmax partial maxima
shared float red_s[BR * G];     // softmax partial sums
shared float row_m[BR];         // running max of row r
shared float row_m_new[BR];     // this tile's max, until row_m takes it
shared float row_l[BR];         // running sum of exp(s - row_m)
shared float row_alpha[BR];     // rescale factor of this tile

void main() {
  uint group = flat_workgroup_id();
  if (group >= p.groups) return;  // uniform: the whole workgroup leaves
  const uint t = gl_LocalInvocationID.x;
  const uint bh = group / p.q_blocks;
  const uint q0 = (group % p.q_blocks) * BR;
  const uint b = (p.bh_base + bh) / p.heads, h = (p.bh_base + bh) % p.heads;
  const uint rows = min(BR, p.sq - q0);  // valid query rows in this block

  const uint D = p.d, DV = p.dv, KV_STRIDE = p.kv_stride;
  const uint q_base = (bh * p.sq + q0) * D;
  for (uint e = t; e < BR * D; e += WG)
    q_s[e] = e / D < rows ? float(q[q_base + e]) * p.scale : 0.0;
  for (uint r = t; r < BR; r += WG) {
    row_m[r] = NEG_INF;
    row_l[r] = 0.0;
  }
  float acc[KU * OR * OD];
  [[unroll]] for (uint a = 0; a < KU * OR * OD; ++a) acc[a] = 0.0;

  // Keys at or past key_end are hidden from every row of the block.
  int key_end = int(p.sk);
  if (HAS_KEY_LENGTH) key_end = min(key_end, key_length[key_length_index(b)]);
  // Row i sees keys j <= i + causal_shift: the queries are the last sq of the sk keys, or of the
  // key_length valid ones (a KV cache's newest rows, whatever the cache's size).
  const int causal_end =
      HAS_KEY_LENGTH && p.causal_at_length != 0u ? key_length[key_length_index(b)] : int(p.sk);
  const int causal_shift = causal_end - int(p.sq);
  if (CAUSAL) key_end = min(key_end, int(q0 + rows - 1) + causal_shift + 1);
  const uint keys = uint(max(key_end, 0));

  // Grouped-query attention: query head h reads KV head h / group; a window starts at a
  // multiple of group query heads, so its KV slice is bh / group of the KV window.
  const uint kv = kv_slice(b, h, p.heads, p.group, p.kv_batches, bh / p.group);
  const uint k_base = kv * p.sk * D, v_base = kv * p.sk * DV;
  const uint mask_base = b * p.mask_stride[0] + h * p.mask_stride[1];
  for (uint c0 = 0; c0 < keys; c0 += BC) {
    barrier();  // the previous tile's V and probabilities are consumed
#ifdef KV_QUANT
    for (uint e = t; e < BC * D / 4u; e += WG) {
      const uint c = e / (D / 4u), d = 4u * (e % (D / 4u));
      const vec4 x = c0 + c < keys ? kv_read_k(k_base + (c0 + c) * D + d) : vec4(0.0);
      [[unroll]] for (uint i = 0; i < 4u; ++i) kv_s[c * KV_STRIDE + d + i] = x[i];
    }
#else
    for (uint e = t; e < BC * D; e += WG) {
      uint c = e / D, d = e % D;
      kv_s[c * KV_STRIDE + d] = c0 + c < keys ? float(k[k_base + (c0 + c) * D + d]) : 0.0;
    }
#endif
    barrier();

    // 2. Scores, SR x SC at a time; neighbouring invocations take neighbouring key blocks.
    for (uint u = t; u < S_UNITS; u += WG) {
      const uint r0 = (u / (BC / SC)) * SR, cb = u % (BC / SC);
      float s[SR * SC];
      [[unroll]] for (uint e = 0; e < SR * SC; ++e) s[e] = 0.0;
      for (uint d = 0; d < D; ++d) {
        float qv[SR], kv[SC];
        [[unroll]] for (uint i = 0; i < SR; ++i) qv[i] = q_s[(r0 + i) * D + d];
        [[unroll]] for (uint j = 0; j < SC; ++j) kv[j] = kv_s[(cb + j * (BC / SC)) * KV_STRIDE + d];
        [[unroll]] for (uint i = 0; i < SR; ++i)
          [[unroll]] for (uint j = 0; j < SC; ++j) s[i * SC + j] = fma(qv[i], kv[j], s[i * SC + j]);
      }
      [[unroll]] for (uint i = 0; i < SR; ++i) {
        [[unroll]] for (uint jj = 0; jj < SC; ++jj) {
          const uint r = r0 + i, c = cb + jj * (BC / SC), j = c0 + c;
          bool visible = r < rows && j < keys;
          if (CAUSAL) visible = visible && int(j) <= int(q0 + r) + causal_shift;
          if (HAS_KEY_PADDING && visible) visible = key_padding[b * p.sk + j] == 0;
          float sv = NEG_INF;
          if (visible) {
            sv = attention_soft_cap(s[i * SC + jj]);
            if (HAS_MASK)
              sv += float(mask[mask_base + (q0 + r) * p.mask_stride[2] + j * p.mask_stride[3]]);
          }
          p_s[r * PS + c] = sv;
        }
      }
    }
    barrier();

    // 3. V tile, and the online softmax of this tile.
#ifdef KV_QUANT
    for (uint e = t; e < BC * DV / 4u; e += WG) {
      const uint c = e / (DV / 4u), d = 4u * (e % (DV / 4u));
      const vec4 x = c0 + c < keys ? kv_read_v(v_base + (c0 + c) * DV + d) : vec4(0.0);
      [[unroll]] for (uint i = 0; i < 4u; ++i) kv_s[c * KV_STRIDE + d + i] = x[i];
    }
#else
    for (uint e = t; e < BC * DV; e += WG) {
      uint c = e / DV, d = e % DV;
      kv_s[c * KV_STRIDE + d] = c0 + c < keys ? float(v[v_base + (c0 + c) * DV + d]) : 0.0;
    }
#endif
    // G invocations per row: partial maxima, then exp and partial sums.
    const uint g = t % G, r = t / G;
    const bool mine = r < BR;
    if (mine) {
      float mx = NEG_INF;
      for (uint c = g; c < BC; c += G) mx = max(mx, p_s[r * PS + c]);
      red_m[r * G + g] = mx;
    }
    barrier();
    if (mine) {
      float mx = row_m[r];
      for (uint i = 0; i < G; ++i) mx = max(mx, red_m[r * G + i]);
      // m_safe is finite: a row that has seen nothing keeps acc = l = 0 and all p = 0.
      const float m_safe = mx == NEG_INF ? 0.0 : mx;
      float sum = 0.0;
      for (uint c = g; c < BC; c += G) {
        const float sv = p_s[r * PS + c];
        const float pv = sv == NEG_INF ? 0.0 : exp(sv - m_safe);
        p_s[r * PS + c] = pv;
        sum += pv;
      }
      red_s[r * G + g] = sum;
      if (g == 0) {
        row_alpha[r] = row_m[r] == NEG_INF ? 0.0 : exp(row_m[r] - m_safe);
        row_m_new[r] = mx;
      }
    }
    barrier();  // p_s, red_s and row_alpha are complete
    // The row's state moves on; no one reads row_l or row_m before the next tile's barriers.
    if (mine && g == 0) {
      float l = row_l[r] * row_alpha[r];
      for (uint i = 0; i < G; ++i) l += red_s[r * G + i];
      row_l[r] = l;
      row_m[r] = row_m_new[r];
    }

    // 4. acc = acc * alpha + p v, OR x OD outputs per unit.
    [[unroll]] for (uint ku = 0; ku < KU; ++ku) {
      const uint u = t + ku * WG;
      if (u < O_UNITS) {
        const uint r0 = (u / O_COLS) * OR, cd = u % O_COLS;
        [[unroll]] for (uint i = 0; i < OR; ++i) {
          const float alpha = row_alpha[r0 + i];
          [[unroll]] for (uint j = 0; j < OD; ++j) acc[(ku * OR + i) * OD + j] *= alpha;
        }
        for (uint c = 0; c < BC; ++c) {
          float pv[OR], vv[OD];
          [[unroll]] for (uint i = 0; i < OR; ++i) pv[i] = p_s[(r0 + i) * PS + c];
          [[unroll]] for (uint j = 0; j < OD; ++j) vv[j] = kv_s[c * KV_STRIDE + cd + j * O_COLS];
          [[unroll]] for (uint i = 0; i < OR; ++i)
            [[unroll]] for (uint j = 0; j < OD; ++j)
              acc[(ku * OR + i) * OD + j] = fma(pv[i], vv[j], acc[(ku * OR + i) * OD + j]);
        }
      }
    }
  }
  barrier();  // row_l is final and visible even when no tile ran

  const uint o_base = (bh * p.sq + q0) * DV;
  [[unroll]] for (uint ku = 0; ku < KU; ++ku) {
    const uint u = t + ku * WG;
    if (u < O_UNITS) {
      const uint r0 = (u / O_COLS) * OR, cd = u % O_COLS;
      [[unroll]] for (uint i = 0; i < OR; ++i) {
        const uint r = r0 + i;
        const float l = row_l[r];
        [[unroll]] for (uint j = 0; j < OD; ++j) {
          const uint d = cd + j * O_COLS;
          if (r < rows && d < DV) o[o_base + r * DV + d] = T(l > 0.0 ? acc[(ku * OR + i) * OD + j] / l : 0.0);
        }
      }
    }
  }
}
