#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
// Softmax (or log-softmax) over the last dim for CPU devices: one small workgroup per row, the row
// read once and kept in registers.
//
// Logits are v_j = x_j * scale + mask_j, -inf where a boolean mask hides key j (causal:
// j > i + Sk - Sq, or i + key_length - Sq with causal_at_length; key padding; j >= key_length). A workgroup of LANES invocations (one SIMD
// vector on a CPU) takes ROWS consecutive rows, one at a time. The row is read as texels of 4
// (x is a texel buffer: a texel fetch is a plain gather on a CPU, several times cheaper than a
// buffer load, which checks bounds lane by lane); invocation `lane` holds texels lane + LANES * e,
// e < CAP, in registers, so a row of up to LANES * CAP * 4 elements is read once:
//   M = max v (a subgroup butterfly, or shared memory and barriers: row_reduce.glsl),
//   S = sum exp(v - M), y = exp(v - M) / S or v - M - log(S).
// Longer rows go through in two passes: a running pair (m, s) = (max v, sum exp(v - m)) per
// invocation, rescaled when m grows, combined as (m, s) + (m', s') = (M, s e^(m-M) + s' e^(m'-M)),
// then a second read to write the outputs.
// A fully masked row (M = -inf) gives zeros (log-softmax: -inf), not NaN: hidden keys get their
// output by a select and exp() never sees -inf - -inf; logits of +-1e10 only ever appear as
// differences v - M <= 0. Arithmetic is fp32. Rows must be a whole number of texels (Sk % 4 == 0,
// checked by the lowering); register slots past the end of a row hold -inf and are not stored.

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint LANES = 8;  // invocations; the subgroup size with USE_SUBGROUP
layout(constant_id = 1) const uint CAP = 16;   // texels of a row each invocation keeps
layout(constant_id = 2) const uint ROWS = 1;   // rows per workgroup
layout(constant_id = 3) const bool HAS_MASK = false;
layout(constant_id = 4) const bool HAS_KEY_PADDING = false;
layout(constant_id = 5) const bool HAS_KEY_LENGTH = false;
layout(constant_id = 6) const bool CAUSAL = false;
layout(constant_id = 7) const bool LOG_SOFTMAX = false;

// Absent optional inputs are bound to x and never read.
layout(set = 0, binding = 0) uniform samplerBuffer x4;  // [rows, sk / 4] texels
#ifdef MASK_TEXEL
// The additive mask as texels too, when it is contiguous along keys with rows of whole texels
// (the lowering checks): one fetch per texel instead of four scalar loads.
layout(set = 0, binding = 1) uniform samplerBuffer mask4;
#else
layout(set = 0, binding = 1) readonly buffer Mask { T mask[]; };
#endif
layout(set = 0, binding = 2) readonly buffer KeyPadding { int key_padding[]; };  // [B, Sk]
layout(set = 0, binding = 3) readonly buffer KeyLength { int key_length[]; };   // [1]
#if defined(DTYPE_F16)
// f16 outputs as packed pairs: two 32-bit stores per texel instead of four 16-bit ones.
layout(set = 0, binding = 4) writeonly buffer Out { uvec2 o2[]; };
#else
layout(set = 0, binding = 4) writeonly buffer Out { vec4 o4[]; };
#endif
layout(push_constant) uniform Push {
  uint rows;          // numel / sk
  uint sk;            // row length (last dim), a multiple of 4
  uint sq;            // second-to-last dim of x (1 for rank 1): the causal query index is row % sq
  uint d1;            // x's leading dims padded to rank 4 as [d0, d1, sq, sk]
  float scale;
  uint mask_stride[4];  // mask strides over [d0, d1, sq, sk]; 0 where the mask broadcasts
  uint rows_per_batch;  // rows per key-padding-mask row: numel / (B * sk)
  uint causal_at_length;  // causal aligned to key_length: query i sees keys j <= i + key_length - sq
} p;

#include "row_reduce.glsl"

