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
// TN columns of the tile (column(): l + SG * j, j < TN, or with QUADS runs of 4, below). Per
// 32-element block of K each lane
//   - fetches the words of its TN blocks of W and dequantizes them in registers (fma(d, q, m),
//     within fp32 rounding of ggml's d * q + m), once for all TM rows;
//   - fetches its share of the TM x 8 texels of A (texel t = r * SG + lane is row t / 8, quad
//     t % 8) and takes every row's 32 values from the lanes holding them by shuffles with
//     constant indices (one permute each), as matmul_texel does.
// All loops over registers are unrolled so no array is indexed dynamically (lavapipe would keep
// it in memory). Rows past M and columns past N are clamped for loading and not stored. fp32
// accumulation whatever T is.
//
// Costs on lavapipe (LLVM 15, AVX2), which shaped this:
//   - A storage-buffer store or load with per-lane addresses is a loop over the lanes with a
//     bounds check and a trip through the stack per element. Done once per output it took 15% to
//     40% of a SmolLM2 prompt linear (the residual's loads were paid even when the flag was off),
//     so with QUADS (the lowering's choice where N and out's layout are multiples of 4, and TN of
//     8) a lane owns runs of 4 consecutive columns and stores each run as one 4-wide element, and
//     the residual is always read as texels (binding 4, one fetch per run).
//   - Compilation grows faster than the code: textureSize() per fetch (now once, in w_last) and
//     the arrays as globals (now locals of main) took most of it.
//
// Fused, each optional (run-time flags in the push block, not specialization constants: each
// variant of this fully unrolled kernel costs lavapipe about a second of JIT when a model loads),
// so that a prompt's linears need no epilogue kernel (src/ops/matmul_fused.cpp; the pre-norm
// stays a dispatch of its own):
//   GATED        W is [2N, K], rows [0, N) the gate and [N, 2N) the up projection: out[m, n] =
//                act(gate[m, n]) · up[m, n]; of a lane's TN columns the first TN / 2 are gate
//                rows and the others the up rows of the same outputs (as matmul_wq_vec.comp).
//   HAS_RESIDUAL out[m, n] += residual[m, n] after everything else (binding 4, laid out as out,
//                read as texels of its raw bytes).

layout(local_size_x_id = 0) in;  // SG: one subgroup
layout(constant_id = 1) const uint TM = 16;  // rows per workgroup
layout(constant_id = 2) const uint TN = 2;   // columns per lane
layout(constant_id = 3) const uint HAS_BIAS = 0;
layout(constant_id = 4) const uint ACT = 0;  // see activations.glsl
// 1: a lane's columns in runs of 4 (column()); TN a multiple of 8 (4 when GATED halves it), N and
// out's row stride and offset multiples of 4 (src/ops/matmul_weights.cpp checks).
layout(constant_id = 5) const uint QUADS = 0;

const uint SG = gl_WorkGroupSize.x;
const uint NA = (TM * 8 + SG - 1) / SG;  // A fetches per block and lane
const uint TH = TN / 2u;  // GATED: output columns per lane (TN even)

layout(set = 0, binding = 0) uniform samplerBuffer A;
layout(set = 0, binding = 1) uniform usamplerBuffer W;
layout(set = 0, binding = 2) readonly buffer Bias { T bias[]; };  // [N] ([2N] when GATED)
layout(set = 0, binding = 3) writeonly buffer Out { T o[]; };
layout(set = 0, binding = 3) writeonly buffer Out4 { T4 o4[]; };  // out again, 4 elements at a time
layout(set = 0, binding = 4) uniform usamplerBuffer Residual;  // its raw bytes, 16-byte texels
// Optional bindings that are absent (bias, residual) are bound to A; the bias is never read, the
// residual's first texel is, and discarded (lavapipe would run a branch around it anyway).
#define MATMUL_FUSIONS 1
#define MATMUL_PUSH_FLAGS 1
#define GATED (p.flags & 1u)
#define HAS_RESIDUAL (p.flags & 2u)
#include "matmul_base.glsl"  // the push block p and matmul_epilogue

#define WQ_BLOCKS TN  // the lane's blocks decoded at once (wq_texel.glsl)
#define WQ_LAST 1
#include "wq_texel.glsl"

// The tile column of the lane's slot j (its output slot j when gated): lane + SG * j, or with
// QUADS 4 * (lane + SG * (j / 4)) + j % 4, so that a lane's outputs come in runs of 4 consecutive
// columns: one texel of the residual and one 4-wide store each.
uint column(uint lane, uint j) {
  return QUADS != 0u ? 4u * (lane + SG * (j / 4u)) + j % 4u : lane + SG * j;
}

// The residual's elements e .. e + 3 (e a multiple of 4), and its element e, from its raw 16-byte
// texels (a view of whole texels fits any element count: the executor's texel_view).
vec4 residual4(uint e) {
#if defined(DTYPE_F16)
  const uvec4 t = texelFetch(Residual, int(e / 8u));
  const bool high = (e & 4u) != 0u;
  return vec4(unpackHalf2x16(high ? t.z : t.x), unpackHalf2x16(high ? t.w : t.y));
#else
  return uintBitsToFloat(texelFetch(Residual, int(e / 4u)));
#endif
}
float residual1(uint e) { return residual4(e & ~3u)[e % 4u]; }

