#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// out = act(alpha * A·Wᵀ + bias) where W [N, K] (a Linear weight) is stored in another dtype
// than the activations A [M, K] (f32 or f16): bf16, a ggml block type (q8_0, q4_0, q4_1, q5_0,
// q4_k, q6_k; see weights.glsl), or the other float type. The prompt-processing path (M > 1).
//
// Tiling: each workgroup computes a BM x BN tile of the output with (BM / TM) * (BN / TN)
// invocations, each owning a TM x TN block in registers. K advances 32 at a time (one ggml block,
// or k-quant sub-block, per row of W): the workgroup stages A's BM x 32 slice and W's BN x 32 slice, dequantized to
// fp32, in shared memory, so each block's scale is read once per tile instead of once per
// product, then every invocation runs the FMA loop over the 32 columns. Rows past M and columns
// past N (and, for unquantized W, K past its end) load zeros and are not stored. fp32 throughout.
//
// DIRECT = 1 (CPU devices, where a workgroup runs on one thread and barrier() is a real cost):
// no shared memory or barriers; each invocation reads its TM rows of A and dequantizes its TN
// rows of W itself, a block group (4 elements) at a time.

layout(local_size_x_id = 0) in;  // WG = (BM / TM) * (BN / TN)
layout(constant_id = 1) const uint BM = 32;
layout(constant_id = 2) const uint BN = 32;
layout(constant_id = 3) const uint TM = 4;
layout(constant_id = 4) const uint TN = 4;
layout(constant_id = 5) const uint HAS_BIAS = 0;
layout(constant_id = 6) const uint ACT = 0;
layout(constant_id = 7) const uint DIRECT = 0;

const uint WG = gl_WorkGroupSize.x;
const uint BK = 32;

layout(set = 0, binding = 0) readonly buffer A { T a[]; };
layout(set = 0, binding = 0) readonly buffer A4 { T4 a4[]; };
layout(set = 0, binding = 1) readonly buffer W { uint w[]; };
layout(set = 0, binding = 2) readonly buffer Bias { T bias[]; };  // bound to A when HAS_BIAS = 0
layout(set = 0, binding = 3) writeonly buffer Out { T o[]; };
#include "matmul_base.glsl"  // the push block p and matmul_epilogue

#include "weights.glsl"

// K-major with one float of padding a row: consecutive invocations store consecutive k.
shared float As[DIRECT != 0 ? 1 : BK * (BM + 1)];
shared float Bs[DIRECT != 0 ? 1 : BK * (BN + 1)];

void main() {
  const uint tid = gl_LocalInvocationID.x;
  const uint M = p.M, N = p.N, K = p.K;
  const uint m0 = (p.y_base + gl_WorkGroupID.y) * BM, n0 = gl_WorkGroupID.x * BN;
  const uint tx = tid % (BN / TN), ty = tid / (BN / TN);
  const uint row_hw = row_halfwords(K);

  float acc[TM * TN];
  for (uint i = 0; i < TM * TN; ++i) acc[i] = 0.0;

#ifdef W_QUANTIZED
  if (DIRECT != 0) {
    // Rows and columns past the end are clamped for loading and not stored.
    uint a_row[TM], w_row[TN];
    for (uint i = 0; i < TM; ++i) a_row[i] = min(m0 + ty * TM + i, M - 1) * K;
    for (uint j = 0; j < TN; ++j) w_row[j] = min(n0 + tx * TN + j, N - 1) * row_hw;
    for (uint b = 0; b < K / 32u; ++b)
      for (uint g = 0; g < 8u; ++g) {
        vec4 wv[TN];
        for (uint j = 0; j < TN; ++j) wv[j] = block_values(w_row[j], b, g);
        for (uint i = 0; i < TM; ++i) {
          const vec4 av = vec4(a4[(a_row[i] + b * 32u) / 4u + g]);
          for (uint j = 0; j < TN; ++j) acc[i * TN + j] += dot(av, wv[j]);
        }
      }
  }
#else
  if (DIRECT != 0)
    for (uint k = 0; k < K; ++k) {
      float wv[TN];
      for (uint j = 0; j < TN; ++j) wv[j] = weight_at(min(n0 + tx * TN + j, N - 1) * row_hw, k);
      for (uint i = 0; i < TM; ++i) {
        const float av = float(a[min(m0 + ty * TM + i, M - 1) * K + k]);
        for (uint j = 0; j < TN; ++j) acc[i * TN + j] = fma(av, wv[j], acc[i * TN + j]);
      }
    }
#endif

  for (uint k0 = 0; DIRECT == 0 && k0 < K; k0 += BK) {
    for (uint e = tid; e < BM * BK; e += WG) {
      const uint r = e / BK, kk = e % BK, m = m0 + r, k = k0 + kk;
      As[kk * (BM + 1) + r] = m < M && k < K ? float(a[m * K + k]) : 0.0;
    }
#ifdef W_QUANTIZED
    for (uint e = tid; e < BN * 8u; e += WG) {
      const uint r = e / 8u, g = e % 8u, n = n0 + r;
      const vec4 v = n < N ? block_values(n * row_hw, k0 / 32u, g) : vec4(0.0);
      for (uint c = 0; c < 4u; ++c) Bs[(4u * g + c) * (BN + 1) + r] = v[c];
    }
#else
    for (uint e = tid; e < BN * BK; e += WG) {
      const uint r = e / BK, kk = e % BK, n = n0 + r, k = k0 + kk;
      Bs[kk * (BN + 1) + r] = n < N && k < K ? weight_at(n * row_hw, k) : 0.0;
    }
#endif
    barrier();
    for (uint kk = 0; kk < BK; ++kk) {
      float av[TM], bv[TN];
      for (uint i = 0; i < TM; ++i) av[i] = As[kk * (BM + 1) + ty * TM + i];
      for (uint j = 0; j < TN; ++j) bv[j] = Bs[kk * (BN + 1) + tx * TN + j];
      for (uint i = 0; i < TM; ++i)
        for (uint j = 0; j < TN; ++j) acc[i * TN + j] = fma(av[i], bv[j], acc[i * TN + j]);
    }
    barrier();
  }

  for (uint i = 0; i < TM; ++i) {
    const uint m = m0 + ty * TM + i;
    if (m >= M) break;
    for (uint j = 0; j < TN; ++j) {
      const uint n = n0 + tx * TN + j;
      if (n >= N) break;
      const float add = HAS_BIAS != 0 ? float(bias[n]) : 0.0;
      o[m * p.ldo + n] = T(matmul_epilogue(p.alpha * acc[i * TN + j] + add, 0.0, 0.0));
    }
  }
}
