#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
// Split-K flash decoding: attention for a few query rows against a long KV cache, in fp32.
// A workgroup owns all ROWS = group * sq query rows of one (b, KV head) (the group's query heads
// share every K/V load) and one of `splits` ranges of the keys: keys [s * chunk, (s + 1) * chunk)
// with chunk = ceil(keys / splits), computed at run time from key_length so that the work stays
// balanced while a cache fills (ranges past the valid keys get none). It walks its range in
// tiles of TK keys as attention.comp does: K tile -> shared, scores -> shared, V tile -> shared
// while one invocation per row takes the tile's max, then p = exp(x - m) and acc = acc * alpha
// + p v, OU outputs per invocation.
// attention_flash_decode (splits = 1) writes out = acc / l (0 for a row that sees no key).
// attention_flash_decode_split (-DSPLIT=1) writes each range's unnormalized acc and its (m, l)
// in fp32; attention_flash_combine.comp then rescales the ranges to their common max and sums.
// Rows of one (b, KV head) are consecutive in q and out: row r is query head r / sq of the
// group, position r % sq.
// ROPE_KV (attention_flash_decode_rope*: a decoding step's rope_kv_cache fused in by the executor,
// src/graph/executor_build.cpp): the step's one new row comes unrotated from the projections
// (bindings 9-11, rope_kv_cache.comp's sources). Each workgroup rotates its query rows into q_s,
// and the new key into new_k (its value as v into new_v), rounded to T as the cache holds them;
// the workgroup whose key range holds the row's position reads them there instead of from the
// caches and writes them into the caches (no other workgroup reads that row), so the results
// equal rope_kv_cache's dispatch followed by this kernel's, one dispatch fewer per layer.

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 128;
layout(constant_id = 1) const uint ROWS = 1;     // query rows per workgroup
layout(constant_id = 2) const uint TK = 32;      // keys per tile
layout(constant_id = 3) const uint D_CAP = 64;   // >= d (one pipeline for nearby head dims)
layout(constant_id = 4) const uint DV_CAP = 64;  // >= dv
layout(constant_id = 5) const bool HAS_MASK = false;
layout(constant_id = 6) const bool HAS_KEY_PADDING = false;
layout(constant_id = 7) const bool HAS_KEY_LENGTH = false;
layout(constant_id = 8) const bool CAUSAL = false;
layout(constant_id = 9) const bool PER_SEQUENCE = false;  // attention_sequences.glsl
layout(constant_id = 10) const bool SOFT_CAP = false;     // attention_soft_cap.glsl
#ifdef KV_QUANT
// KV_QUANT: the caches' types (kv_cache_types.glsl); head dims are multiples of 32.
#include "kv_cache_types.glsl"
layout(constant_id = 11) const uint K_TYPE = KV_Q8_0;
layout(constant_id = 12) const uint V_TYPE = KV_Q8_0;
#endif

#include "attention_flash.glsl"
layout(set = 0, binding = 8) readonly buffer KvSlot { int kv_slot[]; };  // [B] (PER_SEQUENCE)
#include "attention_sequences.glsl"
#ifdef ROPE_KV
#define ROPE_KV_BINDING 9
#include "rope_kv_attention.glsl"
#endif

#if defined(SPLIT)
// Bound whole, indexed by the global (b, KV head): [B * Hkv, splits, ROWS, dv] and (m, l).
layout(set = 0, binding = 6) writeonly buffer PartOut { float part_o[]; };
layout(set = 0, binding = 7) writeonly buffer PartMl { vec2 part_ml[]; };
#else
layout(set = 0, binding = 6) writeonly buffer Out { T o[]; };  // [B, H, Sq, DV]
#endif

const uint KV_STRIDE = (D_CAP > DV_CAP ? D_CAP : DV_CAP) + 1;  // odd: rows in other banks
const uint O_UNITS = ROWS * DV_CAP;
const uint OU = (O_UNITS + WG - 1) / WG;  // outputs per invocation