void main() {
  const uint lane = gl_SubgroupInvocationID;
  // Locals, not globals: with these global, lavapipe took 1.7x as long to compile the kernel.
  float acc[TM * TN];
  uint a_idx[NA];     // texel of this lane's (row, quad) in block 0
  uint w_row[TN];     // first halfword of this lane's row j
  float wq[TN * 32];  // the lane's TN blocks of W at the current block of K, dequantized
  w_last = textureSize(W) - 1;
  const uint M = p.M, N = p.N, K = p.K, KB = K / 32u, K4 = K / 4u;
  const uint m0 = (p.y_base + gl_WorkGroupID.y) * TM;
  const bool gated = GATED != 0u;
  const uint n0 = gl_WorkGroupID.x * SG * (gated ? TH : TN);

  [[unroll]] for (uint r = 0; r < NA; ++r) {
    const uint t = min(r * SG + lane, TM * 8 - 1);
    a_idx[r] = min(m0 + t / 8, M - 1) * K4 + t % 8;
  }
  [[unroll]] for (uint j = 0; j < TN; ++j) {
    // Gated: slot j < TH is the gate row of output column(lane, j), slot TH + j its up row.
    const uint jc = gated && j >= TH ? j - TH : j;
    w_row[j] = (min(n0 + column(lane, jc), N - 1) + (gated && j >= TH ? N : 0u)) * row_hw(K);
  }
  [[unroll]] for (uint i = 0; i < TM * TN; ++i) acc[i] = 0.0;

  for (uint b = 0; b < KB; ++b) {
    // Fetches first (calls into the driver), then the arithmetic.
    vec4 av[NA];
    [[unroll]] for (uint r = 0; r < NA; ++r) av[r] = texelFetch(A, int(a_idx[r] + b * 8u));
    // Block b of each of the lane's rows, dequantized: value = bd * q + bm per half block
    // (wq_texel.glsl's load_block and quant), in one rounding.
    [[unroll]] for (uint j = 0; j < TN; ++j) {
      load_block(j, w_row[j], b);
      [[unroll]] for (uint e = 0; e < 32u; ++e)
        wq[j * 32 + e] = fma(bd[2 * j + e / 16u], quant(j, e), bm[2 * j + e / 16u]);
    }
    [[unroll]] for (uint i = 0; i < TM; ++i)
      [[unroll]] for (uint g = 0; g < 8u; ++g)
        [[unroll]] for (uint c = 0; c < 4u; ++c) {
          const float a = subgroupShuffle(av[(i * 8 + g) / SG][c], (i * 8 + g) % SG);
          [[unroll]] for (uint j = 0; j < TN; ++j)
            acc[i * TN + j] = fma(a, wq[j * 32 + g * 4 + c], acc[i * TN + j]);
        }
  }

  // The epilogue: with QUADS a lane's 4-column runs (of TN or, gated, TH outputs) each take one
  // texel of the residual and one 4-wide store; otherwise one fetch and one store per output.
  const uint outs = gated ? TH : TN;
  float add[TN];
  [[unroll]] for (uint j = 0; j < TN; ++j) {
    // Bias of slot j's row: the gate's (j < TH) or the up's when gated.
    const uint jc = gated && j >= TH ? j - TH : j;
    const uint n = min(n0 + column(lane, jc), N - 1) + (gated && j >= TH ? N : 0u);
    add[j] = HAS_BIAS != 0u ? float(bias[n]) : 0.0;
  }
  [[unroll]] for (uint i = 0; i < TM; ++i) {
    const uint m = m0 + i;
    // In bounds without textureSize() (a few dozen of those cost lavapipe seconds of
    // compilation): rows and columns clamped into the residual, A's first texel without one.
    const uint res_row = min(m, M - 1u) * p.ldo;
    if (QUADS != 0u) {
      [[unroll]] for (uint q = 0; q < TN / 4u; ++q) {
        const uint n = n0 + column(lane, 4u * q);
        const vec4 res = residual4(HAS_RESIDUAL != 0u ? res_row + min(n, N - 4u) : 0u);
        vec4 v;
        [[unroll]] for (uint c = 0; c < 4u; ++c) {
          const uint j = 4u * q + c, ju = min(j + TH, TN - 1u);  // ju: the up slot when gated
          const float up = gated ? p.alpha * acc[i * TN + ju] + add[ju] : 0.0;
          v[c] = matmul_epilogue(p.alpha * acc[i * TN + j] + add[j], up, res[c]);
        }
        // m * ldo + n is a multiple of 4 (QUADS).
        if (4u * q < outs && m < M && n < N) o4[(m * p.ldo + n) / 4u] = T4(v);
      }
    } else {
      [[unroll]] for (uint j = 0; j < TN; ++j) {
        const uint n = n0 + column(lane, j), ju = min(j + TH, TN - 1u);
        const float res = residual1(HAS_RESIDUAL != 0u ? res_row + min(n, N - 1u) : 0u);
        const float up = gated ? p.alpha * acc[i * TN + ju] + add[ju] : 0.0;
        const float v = matmul_epilogue(p.alpha * acc[i * TN + j] + add[j], up, res);
        if (j < outs && m < M && n < N) o[m * p.ldo + n] = T(v);
      }
    }
  }
}