void store(uint texel, vec4 y) {
#if defined(DTYPE_F16)
  o2[texel] = uvec2(packHalf2x16(y.xy), packHalf2x16(y.zw));
#else
  o4[texel] = y;
#endif
}

// Where a row's masks are: filled per row by main().
uint row_base;    // first texel of the row
int limit;        // keys j >= limit are hidden (causal, key_length)
uint mask_base;
uint pad_base;

// The logits of texel t of the row (elements 4t..4t+3), -inf where hidden or past the row.
vec4 logits(uint t) {
  const uint nt = p.sk / 4;
  vec4 v = texelFetch(x4, int(row_base + min(t, nt - 1))) * p.scale;
#ifdef MASK_TEXEL
  if (HAS_MASK) v += texelFetch(mask4, int(mask_base / 4 + min(t, nt - 1)));
#endif
  // Without causal, key-length or key-padding masks nothing in a row is hidden (texels past the
  // row's end are -inf by the caller): skip the per-element test.
  if (!CAUSAL && !HAS_KEY_LENGTH && !HAS_KEY_PADDING) return v;
  [[unroll]] for (uint e = 0; e < 4; ++e) {
    const uint j = 4 * t + e;
    bool hidden = int(j) >= limit;
    if (HAS_KEY_PADDING) hidden = hidden || key_padding[pad_base + min(j, p.sk - 1)] != 0;
#ifndef MASK_TEXEL
    if (HAS_MASK) v[e] += float(mask[mask_base + min(j, p.sk - 1) * p.mask_stride[3]]);
#endif
    v[e] = hidden ? NEG_INF : v[e];
  }
  return v;
}

vec4 outputs(vec4 v, float m, float inv_sum, float log_sum) {
  vec4 y;
  [[unroll]] for (uint e = 0; e < 4; ++e) {
    if (LOG_SOFTMAX)
      y[e] = v[e] == NEG_INF ? NEG_INF : v[e] - m - log_sum;
    else
      y[e] = v[e] == NEG_INF ? 0.0 : exp(v[e] - m) * inv_sum;
  }
  return y;
}

// Where the next row sits in [d0, d1, sq] and in the key-padding batch, advanced row by row: an
// integer division is a scalar loop over the lanes on a CPU (~25 cycles a lane), and dividing
// per row cost as much as the row's arithmetic.
uint next_row, qi, i1, i0, batch, in_batch;

// Points row_base, limit, mask_base and pad_base at row next_row, then advances to the row after.
void enter_next_row() {
  const uint sq = p.sq;
  row_base = next_row * (p.sk / 4);
  limit = int(p.sk);
  if (HAS_KEY_LENGTH) limit = min(limit, key_length[0]);
  const int causal_end = HAS_KEY_LENGTH && p.causal_at_length != 0u ? key_length[0] : int(p.sk);
  if (CAUSAL) limit = min(limit, int(qi) + causal_end - int(sq) + 1);
  mask_base = 0;
  if (HAS_MASK) mask_base = qi * p.mask_stride[2] + i1 * p.mask_stride[1] + i0 * p.mask_stride[0];
  pad_base = HAS_KEY_PADDING ? batch * p.sk : 0;
  ++next_row;
  if (++qi == sq) {
    qi = 0;
    if (++i1 == p.d1) {
      i1 = 0;
      ++i0;
    }
  }
  if (++in_batch == p.rows_per_batch) {
    in_batch = 0;
    ++batch;
  }
}