// vk::DecodeLaunch::shared_bytes counts these.
shared float q_s[ROWS * D_CAP];
shared float kv_s[TK * KV_STRIDE];
shared float p_s[ROWS * TK];       // logits, then probabilities
shared float row_m[ROWS];
shared float row_l[ROWS];
shared float row_alpha[ROWS];
#ifdef ROPE_KV
shared float new_k[D_CAP];
shared float new_v[DV_CAP];
#endif

void main() {
  const uint wid = flat_workgroup_id();
  if (wid >= p.groups) return;  // uniform: the whole workgroup leaves
  const uint t = gl_LocalInvocationID.x;
  const uint bkv = wid / p.splits, split = wid % p.splits;  // (b, KV head) within the window
  const uint D = p.d, DV = p.dv;
  const uint first_head = p.bh_base + bkv * p.group;  // global (b, h) of row 0
  const uint b = first_head / p.heads;

#ifdef ROPE_KV
  const uint pos = rope_kv_row(p.sk);
  const int at = clamp(p.rope_base + int(pos), 0, kMaxPosition);
  const uint kv_heads = p.heads / p.group;
  const uint pair = p.bh_base / p.group + bkv;  // global (b, KV head): one dispatch, no windows
  for (uint e = t; e < ROWS * D_CAP; e += WG) {
    const uint r = e / D_CAP, d = e % D_CAP;
    float x = 0.0;
    if (d < D) {
      const uint row = pair * ROWS + r;  // b * H + h: one query per head
      const uint base = (row / p.q_heads) * p.q_stride + p.q_off + (row % p.q_heads) * D;
      ROPE_COLUMN(src_q, base, d, at, x);
    }
    q_s[e] = float(T(x));
  }
#else
  for (uint e = t; e < ROWS * D_CAP; e += WG) {
    const uint r = e / D_CAP, d = e % D_CAP;
    q_s[e] = d < D ? float(q[(bkv * ROWS + r) * D + d]) : 0.0;
  }
#endif
  for (uint r = t; r < ROWS; r += WG) {
    row_m[r] = NEG_INF;
    row_l[r] = 0.0;
  }
  float acc[OU];
  [[unroll]] for (uint u = 0; u < OU; ++u) acc[u] = 0.0;

  const uint keys = attention_keys_at(p.sq - 1, key_length_index(b));  // the last row sees the most
  const uint chunk = (keys + p.splits - 1) / p.splits;
  const uint k_begin = min(split * chunk, keys), k_end = min(k_begin + chunk, keys);
  const uint kv = kv_slice(b, first_head % p.heads, p.heads, p.group, p.kv_batches, bkv);
  const uint k_base = kv * p.sk * D, v_base = kv * p.sk * DV;
#ifdef ROPE_KV
  // The range that holds the new row writes it (split 0 where no range does: key_length short
  // of the position, so nothing reads it this step).
  const bool writes_row = pos < keys ? pos >= k_begin && pos < k_end : split == 0u;
  {
    const uint b_kv = pair / kv_heads, g = pair % kv_heads;
    const uint k_src = b_kv * p.k_stride + p.k_off + g * D, v_src = b_kv * p.v_stride + p.v_off + g * DV;
    for (uint d = t; d < D; d += WG) {
      float x;
      ROPE_COLUMN(src_k, k_src, d, at, x);
      new_k[d] = float(T(x));  // as the cache holds it (no 16-bit locals: storage types only)
      if (writes_row) k[k_base + pos * D + d] = T(x);
    }
    for (uint d = t; d < DV; d += WG) {
      new_v[d] = float(src_v[v_src + d]);
      if (writes_row) v[v_base + pos * DV + d] = src_v[v_src + d];
    }
  }
#define KEY_AT(j, d) ((j) == pos ? new_k[d] : float(k[k_base + (j) * D + (d)]))
#define VALUE_AT(j, d) ((j) == pos ? new_v[d] : float(v[v_base + (j) * DV + (d)]))
#else
#define KEY_AT(j, d) float(k[k_base + (j) * D + (d)])
#define VALUE_AT(j, d) float(v[v_base + (j) * DV + (d)])
#endif
  for (uint c0 = k_begin; c0 < k_end; c0 += TK) {
    barrier();  // the previous tile's V and probabilities are consumed
#ifdef KV_QUANT
    for (uint e = t; e < TK * D / 4u; e += WG) {  // 4 elements of one block per load
      const uint c = e / (D / 4u), d = 4u * (e % (D / 4u));
      const vec4 x = c0 + c < k_end ? kv_read_k(k_base + (c0 + c) * D + d) : vec4(0.0);
      [[unroll]] for (uint i = 0; i < 4u; ++i) kv_s[c * KV_STRIDE + d + i] = x[i];
    }
#else
    for (uint e = t; e < TK * D; e += WG) {
      const uint c = e / D, d = e % D;
      kv_s[c * KV_STRIDE + d] = c0 + c < k_end ? KEY_AT(c0 + c, d) : 0.0;
    }
#endif
    barrier();
    for (uint u = t; u < ROWS * TK; u += WG) {
      const uint r = u / TK, c = u % TK;
      float s = 0.0;
      for (uint d = 0; d < D; ++d) s = fma(q_s[r * D_CAP + d], kv_s[c * KV_STRIDE + d], s);
      const uint head = first_head + r / p.sq;
      p_s[u] = c0 + c < k_end
                   ? attention_logit(s, b, head % p.heads, r % p.sq, c0 + c, keys)
                   : NEG_INF;
    }
    barrier();
#ifdef KV_QUANT
    for (uint e = t; e < TK * DV / 4u; e += WG) {
      const uint c = e / (DV / 4u), d = 4u * (e % (DV / 4u));
      const vec4 x = c0 + c < k_end ? kv_read_v(v_base + (c0 + c) * DV + d) : vec4(0.0);
      [[unroll]] for (uint i = 0; i < 4u; ++i) kv_s[c * KV_STRIDE + d + i] = x[i];
    }
#else
    for (uint e = t; e < TK * DV; e += WG) {
      const uint c = e / DV, d = e % DV;
      kv_s[c * KV_STRIDE + d] = c0 + c < k_end ? VALUE_AT(c0 + c, d) : 0.0;
    }
#endif
    for (uint r = t; r < ROWS; r += WG) {
      float mx = row_m[r];
      for (uint c = 0; c < TK; ++c) mx = max(mx, p_s[r * TK + c]);
      row_alpha[r] = row_m[r] == NEG_INF ? 0.0 : exp(row_m[r] - mx);
      row_m[r] = mx;
    }
    barrier();
    for (uint u = t; u < ROWS * TK; u += WG) {
      const float x = p_s[u], m = row_m[u / TK];
      p_s[u] = x == NEG_INF ? 0.0 : exp(x - m);  // m is finite where x is
    }
    barrier();
    for (uint r = t; r < ROWS; r += WG) {
      float l = row_l[r] * row_alpha[r];
      for (uint c = 0; c < TK; ++c) l += p_s[r * TK + c];
      row_l[r] = l;
    }
    [[unroll]] for (uint ku = 0; ku < OU; ++ku) {
      const uint u = t + ku * WG;
      if (u < O_UNITS) {
        const uint r = u / DV_CAP, d = u % DV_CAP;
        float a = acc[ku] * row_alpha[r];
        if (d < DV)
          for (uint c = 0; c < TK; ++c) a = fma(p_s[r * TK + c], kv_s[c * KV_STRIDE + d], a);
        acc[ku] = a;
      }
    }
  }
  barrier();  // row_m and row_l are final and visible, also where no tile ran

  [[unroll]] for (uint ku = 0; ku < OU; ++ku) {
    const uint u = t + ku * WG;
    if (u >= O_UNITS) continue;
    const uint r = u / DV_CAP, d = u % DV_CAP;
    if (d >= DV) continue;
#if defined(SPLIT)
    const uint part = ((p.bh_base / p.group + bkv) * p.splits + split) * ROWS + r;
    part_o[part * DV + d] = acc[ku];
#else
    const float l = row_l[r];
    o[(bkv * ROWS + r) * DV + d] = T(l > 0.0 ? acc[ku] / l : 0.0);
#endif
  }
#if defined(SPLIT)
  for (uint r = t; r < ROWS; r += WG) {
    const uint part = ((p.bh_base / p.group + bkv) * p.splits + split) * ROWS + r;
    part_ml[part] = vec2(row_m[r], row_l[r]);
  }
#endif
}
