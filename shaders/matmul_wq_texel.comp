#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
// out = act(alpha * A·Wᵀ + bias) for a quantized Linear weight W [N, K] (ggml blocks: one
// W_<type> of include/vkformer/quant_types.def defined), for CPU devices, shaped like
// matmul_texel.comp: there storage-buffer loads with per-lane addresses become lane loops, while
// texel fetches are vector loads, so A is read as 4-element texels and W as 16-byte texels of
// its raw bytes (wq_texel.glsl). The decoding step (M = 1) takes matmul_wq_vec.comp instead.
//
// A workgroup is one subgroup of SG lanes and computes TM rows x (SG * TN) columns; lane l owns
// columns n0 + l + SG * j, j < TN. Per 32-element block of K each lane
//   - fetches the words of its TN blocks of W and dequantizes them in registers (fma(d, q, m),
//     within fp32 rounding of ggml's d * q + m), once for all TM rows;
//   - fetches its share of the TM x 8 texels of A (texel t = r * SG + lane is row t / 8, quad
//     t % 8) and takes every row's 32 values from the lanes holding them by shuffles with
//     constant indices (one permute each), as matmul_texel does.
// All loops over registers are unrolled so no array is indexed dynamically (lavapipe would keep
// it in memory). Rows past M and columns past N are clamped for loading and not stored. fp32
// accumulation whatever T is.
//
// Fused, each optional (run-time flags in the push block, not specialization constants: each
// variant of this fully unrolled kernel costs lavapipe about a second of JIT when a model loads),
// so that a prompt's linears need no epilogue kernel (src/ops/matmul_fused.cpp; the pre-norm
// stays a dispatch of its own):
//   GATED        W is [2N, K], rows [0, N) the gate and [N, 2N) the up projection: out[m, n] =
//                act(gate[m, n]) · up[m, n]; of a lane's TN columns the first TN / 2 are gate
//                rows and the others the up rows of the same outputs (as matmul_wq_vec.comp).
//   HAS_RESIDUAL out[m, n] += residual[m, n] after everything else (binding 4, laid out as out).

layout(local_size_x_id = 0) in;  // SG: one subgroup
layout(constant_id = 1) const uint TM = 16;  // rows per workgroup
layout(constant_id = 2) const uint TN = 2;   // columns per lane
layout(constant_id = 3) const uint HAS_BIAS = 0;
layout(constant_id = 4) const uint ACT = 0;  // see activations.glsl

const uint SG = gl_WorkGroupSize.x;
const uint NA = (TM * 8 + SG - 1) / SG;  // A fetches per block and lane
const uint TH = TN / 2u;  // GATED: output columns per lane (TN even)

layout(set = 0, binding = 0) uniform samplerBuffer A;
layout(set = 0, binding = 1) uniform usamplerBuffer W;
layout(set = 0, binding = 2) readonly buffer Bias { T bias[]; };  // [N] ([2N] when GATED)
layout(set = 0, binding = 3) writeonly buffer Out { T o[]; };
layout(set = 0, binding = 4) readonly buffer Residual { T residual[]; };
// Optional bindings that are absent (bias, residual) are bound to A and never read.
#define MATMUL_FUSIONS 1
#define MATMUL_PUSH_FLAGS 1
#define GATED (p.flags & 1u)
#define HAS_RESIDUAL (p.flags & 2u)
#include "matmul_base.glsl"  // the push block p and matmul_epilogue

#define WQ_BLOCKS TN  // the lane's blocks decoded at once (wq_texel.glsl)
#include "wq_texel.glsl"

float acc[TM * TN];
uint a_idx[NA];  // texel of this lane's (row, quad) in block 0
uint w_row[TN];  // first halfword of this lane's row j
// The lane's TN blocks of W at the current block of K, dequantized. A global, not a parameter:
// passed as an `inout` array sized by specialization constants it read back as zeros on lavapipe.
float wq[TN * 32];

// Block b of column j's row (starting at halfword `row`), dequantized into wq[j * 32 .. + 31]:
// value = bd * q + bm per half block (wq_texel.glsl's load_block and quant), in one rounding.
void dequantize(uint j, uint row, uint b) {
  load_block(j, row, b);
  [[unroll]] for (uint e = 0; e < 32u; ++e)
    wq[j * 32 + e] = fma(bd[2 * j + e / 16u], quant(j, e), bm[2 * j + e / 16u]);
}

void main() {
  const uint lane = gl_SubgroupInvocationID;
  const uint M = p.M, N = p.N, K = p.K, KB = K / 32u, K4 = K / 4u;
  const uint m0 = (p.y_base + gl_WorkGroupID.y) * TM;
  const bool gated = GATED != 0u;
  const uint n0 = gl_WorkGroupID.x * SG * (gated ? TH : TN);

  [[unroll]] for (uint r = 0; r < NA; ++r) {
    const uint t = min(r * SG + lane, TM * 8 - 1);
    a_idx[r] = min(m0 + t / 8, M - 1) * K4 + t % 8;
  }
  [[unroll]] for (uint j = 0; j < TN; ++j) {
    // Gated: column j < TH is gate row n0 + lane + SG * j, column TH + j its up row N + that.
    const uint jc = gated && j >= TH ? j - TH : j;
    w_row[j] = (min(n0 + lane + SG * jc, N - 1) + (gated && j >= TH ? N : 0u)) * row_hw(K);
  }
  [[unroll]] for (uint i = 0; i < TM * TN; ++i) acc[i] = 0.0;

  for (uint b = 0; b < KB; ++b) {
    // Fetches first (calls into the driver), then the arithmetic.
    vec4 av[NA];
    [[unroll]] for (uint r = 0; r < NA; ++r) av[r] = texelFetch(A, int(a_idx[r] + b * 8u));
    [[unroll]] for (uint j = 0; j < TN; ++j) dequantize(j, w_row[j], b);
    [[unroll]] for (uint i = 0; i < TM; ++i)
      [[unroll]] for (uint g = 0; g < 8u; ++g)
        [[unroll]] for (uint c = 0; c < 4u; ++c) {
          const float a = subgroupShuffle(av[(i * 8 + g) / SG][c], (i * 8 + g) % SG);
          [[unroll]] for (uint j = 0; j < TN; ++j)
            acc[i * TN + j] = fma(a, wq[j * 32 + g * 4 + c], acc[i * TN + j]);
        }
  }

  [[unroll]] for (uint j = 0; j < TN; ++j) {
    const uint n = n0 + lane + SG * j;
    if ((gated && j >= TH) || n >= N) continue;
    const float add = HAS_BIAS != 0u ? float(bias[n]) : 0.0;
    const float add_up = HAS_BIAS != 0u && gated ? float(bias[n + N]) : 0.0;
    const uint ju = min(j + TH, TN - 1u);  // the up column (j < TH when gated)
    [[unroll]] for (uint i = 0; i < TM; ++i) {
      const uint m = m0 + i;
      if (m >= M) continue;
      const float up = gated ? p.alpha * acc[i * TN + ju] + add_up : 0.0;
      const float res = HAS_RESIDUAL != 0u ? float(residual[m * p.ldo + n]) : 0.0;
      o[m * p.ldo + n] = T(matmul_epilogue(p.alpha * acc[i * TN + j] + add, up, res));
    }
  }
}
