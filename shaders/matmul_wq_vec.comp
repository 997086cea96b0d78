#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
// The decoding step's mat-vec out = epilogue(x · Wᵀ) for one row x [K] and a quantized Linear
// weight W [N, K] (one W_<type> of quant_types.def), for CPU devices
// (matmul_wq_texel.comp's layout with one row: x and W through texel buffers, one subgroup per
// workgroup, lane l owning columns n0 + l + SG * j).
//
// Per 32-element block of K each lane fetches the raw words of its TN blocks of W (wq_texel.glsl)
// and accumulates raw = Σ q_e · x_e over the block's quantized values q_e, each half of the block
// (16 elements) apart; the block's scale d and offset m (q4_1's m, q4_0's -8d, ...) are applied
// once: acc += d · raw + m · Σ x_e. That is two float operations per weight where dequantizing
// first takes four (lavapipe emits no fused multiply-add). x's 32 values reach every lane by
// shuffles with constant indices, shared by the TN blocks.
//
// Fused, each optional (spec constants), so that a transformer block's mat-vecs need no
// neighbouring kernels:
//   HAS_NORM     x is first RMS-normalized: y = rsqrt(mean(x²) + eps) · W·(γ ∘ x), γ [K] bound at
//                5 (texels like x). Every workgroup sums x² itself (x is read anyway).
//   GATED        W is [2N, K], rows [0, N) the gate and [N, 2N) the up projection: out[n] =
//                act(gate[n]) · up[n] (SwiGLU with act = silu); a lane holds TN / 2 of each.
//   HAS_RESIDUAL out[n] += residual[n] after everything else (binding 4).
// Else out[n] = act(alpha · acc + bias[n]). fp32 accumulation whatever T is.

layout(local_size_x_id = 0) in;  // SG: one subgroup
layout(constant_id = 1) const uint TN = 4;  // rows of W per lane (gate and up rows when GATED)
layout(constant_id = 2) const uint HAS_BIAS = 0;
layout(constant_id = 3) const uint ACT = 0;  // see activations.glsl
layout(constant_id = 4) const uint GATED = 0;
layout(constant_id = 5) const uint HAS_RESIDUAL = 0;
layout(constant_id = 6) const uint HAS_NORM = 0;

const uint SG = gl_WorkGroupSize.x;
const uint NA = (8u + SG - 1u) / SG;  // x texels per block and lane
const uint TO = GATED != 0u ? TN / 2u : TN;  // output columns per lane

layout(set = 0, binding = 0) uniform samplerBuffer A;
layout(set = 0, binding = 1) uniform usamplerBuffer W;
layout(set = 0, binding = 2) readonly buffer Bias { T bias[]; };  // [N] ([2N] when GATED)
layout(set = 0, binding = 3) writeonly buffer Out { T o[]; };
layout(set = 0, binding = 4) readonly buffer Residual { T residual[]; };
layout(set = 0, binding = 5) uniform samplerBuffer Gamma;  // HAS_NORM: γ [K]
// Optional bindings that are absent are bound to A (bias, residual) or A's texels (gamma) and
// never read.
#define MATMUL_PUSH_EPS 1
#define MATMUL_FUSIONS 1  // GATED, HAS_RESIDUAL above
#include "matmul_base.glsl"  // the push block p and matmul_epilogue

#define WQ_BLOCKS TN  // the lane's blocks held at once (wq_texel.glsl)
#include "wq_texel.glsl"

float acc[TN];
uint w_row[TN];

void main() {
  const uint lane = gl_SubgroupInvocationID;
  const uint N = p.N, K = p.K, KB = K / 32u;
  const uint n0 = gl_WorkGroupID.x * SG * TO;

  // Lane l fetches texel t = r * SG + l of each block of x (quad t; lanes past the 8 quads
  // repeat the last one and leave it out of the sum of squares).
  uint a_quad[NA];
  [[unroll]] for (uint r = 0; r < NA; ++r) a_quad[r] = min(r * SG + lane, 7u);
  [[unroll]] for (uint j = 0; j < TO; ++j) {
    const uint n = min(n0 + lane + SG * j, N - 1u);
    w_row[j] = n * row_hw(K);
    if (GATED != 0u) w_row[TO + j] = (n + N) * row_hw(K);
  }
  [[unroll]] for (uint j = 0; j < TN; ++j) acc[j] = 0.0;
  float squares = 0.0;

  for (uint b = 0; b < KB; ++b) {
    vec4 av[NA];
    [[unroll]] for (uint r = 0; r < NA; ++r) {
      av[r] = texelFetch(A, int(b * 8u + a_quad[r]));
      if (HAS_NORM != 0u) {
        if (r * SG + lane < 8u) squares += dot(av[r], av[r]);
        av[r] *= texelFetch(Gamma, int(b * 8u + a_quad[r]));
      }
    }
    [[unroll]] for (uint j = 0; j < TN; ++j) load_block(j, w_row[j], b);
    float raw[TN * 2];
    [[unroll]] for (uint i = 0; i < TN * 2; ++i) raw[i] = 0.0;
    float sum_lo = 0.0, sum_hi = 0.0;
    [[unroll]] for (uint e = 0; e < 32u; ++e) {
      const uint quad = e / 4u;
      const float a = subgroupShuffle(av[quad / SG][e % 4u], quad % SG);
      if (e < 16u) sum_lo += a;
      else sum_hi += a;
      [[unroll]] for (uint j = 0; j < TN; ++j) raw[2 * j + e / 16u] += quant(j, e) * a;
    }
    [[unroll]] for (uint j = 0; j < TN; ++j)
      acc[j] += bd[2 * j] * raw[2 * j] + bm[2 * j] * sum_lo + bd[2 * j + 1] * raw[2 * j + 1] +
                bm[2 * j + 1] * sum_hi;
  }

  float scale = p.alpha;
  if (HAS_NORM != 0u) scale *= inversesqrt(subgroupAdd(squares) / float(K) + p.eps);
  [[unroll]] for (uint j = 0; j < TO; ++j) {
    const uint n = n0 + lane + SG * j;
    if (n >= N) continue;
    float v = scale * acc[j] + (HAS_BIAS != 0u ? float(bias[n]) : 0.0);
    const float up = GATED != 0u ? scale * acc[TO + j] + (HAS_BIAS != 0u ? float(bias[n + N]) : 0.0) : 0.0;
    o[n] = T(matmul_epilogue(v, up, HAS_RESIDUAL != 0u ? float(residual[n]) : 0.0));
  }
}
