#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
// y = (v - mean) / sqrt(var + eps) * gamma + beta over the last dim D, PyTorch's LayerNorm (biased
// variance, eps inside the square root), with v = x, or v = a + b (ADD: the residual add fused in,
// computed in fp32). For CPU devices: one small workgroup per row, the row read once.
//
// A workgroup of LANES invocations (one SIMD vector on a CPU) takes ROWS consecutive rows, one at
// a time. Inputs are texel buffers of 4 (a texel fetch is a plain gather on a CPU, several times
// cheaper than a buffer load, which checks bounds lane by lane); invocation `lane` holds texels
// lane + LANES * e, e < CAP, of the row in registers, and gamma and beta for all ROWS rows, so a
// row of up to LANES * CAP * 4 elements is read once. Statistics in fp32 without cancellation:
// every value is shifted by the row's first one, K (the shift changes nothing mathematically, and
// keeps rows like 1000 + N(0, 1) exact), then mean = sum(v - K) / D and
// var = sum((v - K - mean)^2) / D, two passes over registers. Sums are a subgroup butterfly
// (USE_SUBGROUP) or go through shared memory and barriers (row_reduce.glsl).
// Longer rows go through twice: Welford's update per invocation (count, mean, M2 of v - K),
// combined exactly as Chan et al. do with two plain sums, then a second read for the outputs.
// D must be a multiple of 4 (checked by the lowering).
// RMS: Llama's RMSNorm instead, y = x * rsqrt(mean(x^2) + eps) * gamma (the lowering binds gamma
// as beta too, unread): the same code with no shift, a mean of 0 and no beta. Long rows take
// sum(x^2) = M2 + n mean^2 from the same Welford accumulators.
// RESIDUAL (with RMS): y = r + the above, r [rows, D] at binding 4 (Gemma's post-norms, whose
// outputs go straight into the residual stream): the sum is taken in fp32 before the store.

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint LANES = 8;  // invocations; the subgroup size with USE_SUBGROUP
layout(constant_id = 1) const uint CAP = 16;   // texels of a row each invocation keeps
layout(constant_id = 2) const uint ROWS = 1;   // rows per workgroup

#ifdef ADD
layout(set = 0, binding = 0) uniform samplerBuffer a4;      // [rows, D / 4] texels
layout(set = 0, binding = 4) uniform samplerBuffer b4;      // [rows, D / 4] texels
#else
layout(set = 0, binding = 0) uniform samplerBuffer a4;      // x
#endif
#ifdef RESIDUAL
layout(set = 0, binding = 4) uniform samplerBuffer r4;      // [rows, D / 4] texels
#endif
layout(set = 0, binding = 1) uniform samplerBuffer gamma4;  // [D / 4]
layout(set = 0, binding = 2) uniform samplerBuffer beta4;   // [D / 4]
#if defined(DTYPE_F16)
// f16 outputs as packed pairs: two 32-bit stores per texel instead of four 16-bit ones.
layout(set = 0, binding = 3) writeonly buffer Y { uvec2 y2[]; };
#else
layout(set = 0, binding = 3) writeonly buffer Y { vec4 y4[]; };
#endif
layout(push_constant) uniform Push {
  uint rows;
  uint d;
  float eps;
} p;

#include "row_reduce.glsl"

#ifdef RMS
const bool kRms = true;
#else
const bool kRms = false;
#endif

vec4 load_v(uint t) {
#ifdef ADD
  return texelFetch(a4, int(t)) + texelFetch(b4, int(t));
#else
  return texelFetch(a4, int(t));
#endif
}

void store(uint t, vec4 y) {
#ifdef RESIDUAL
  y += texelFetch(r4, int(t));
#endif
#if defined(DTYPE_F16)
  y2[t] = uvec2(packHalf2x16(y.xy), packHalf2x16(y.zw));
#else
  y4[t] = y;
#endif
}

// Welford's update of four accumulators, one per texel component: four independent dependency
// chains and one division per texel (one chain with a division per element was latency-bound).
void welford(vec4 v, inout float nc, inout vec4 mean4, inout vec4 m24) {
  nc += 1.0;
  const vec4 delta = v - mean4;
  mean4 += delta * (1.0 / nc);
  m24 += delta * (v - mean4);
}

// The row's mean and 1 / sqrt(var + eps) from every invocation's accumulators (of values shifted
// by the row's first): the four components merged (equal counts), then the invocations, both
// with Chan et al.'s formula.
void row_stats(float nc, vec4 mean4, vec4 m24, float inv_d, out float row_mean, out float rstd) {
  const float n = 4.0 * nc;
  const float mean = ((mean4.x + mean4.y) + (mean4.z + mean4.w)) * 0.25;
  const vec4 dm4 = mean4 - mean;
  const float m2 = ((m24.x + m24.y) + (m24.z + m24.w)) +
                   nc * ((dm4.x * dm4.x + dm4.y * dm4.y) + (dm4.z * dm4.z + dm4.w * dm4.w));
  if (kRms) {  // this invocation's sum of squares is m2 + n mean^2
    row_mean = 0.0;
    rstd = inversesqrt(row_sum(m2 + n * mean * mean) * inv_d + p.eps);
    return;
  }
  row_mean = row_sum(n * mean) * inv_d;
  const float dm = mean - row_mean;
  rstd = inversesqrt(row_sum(m2 + n * dm * dm) * inv_d + p.eps);
}

