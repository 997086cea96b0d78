#version 450
#extension GL_GOOGLE_include_directive : require
#ifdef USE_SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
#include "common.glsl"
// y = (v - mean) / sqrt(var + eps) * gamma + beta over the last dim D, PyTorch's LayerNorm
// (biased variance, eps inside the square root), with v = x, or v = x + b (ADD: the residual add
// fused in, computed in fp32). One workgroup per row, rows spread over a rows_grid() and recovered
// with flat_workgroup_id(). (CPU devices use layer_norm_rows.comp.)
//
// Statistics in fp32 without cancellation, in one read of the row:
// - Every value is first shifted by the row's first element K. x - K is exact when x and K are
//   within a factor 2 of each other (Sterbenz), so rows whose mean is large relative to their
//   spread (1000 + N(0,1)) lose no precision; the shift changes nothing mathematically.
// - Each invocation runs Welford's update over its strided elements (count n_i, mean m_i, sum of
//   squared deviations M2_i); the workgroup combines them exactly as Chan et al. do with two
//   plain sums: mean = sum(n_i m_i) / D, then M2 = sum(M2_i + n_i (m_i - mean)^2).
// A second pass over the row (usually from cache) normalizes and applies gamma and beta.
//
// The sums are subgroupAdd per subgroup plus one shared slot per subgroup (USE_SUBGROUP, any
// subgroup size and any number of subgroups, partial ones included), or else a shared-memory
// tree, which needs a power-of-two workgroup size (the lowering guarantees it).

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;  // the workgroup size again, to size shared arrays

layout(set = 0, binding = 0) readonly buffer X { T x[]; };
layout(set = 0, binding = 1) readonly buffer Gamma { T gamma[]; };
layout(set = 0, binding = 2) readonly buffer Beta { T beta[]; };
layout(set = 0, binding = 3) writeonly buffer Y { T y[]; };
#ifdef ADD
layout(set = 0, binding = 4) readonly buffer B { T b[]; };  // same shape as x
#endif
layout(push_constant) uniform Push {
  uint rows;
  uint d;
  float eps;
} p;

// Two scratch areas, so the second reduction needs no barrier to protect the first one's reads.
shared float scratch[2 * WG];

// The sum of v over the workgroup, the same value in every invocation.
float workgroup_sum(float v, uint area) {
  uint base = area * WG;
#ifdef USE_SUBGROUP
  float s = subgroupAdd(v);
  if (subgroupElect()) scratch[base + gl_SubgroupID] = s;
  barrier();
  float total = 0.0;
  for (uint i = 0; i < gl_NumSubgroups; ++i) total += scratch[base + i];
  return total;
#else
  uint t = gl_LocalInvocationID.x;
  scratch[base + t] = v;
  barrier();
  for (uint stride = WG / 2; stride > 0; stride >>= 1) {
    if (t < stride) scratch[base + t] += scratch[base + t + stride];
    barrier();
  }
  return scratch[base];
#endif
}

float value(uint i) {
#ifdef ADD
  return float(x[i]) + float(b[i]);
#else
  return float(x[i]);
#endif
}

void main() {
  uint row = flat_workgroup_id();
  if (row >= p.rows) return;  // the excess of a rows_grid; uniform over the workgroup
  uint first = row * p.d;
  uint t = gl_LocalInvocationID.x;
  float shift = value(first);

  float n = 0.0, mean = 0.0, m2 = 0.0;
  for (uint j = t; j < p.d; j += WG) {
    float v = value(first + j) - shift;
    n += 1.0;
    float delta = v - mean;
    mean += delta / n;
    m2 += delta * (v - mean);
  }
  float row_mean = workgroup_sum(n * mean, 0) / float(p.d);
  float dm = mean - row_mean;
  float row_m2 = workgroup_sum(m2 + n * dm * dm, 1);
  float rstd = inversesqrt(row_m2 / float(p.d) + p.eps);

  for (uint j = t; j < p.d; j += WG) {
    float v = value(first + j) - shift;
    y[first + j] = T((v - row_mean) * rstd * float(gamma[j]) + float(beta[j]));
  }
}
