#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// out[z] = act(alpha * A[z]·B[z] + bias) for small M (decoding: one or a few tokens at a time),
// where there is nothing to tile: every element of B is used by M <= MM rows only, so the
// kernel streams B once, coalesced, and keeps the MM rows of A in cache.
//   TRANSPOSE_B = 1 (B is N x K, Linear weights): workgroup x computes columns [x * NC, x * NC +
//     NC) for all rows; its invocations split K (invocation l takes k = 4 * l, 4 * (l + WG), ...
//     as vec4 loads with VEC4, else single k), then add their MM * NC partial sums in shared
//     memory (a tree of log2(WG) steps; WG a power of 2).
//   TRANSPOSE_B = 0 (B is K x N): workgroup x computes columns [x * NC, x * NC + NC): invocation
//     l owns column l % NC and takes k = l / NC, l / NC + WG / NC, ..., so that neighbouring
//     invocations read neighbouring columns of a row of B; then the WG / NC partial sums of each
//     output are added in shared memory. (One invocation per column over all of K would leave a
//     GPU nearly idle: N / WG workgroups.)
// Rows past M and columns past N are clamped for loading and not stored. fp32 accumulation.
// Batches: grid z, with the strides of matmul.comp (y is unused: M <= MM).

layout(local_size_x_id = 0) in;  // WG, a power of 2
layout(constant_id = 1) const uint MM = 1;  // rows computed (M <= MM)
layout(constant_id = 2) const uint NC = 4;  // columns per workgroup (a divisor of WG without
                                            // TRANSPOSE_B)
layout(constant_id = 3) const uint TRANSPOSE_B = 1;
layout(constant_id = 4) const uint HAS_BIAS = 0;
layout(constant_id = 5) const uint ACT = 0;  // 0 none, 1 relu, 2 gelu
layout(constant_id = 6) const uint VEC4 = 0;  // TRANSPOSE_B with K % 4 == 0

const uint WG = gl_WorkGroupSize.x;
const uint NACC = TRANSPOSE_B != 0 ? MM * NC : MM;  // accumulators per invocation

layout(set = 0, binding = 0) readonly buffer A { T a[]; };
layout(set = 0, binding = 0) readonly buffer A4 { T4 a4[]; };
layout(set = 0, binding = 1) readonly buffer B { T b[]; };
layout(set = 0, binding = 1) readonly buffer B4 { T4 b4[]; };
layout(set = 0, binding = 2) readonly buffer Bias { T bias[]; };  // bound to A when HAS_BIAS = 0
layout(set = 0, binding = 3) writeonly buffer Out { T o[]; };
#include "matmul_base.glsl"  // the push block p and matmul_epilogue

shared float red[TRANSPOSE_B != 0 ? MM * NC * WG : MM * WG];

void main() {
  const uint lid = gl_LocalInvocationID.x;
  const uint z = p.z_base + gl_WorkGroupID.z;
  const uint z0 = z / p.batch1, z1 = z % p.batch1;
  const uint a_off = z0 * p.a_stride0 + z1 * p.a_stride1;
  const uint b_off = z0 * p.b_stride0 + z1 * p.b_stride1;
  const uint M = p.M, N = p.N, K = p.K;
  const uint o_off = z * M * p.ldo;

  float acc[NACC];
  for (uint i = 0; i < NACC; ++i) acc[i] = 0.0;
  uint a_row[MM];
  for (uint i = 0; i < MM; ++i) a_row[i] = a_off + min(i, M - 1) * K;

  if (TRANSPOSE_B != 0) {
    const uint n0 = gl_WorkGroupID.x * NC;
    uint b_row[NC];
    for (uint c = 0; c < NC; ++c) b_row[c] = b_off + min(n0 + c, N - 1) * K;
    if (VEC4 != 0) {
      for (uint k = lid * 4; k < K; k += WG * 4) {
        vec4 av[MM];
        for (uint i = 0; i < MM; ++i) av[i] = vec4(a4[(a_row[i] + k) / 4]);
        for (uint c = 0; c < NC; ++c) {
          vec4 bv = vec4(b4[(b_row[c] + k) / 4]);
          for (uint i = 0; i < MM; ++i) acc[i * NC + c] += dot(av[i], bv);
        }
      }
    } else {
      for (uint k = lid; k < K; k += WG) {
        float av[MM];
        for (uint i = 0; i < MM; ++i) av[i] = float(a[a_row[i] + k]);
        for (uint c = 0; c < NC; ++c) {
          float bv = float(b[b_row[c] + k]);
          for (uint i = 0; i < MM; ++i) acc[i * NC + c] = fma(av[i], bv, acc[i * NC + c]);
        }
      }
    }
    for (uint v = 0; v < MM * NC; ++v) red[v * WG + lid] = acc[v];
    barrier();
    for (uint s = WG / 2; s > 0; s /= 2) {
      if (lid < s)
        for (uint v = 0; v < MM * NC; ++v) red[v * WG + lid] += red[v * WG + lid + s];
      barrier();
    }
    // Invocation v < MM * NC stores (row v / NC, column v % NC).
    for (uint v = lid; v < MM * NC; v += WG) {
      uint m = v / NC, n = n0 + v % NC;
      if (m >= M || n >= N) continue;
      float add = HAS_BIAS != 0 ? float(bias[n]) : 0.0;
      o[o_off + m * p.ldo + n] = T(matmul_epilogue(p.alpha * red[v * WG] + add, 0.0, 0.0));
    }
  } else {
    const uint KY = WG / NC;  // invocations per column, splitting K
    const uint n = gl_WorkGroupID.x * NC + lid % NC, ky = lid / NC;
    const uint col = b_off + min(n, N - 1);
    for (uint k = ky; k < K; k += KY) {
      float bv = float(b[col + k * N]);
      for (uint i = 0; i < MM; ++i) acc[i] = fma(float(a[a_row[i] + k]), bv, acc[i]);
    }
    for (uint i = 0; i < MM; ++i) red[i * WG + lid] = acc[i];
    barrier();
    for (uint s = KY / 2; s > 0; s /= 2) {
      if (ky < s)
        for (uint i = 0; i < MM; ++i) red[i * WG + lid] += red[i * WG + lid + s * NC];
      barrier();
    }
    if (ky == 0 && n < N) {
      float add = HAS_BIAS != 0 ? float(bias[n]) : 0.0;
      for (uint i = 0; i < MM; ++i)
        if (i < M) o[o_off + i * p.ldo + n] = T(matmul_epilogue(p.alpha * red[i * WG + lid] + add, 0.0, 0.0));
    }
  }
}