// The row's first value, which every value is shifted by (RMS: none).
float row_shift(uint base) { return kRms ? 0.0 : load_v(base).x; }

vec4 plus_beta(vec4 y, vec4 beta) { return kRms ? y : y + beta; }

// Output texel t of a long row: its second read, normalized, times gamma plus beta.
void store_output(uint base, uint t, float shift, float row_mean, float rstd) {
  const vec4 v = load_v(base + t) - shift;
  store(base + t, plus_beta((v - row_mean) * rstd * texelFetch(gamma4, int(t)), texelFetch(beta4, int(t))));
}

void main() {
  const uint lane = gl_LocalInvocationID.x;
  const uint nt = p.d / 4;  // texels per row
  const float inv_d = 1.0 / float(p.d);
  const uint first_row = flat_workgroup_id() * ROWS;
  if (first_row >= p.rows) return;  // uniform: the whole workgroup leaves

  if (nt <= LANES * CAP) {
    // gamma and beta once for all the workgroup's rows.
    vec4 g[CAP], bt[CAP];
    [[unroll]] for (uint e = 0; e < CAP; ++e) {
      const int t = int(min(lane + LANES * e, nt - 1));
      g[e] = texelFetch(gamma4, t);
      bt[e] = texelFetch(beta4, t);
    }
    // Rows in registers, software-pipelined: the next row's texels are read while this row's
    // outputs are stored, so that loads and stores (scalar loops over the lanes on a CPU) overlap
    // instead of coming in bursts (1.3-1.5x on lavapipe).
    uint base = first_row * nt;
    vec4 x[CAP];  // the current row as read
    [[unroll]] for (uint e = 0; e < CAP; ++e) x[e] = load_v(base + min(lane + LANES * e, nt - 1));
    for (uint rr = 0; rr < ROWS; ++rr) {
      const uint row = first_row + rr;
      if (row >= p.rows) return;
      const float shift = row_shift(base);
      vec4 v[CAP];
      vec4 sum4 = vec4(0.0);
      [[unroll]] for (uint e = 0; e < CAP; ++e) {
        const uint t = lane + LANES * e;
        v[e] = t < nt ? x[e] - shift : vec4(0.0);
        sum4 += v[e];
      }
      const float mean = kRms ? 0.0 : row_sum((sum4.x + sum4.y) + (sum4.z + sum4.w)) * inv_d;
      vec4 sq4 = vec4(0.0);
      [[unroll]] for (uint e = 0; e < CAP; ++e) {
        const uint t = lane + LANES * e;
        v[e] -= mean;
        if (t < nt) sq4 += v[e] * v[e];
      }
      const float var = row_sum((sq4.x + sq4.y) + (sq4.z + sq4.w)) * inv_d;
      const float rstd = inversesqrt(var + p.eps);
      const bool has_next = rr + 1 < ROWS && row + 1 < p.rows;  // uniform
      const uint next = base + nt;
      [[unroll]] for (uint e = 0; e < CAP; ++e) {
        const uint t = lane + LANES * e;
        if (t < nt) store(base + t, plus_beta(v[e] * rstd * g[e], bt[e]));
        if (has_next) x[e] = load_v(next + min(t, nt - 1));
      }
      base = next;
    }
  } else {
    // Long rows: Welford statistics in a first read, outputs in a second. Software-pipelined
    // like the short rows: the first read of the next row shares a loop with the second read
    // (and the stores) of this one.
    uint base = first_row * nt;
    float shift = row_shift(base);
    float nc = 0.0;  // values per component so far
    vec4 mean4 = vec4(0.0), m24 = vec4(0.0);
    for (uint t = lane; t < nt; t += LANES) welford(load_v(base + t) - shift, nc, mean4, m24);
    for (uint rr = 0; rr < ROWS; ++rr) {
      const uint row = first_row + rr;
      if (row >= p.rows) return;
      float row_mean, rstd;
      row_stats(nc, mean4, m24, inv_d, row_mean, rstd);
      const uint next = base + nt;
      if (rr + 1 < ROWS && row + 1 < p.rows) {  // uniform
        const float next_shift = row_shift(next);
        nc = 0.0;
        mean4 = vec4(0.0);
        m24 = vec4(0.0);
        for (uint t = lane; t < nt; t += LANES) {
          store_output(base, t, shift, row_mean, rstd);
          welford(load_v(next + t) - next_shift, nc, mean4, m24);
        }
        shift = next_shift;
      } else {
        for (uint t = lane; t < nt; t += LANES) store_output(base, t, shift, row_mean, rstd);
      }
      base = next;
    }
  }
}
