#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
// out[z] = act(alpha * A[z]·B[z] + bias) like matmul.comp, for devices where a workgroup runs on
// one CPU thread and its invocations are the lanes of a SIMD register (lavapipe, SwiftShader):
// there every buffer load is a loop over the lanes and dominates the FMAs, while texel fetches
// gather whole 16-byte texels and subgroup shuffles with a constant index are one permute.
//
// A and B are read as uniform texel buffers of 4-component texels (4 consecutive elements), so
// K must be a multiple of 4 (and N too without TRANSPOSE_B); the lowering checks that.
// A workgroup is one subgroup of SG lanes and computes a TM x (SG * TN) tile of out:
//   TRANSPOSE_B = 1 (B is N x K, the Linear layout): lane l owns columns n0 + l + SG * j,
//     j < TN; one fetch gives it 4 consecutive k of one column.
//   TRANSPOSE_B = 0 (B is K x N): lane l owns columns n0 + 4 * (l + SG * v) + q, v < TN / 4,
//     q < 4; one fetch gives it 4 consecutive columns at one k.
// Every lane needs the same A values, so the lanes fetch them once between them and broadcast:
// for a batch of QB k-quads, texel t = r * SG + lane of fetch r is (row t % TM, quad t / TM), and
// subgroupShuffle(a[(qb*TM + i) / SG], (qb*TM + i) % SG) hands row i's quad qb to every lane.
// Per k-quad and lane: TN B fetches, TM / SG A fetches, TM shuffles per k, 4 * TM * TN FMAs.
//
// Fetches are calls into the driver's texel-fetch function and registers are caller-saved, so a
// batch first fetches all it needs and then accumulates: the accumulators are reloaded once per
// batch, not once per fetch. Blocks larger than the register file (16 x 2, 16 x 4 on lavapipe)
// still win, since spilled accumulators cost less than the fetches a smaller block needs. Every
// loop over a block dimension is unrolled ([[unroll]]) so that no array is indexed dynamically
// (lavapipe would keep it in memory and address it lane by lane, 10x slower).
// Rows past M and columns past N are clamped for loading and not stored. Products accumulate in
// fp32 whatever T is (texel fetches convert f16 texels to fp32).

layout(local_size_x_id = 0) in;  // SG: one subgroup
layout(constant_id = 1) const uint TM = 12;  // rows per workgroup
layout(constant_id = 2) const uint TN = 2;   // columns per lane (without TRANSPOSE_B: 4 * n)
layout(constant_id = 3) const uint QB = 2;   // k-quads fetched per batch
layout(constant_id = 4) const uint TRANSPOSE_B = 1;
layout(constant_id = 5) const uint HAS_BIAS = 0;
layout(constant_id = 6) const uint ACT = 0;  // 0 none, 1 relu, 2 gelu

const uint SG = gl_WorkGroupSize.x;
const uint VN = TN / 4;                       // B texels per lane and k (no TRANSPOSE_B)
const uint NV = VN > 0 ? VN : 1;              // for declarations (no arrays of length 0)
const uint NA = (TM * QB + SG - 1) / SG;      // A fetches per batch
const uint A1 = (TM + SG - 1) / SG;           // A fetches for a single quad
const uint NB = TRANSPOSE_B != 0 ? TN * QB : NV * 4 * QB;  // B fetches per batch
const uint NI = TRANSPOSE_B != 0 ? TN : NV;   // B texel indices per lane

layout(set = 0, binding = 0) uniform samplerBuffer A;
layout(set = 0, binding = 1) uniform samplerBuffer B;
layout(set = 0, binding = 2) readonly buffer Bias { T bias[]; };  // bound to a when HAS_BIAS = 0
layout(set = 0, binding = 3) writeonly buffer Out { T o[]; };
#include "matmul_base.glsl"  // the push block p and matmul_epilogue

float acc[TM * TN];
uint a_idx[NA];   // per A fetch of a batch: texel of its lane's (row, quad) at the batch start
uint a_row1[A1];  // per A fetch of a single quad: texel of its lane's row at quad 0
uint b_idx[NI];   // TRANSPOSE_B: texel of (column j, quad 0); else: texel column v (at k = 0)

void fma_nt(uint i, float a, vec4 b[NB], uint first, uint c) {
  [[unroll]] for (uint j = 0; j < TN; ++j)
    acc[i * TN + j] = fma(a, b[first + j][c], acc[i * TN + j]);
}

void fma_nn(uint i, float a, vec4 b[NB], uint first) {
  [[unroll]] for (uint v = 0; v < VN; ++v)
    [[unroll]] for (uint q = 0; q < 4; ++q)
      acc[i * TN + v * 4 + q] = fma(a, b[first + v][q], acc[i * TN + v * 4 + q]);
}