void main() {
  const uint lane = gl_LocalInvocationID.x;
  const uint nt = p.sk / 4;  // texels per row
  const uint first_row = flat_workgroup_id() * ROWS;
  if (first_row >= p.rows) return;  // uniform: the whole workgroup leaves
  next_row = first_row;
  qi = first_row % p.sq;
  const uint rest = first_row / p.sq;
  i1 = rest % p.d1;
  i0 = rest / p.d1;
  batch = first_row / p.rows_per_batch;
  in_batch = first_row % p.rows_per_batch;

  if (nt <= LANES * CAP) {
    // Rows in registers, software-pipelined: texel lane + LANES * e of the row in v[e], and the
    // next row's texels are read while this row's outputs are stored, so that the loads and the
    // stores (both scalar loops over the lanes on a CPU) overlap instead of coming in bursts.
    vec4 v[CAP];
    float m = NEG_INF;  // this invocation's maximum of v
    enter_next_row();
    [[unroll]] for (uint e = 0; e < CAP; ++e) {
      const uint t = lane + LANES * e;
      v[e] = t < nt ? logits(t) : vec4(NEG_INF);
      m = max(m, max(max(v[e].x, v[e].y), max(v[e].z, v[e].w)));
    }
    for (uint rr = 0; rr < ROWS; ++rr) {
      const uint row = first_row + rr;
      if (row >= p.rows) return;  // uniform
      const float row_m = row_max(m);
      const bool empty = row_m == NEG_INF;
      const float m_safe = empty ? 0.0 : row_m;
      // Softmax: v becomes exp(v - M) (0 where hidden), computed once for the sum and the output.
      float s = 0.0;
      [[unroll]] for (uint e = 0; e < CAP; ++e) {
        [[unroll]] for (uint c = 0; c < 4; ++c) {
          const float pe = v[e][c] == NEG_INF ? 0.0 : exp(v[e][c] - m_safe);
          s += pe;
          if (!LOG_SOFTMAX) v[e][c] = pe;
        }
      }
      const float row_s = row_sum(s);
      const float inv_sum = empty ? 0.0 : 1.0 / row_s;
      const float log_sum = empty ? 0.0 : log(row_s);
      const uint out_base = row_base;
      const bool has_next = rr + 1 < ROWS && row + 1 < p.rows;  // uniform
      if (has_next) enter_next_row();
      [[unroll]] for (uint e = 0; e < CAP; ++e) {
        const uint t = lane + LANES * e;
        vec4 y;
        [[unroll]] for (uint c = 0; c < 4; ++c) {
          if (LOG_SOFTMAX)
            y[c] = v[e][c] == NEG_INF ? NEG_INF : v[e][c] - m_safe - log_sum;
          else
            y[c] = v[e][c] * inv_sum;
        }
        if (t < nt) store(out_base + t, y);
        if (has_next) {
          v[e] = t < nt ? logits(t) : vec4(NEG_INF);
          m = max(e == 0 ? NEG_INF : m, max(max(v[e].x, v[e].y), max(v[e].z, v[e].w)));
        }
      }
    }
  } else {
    for (uint rr = 0; rr < ROWS; ++rr) {
      const uint row = first_row + rr;
      if (row >= p.rows) return;  // uniform
      enter_next_row();
      // Long rows: a running (m, s) per invocation, then a second read.
      float m = NEG_INF, s = 0.0;
      for (uint t = lane; t < nt; t += LANES) {
        const vec4 v = logits(t);
        const float vm = max(max(v.x, v.y), max(v.z, v.w));
        if (vm > m) {
          s *= exp(m - vm);  // m = -inf: s is 0 and stays 0
          m = vm;
        }
        if (m > NEG_INF) {
          [[unroll]] for (uint c = 0; c < 4; ++c) s += v[c] == NEG_INF ? 0.0 : exp(v[c] - m);
        }
      }
      const float row_m = row_max(m);
      const bool empty = row_m == NEG_INF;
      const float m_safe = empty ? 0.0 : row_m;
      const float row_s = row_sum(m == NEG_INF ? 0.0 : s * exp(m - m_safe));
      const float inv_sum = empty ? 0.0 : 1.0 / row_s;
      const float log_sum = empty ? 0.0 : log(row_s);
      for (uint t = lane; t < nt; t += LANES)
        store(row_base + t, outputs(logits(t), m_safe, inv_sum, log_sum));
    }
  }
}
