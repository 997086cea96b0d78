#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// out = act(alpha * A·Wᵀ + bias) for a weight W [N, K] stored in another dtype than A (see
// matmul_wq.comp), one row of A per workgroup row (grid y): the decoding path (M = 1), which is
// bound by reading W, so each block of W is read exactly once per row of A.
//
// A workgroup computes NC = WG / LANES outputs; the LANES invocations of one output walk its row
// of W a block (32 elements) at a time, lane l taking blocks l, l + LANES, ... For a quantized W
// the block's raw values are dotted with A first and the scale applied once:
//   q8_0: d·Σq·x,  q4_0: d·(Σq·x − 8·Σx),  q5_0: d·(Σq·x − 16·Σx),  q4_1 and q4_k: d·Σq·x + m·Σx,
//   q6_k: d·Σ(sc·(q − 32))·x (two scales a block: weights.glsl's block_q applies them).
// The LANES partial sums are then added in shared memory (a tree; LANES a power of 2). An
// unquantized W is walked an element at a time. fp32 accumulation.

layout(local_size_x_id = 0) in;  // WG, a multiple of LANES
layout(constant_id = 1) const uint LANES = 8;  // invocations per output, a power of 2 (1: no
                                               // reduction, no barriers)
layout(constant_id = 2) const uint HAS_BIAS = 0;
layout(constant_id = 3) const uint ACT = 0;

const uint WG = gl_WorkGroupSize.x;
const uint NC = WG / LANES;

layout(set = 0, binding = 0) readonly buffer A { T a[]; };
layout(set = 0, binding = 0) readonly buffer A4 { T4 a4[]; };
layout(set = 0, binding = 1) readonly buffer W { uint w[]; };
layout(set = 0, binding = 2) readonly buffer Bias { T bias[]; };  // bound to A when HAS_BIAS = 0
layout(set = 0, binding = 3) writeonly buffer Out { T o[]; };
#include "matmul_base.glsl"  // the push block p and matmul_epilogue

#include "weights.glsl"

shared float red[WG];

void main() {
  const uint tid = gl_LocalInvocationID.x;
  const uint lane = tid % LANES, c = tid / LANES;
  const uint M = p.M, N = p.N, K = p.K;
  const uint m = p.y_base + gl_WorkGroupID.y;
  const uint n = gl_WorkGroupID.x * NC + c;
  const uint a_row = m * K;
  const uint row = min(n, N - 1) * row_halfwords(K);

  float acc = 0.0;
#ifdef W_QUANTIZED
  for (uint b = lane; b < K / 32u; b += LANES) {
    const uint x4 = (a_row + b * 32u) / 4u;  // K is a multiple of 32: whole vec4s
    float s = 0.0, sx = 0.0;
    for (uint g = 0; g < 8u; ++g) {
      const vec4 x = vec4(a4[x4 + g]);
      s += dot(block_q(row, b, g), x);
#ifdef W_SUM_X
      sx += dot(x, vec4(1.0));
#endif
    }
    acc += block_dot(row, b, s, sx);
  }
#else
  for (uint k = lane; k < K; k += LANES) acc = fma(float(a[a_row + k]), weight_at(row, k), acc);
#endif

  // One lane per output (CPU devices, where barrier() is a real cost): no reduction at all.
  if (LANES > 1) {
    red[tid] = acc;
    barrier();
    for (uint s = LANES / 2; s > 0; s /= 2) {
      if (lane < s) red[tid] += red[tid + s];
      barrier();
    }
    acc = red[tid];
  }
  if (lane == 0 && n < N && m < M) {
    const float add = HAS_BIAS != 0 ? float(bias[n]) : 0.0;
    o[m * p.ldo + n] = T(matmul_epilogue(p.alpha * acc + add, 0.0, 0.0));
  }
}