// Quads [q0, q0 + QB) of k: all fetches first, then the FMAs.
void batch(uint q0, uint N4) {
  vec4 av[NA];
  vec4 bv[NB];
  [[unroll]] for (uint r = 0; r < NA; ++r) av[r] = texelFetch(A, int(a_idx[r] + q0));
  if (TRANSPOSE_B != 0) {
    [[unroll]] for (uint qb = 0; qb < QB; ++qb)
      [[unroll]] for (uint j = 0; j < TN; ++j)
        bv[qb * TN + j] = texelFetch(B, int(b_idx[j] + q0 + qb));
  } else {
    [[unroll]] for (uint kk = 0; kk < 4 * QB; ++kk)
      [[unroll]] for (uint v = 0; v < VN; ++v)
        bv[kk * NV + v] = texelFetch(B, int((q0 * 4 + kk) * N4 + b_idx[v]));
  }
  [[unroll]] for (uint qb = 0; qb < QB; ++qb)
    [[unroll]] for (uint c = 0; c < 4; ++c)
      [[unroll]] for (uint i = 0; i < TM; ++i) {
        float a = subgroupShuffle(av[(qb * TM + i) / SG][c], (qb * TM + i) % SG);
        if (TRANSPOSE_B != 0)
          fma_nt(i, a, bv, qb * TN, c);
        else
          fma_nn(i, a, bv, (qb * 4 + c) * NV);
      }
}

// One quad q4 of k (the K4 % QB left over): fetches of A give every lane group the same quad.
void single_quad(uint q4, uint N4) {
  vec4 av[A1];
  vec4 bv[NB];
  [[unroll]] for (uint r = 0; r < A1; ++r) av[r] = texelFetch(A, int(a_row1[r] + q4));
  if (TRANSPOSE_B != 0) {
    [[unroll]] for (uint j = 0; j < TN; ++j) bv[j] = texelFetch(B, int(b_idx[j] + q4));
  } else {
    [[unroll]] for (uint c = 0; c < 4; ++c)
      [[unroll]] for (uint v = 0; v < VN; ++v)
        bv[c * NV + v] = texelFetch(B, int((q4 * 4 + c) * N4 + b_idx[v]));
  }
  [[unroll]] for (uint c = 0; c < 4; ++c)
    [[unroll]] for (uint i = 0; i < TM; ++i) {
      float a = subgroupShuffle(av[i / SG][c], i % SG);
      if (TRANSPOSE_B != 0)
        fma_nt(i, a, bv, 0, c);
      else
        fma_nn(i, a, bv, c * NV);
    }
}

void main() {
  const uint lane = gl_SubgroupInvocationID;
  const uint M = p.M, N = p.N, K = p.K, K4 = K / 4, N4 = N / 4;
  const uint m0 = (p.y_base + gl_WorkGroupID.y) * TM;
  const uint n0 = gl_WorkGroupID.x * SG * TN;
  const uint z = p.z_base + gl_WorkGroupID.z;
  const uint z0 = z / p.batch1, z1 = z % p.batch1;
  const uint a_off = (z0 * p.a_stride0 + z1 * p.a_stride1) / 4;  // in texels
  const uint b_off = (z0 * p.b_stride0 + z1 * p.b_stride1) / 4;

  [[unroll]] for (uint r = 0; r < NA; ++r) {
    uint t = min(r * SG + lane, TM * QB - 1);
    a_idx[r] = a_off + min(m0 + t % TM, M - 1) * K4 + t / TM;
  }
  [[unroll]] for (uint r = 0; r < A1; ++r)
    a_row1[r] = a_off + min(m0 + min(r * SG + lane, TM - 1), M - 1) * K4;
  if (TRANSPOSE_B != 0) {
    [[unroll]] for (uint j = 0; j < TN; ++j) b_idx[j] = b_off + min(n0 + lane + SG * j, N - 1) * K4;
  } else {
    [[unroll]] for (uint v = 0; v < VN; ++v) b_idx[v] = b_off + min(n0 / 4 + lane + SG * v, N4 - 1);
  }
  [[unroll]] for (uint i = 0; i < TM * TN; ++i) acc[i] = 0.0;

  const uint full = K4 - K4 % QB;
  for (uint q4 = 0; q4 < full; q4 += QB) batch(q4, N4);
  for (uint q4 = full; q4 < K4; ++q4) single_quad(q4, N4);

  const uint o_off = z * M * p.ldo;
  [[unroll]] for (uint j = 0; j < TN; ++j) {
    uint n = TRANSPOSE_B != 0 ? n0 + lane + SG * j : n0 + 4 * (lane + SG * (j / 4)) + j % 4;
    if (n >= N) continue;
    float add = HAS_BIAS != 0 ? float(bias[n]) : 0.0;
    [[unroll]] for (uint i = 0; i < TM; ++i) {
      uint m = m0 + i;
      if (m < M) o[o_off + m * p.ldo + n] = T(matmul_epilogue(p.alpha * acc[i * TN + j] + add, 0.0, 0.0));
    }
  }
}
