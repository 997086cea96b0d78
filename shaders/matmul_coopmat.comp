#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#ifdef COOPMAT_KHR
#extension GL_KHR_cooperative_matrix : require
#else
#extension GL_NV_cooperative_matrix : require
#endif
#include "common.glsl"
#include "activations.glsl"
// out[z] = act(alpha * A[z]·B[z] + bias) on tensor cores: f16 A and B, fp32 accumulators, built
// for f16 storage only. Compiled against VK_NV_cooperative_matrix (matmul_coopmat_nv) and, where
// the shader compiler supports it, VK_KHR_cooperative_matrix (matmul_coopmat_khr, -DCOOPMAT_KHR).
//
// Tiling. The workgroup is WARPS_M x WARPS_N subgroups of SG invocations and computes a BM x BN
// tile of out, BM = LM * TILES_M * WARPS_M, BN = LN * TILES_N * WARPS_N, where LM x LN x LK is an
// MMA shape the device reports (16 x 16 x 16 on most). For each BK = LK * BK_TILES slice of K,
// all invocations stage A (BM x BK) and B (BK x BN, or BN x BK with TRANSPOSE_B) in shared
// memory as f16, zero outside the matrices, so any M, N, K works; then subgroup (wm, wn) loads
// its TILES_M rows of A fragments and TILES_N columns of B fragments from there and accumulates
// TILES_M x TILES_N MMA tiles. Shared rows are padded by 8 halves (16 bytes) against bank
// conflicts. The epilogue stores one accumulator tile at a time to the subgroup's fp32 scratch
// and its invocations apply alpha, bias and the activation on the way to out.
// Batch, y_base and z_base as in matmul.comp.

layout(local_size_x_id = 0) in;  // SG * WARPS_M * WARPS_N
layout(constant_id = 1) const uint LM = 16;
layout(constant_id = 2) const uint LN = 16;
layout(constant_id = 3) const uint LK = 16;
layout(constant_id = 4) const uint WARPS_M = 2;
layout(constant_id = 5) const uint WARPS_N = 2;
layout(constant_id = 6) const uint TILES_M = 2;
layout(constant_id = 7) const uint TILES_N = 2;
layout(constant_id = 8) const uint BK_TILES = 2;
layout(constant_id = 9) const uint TRANSPOSE_B = 0;
layout(constant_id = 10) const uint HAS_BIAS = 0;
layout(constant_id = 11) const uint ACT = 0;  // 0 none, 1 relu, 2 gelu

const uint WG = gl_WorkGroupSize.x;
const uint BM = LM * TILES_M * WARPS_M;
const uint BN = LN * TILES_N * WARPS_N;
const uint BK = LK * BK_TILES;
const uint PAD = 8;
const uint AS = BK + PAD;                                // As[m * AS + k]
const uint BS = TRANSPOSE_B != 0 ? BK + PAD : BN + PAD;  // Bs[n * BS + k] or Bs[k * BS + n]
const uint B_ROWS = TRANSPOSE_B != 0 ? BN : BK;

layout(set = 0, binding = 0) readonly buffer A { T a[]; };
layout(set = 0, binding = 1) readonly buffer B { T b[]; };
layout(set = 0, binding = 2) readonly buffer Bias { T bias[]; };  // bound to A when HAS_BIAS = 0
layout(set = 0, binding = 3) writeonly buffer Out { T o[]; };
layout(push_constant) uniform Push {  // as matmul.comp
  uint M, N, K;
  uint batch1;
  uint a_stride0, a_stride1;
  uint b_stride0, b_stride1;
  uint y_base;
  uint z_base;
  float alpha;
  uint splits;
  uint k_split;
  uint ldo;  // out's row stride (N, or more when out is a window's columns)
} p;

shared float16_t As[BM * AS];
shared float16_t Bs[B_ROWS * BS];
shared float Cs[WARPS_M * WARPS_N * LM * LN];

#ifdef COOPMAT_KHR
#define MAT_A coopmat<float16_t, gl_ScopeSubgroup, LM, LK, gl_MatrixUseA>
#define MAT_B coopmat<float16_t, gl_ScopeSubgroup, LK, LN, gl_MatrixUseB>
#define MAT_C coopmat<float, gl_ScopeSubgroup, LM, LN, gl_MatrixUseAccumulator>
#define LOAD(m, buf, off, stride, col_major)                        \
  coopMatLoad(m, buf, off, stride,                                  \
              (col_major) ? gl_CooperativeMatrixLayoutColumnMajor \
                          : gl_CooperativeMatrixLayoutRowMajor)
#define STORE(m, buf, off, stride) coopMatStore(m, buf, off, stride, gl_CooperativeMatrixLayoutRowMajor)
#define MUL_ADD(a, b, c) coopMatMulAdd(a, b, c)
#else
#define MAT_A fcoopmatNV<16, gl_ScopeSubgroup, LM, LK>
#define MAT_B fcoopmatNV<16, gl_ScopeSubgroup, LK, LN>
#define MAT_C fcoopmatNV<32, gl_ScopeSubgroup, LM, LN>
#define LOAD(m, buf, off, stride, col_major) coopMatLoadNV(m, buf, off, stride, col_major)
#define STORE(m, buf, off, stride) coopMatStoreNV(m, buf, off, stride, false)
#define MUL_ADD(a, b, c) coopMatMulAddNV(a, b, c)
#endif

void main() {
  const uint lid = gl_LocalInvocationID.x;
  const uint warp = gl_SubgroupID;
  const uint wm = warp / WARPS_N, wn = warp % WARPS_N;
  const uint m0 = (p.y_base + gl_WorkGroupID.y) * BM;
  const uint n0 = gl_WorkGroupID.x * BN;
  const uint z = p.z_base + gl_WorkGroupID.z;
  const uint z0 = z / p.batch1, z1 = z % p.batch1;
  const uint a_off = z0 * p.a_stride0 + z1 * p.a_stride1;
  const uint b_off = z0 * p.b_stride0 + z1 * p.b_stride1;
  const uint M = p.M, N = p.N, K = p.K;

  MAT_C acc[TILES_M * TILES_N];
  for (uint t = 0; t < TILES_M * TILES_N; ++t) acc[t] = MAT_C(0.0);

  for (uint k0 = 0; k0 < K; k0 += BK) {
    // Consecutive invocations read consecutive elements along each matrix's contiguous dim.
    for (uint e = lid; e < BM * BK; e += WG) {
      uint r = e / BK, c = e % BK;
      uint m = m0 + r, k = k0 + c;
      T v = a[a_off + min(m, M - 1) * K + min(k, K - 1)];
      As[r * AS + c] = (m < M && k < K) ? float16_t(v) : float16_t(0.0);
    }
    for (uint e = lid; e < BK * BN; e += WG) {
      if (TRANSPOSE_B != 0) {
        uint r = e / BK, c = e % BK;  // r: n, c: k
        uint n = n0 + r, k = k0 + c;
        T v = b[b_off + min(n, N - 1) * K + min(k, K - 1)];
        Bs[r * BS + c] = (n < N && k < K) ? float16_t(v) : float16_t(0.0);
      } else {
        uint r = e / BN, c = e % BN;  // r: k, c: n
        uint n = n0 + c, k = k0 + r;
        T v = b[b_off + min(k, K - 1) * N + min(n, N - 1)];
        Bs[r * BS + c] = (n < N && k < K) ? float16_t(v) : float16_t(0.0);
      }
    }
    barrier();
    for (uint kt = 0; kt < BK_TILES; ++kt) {
      MAT_A fa[TILES_M];
      MAT_B fb[TILES_N];
      for (uint i = 0; i < TILES_M; ++i)
        LOAD(fa[i], As, ((wm * TILES_M + i) * LM) * AS + kt * LK, AS, false);
      for (uint j = 0; j < TILES_N; ++j) {
        uint n = (wn * TILES_N + j) * LN;
        if (TRANSPOSE_B != 0)
          LOAD(fb[j], Bs, n * BS + kt * LK, BS, true);  // B (k, n) at n * BS + k: column-major
        else
          LOAD(fb[j], Bs, (kt * LK) * BS + n, BS, false);
      }
      for (uint i = 0; i < TILES_M; ++i)
        for (uint j = 0; j < TILES_N; ++j)
          acc[i * TILES_N + j] = MUL_ADD(fa[i], fb[j], acc[i * TILES_N + j]);
    }
    barrier();
  }

  const uint sg = gl_SubgroupSize, sl = gl_SubgroupInvocationID;
  const uint c_off = warp * LM * LN;
  const uint o_off = z * M * p.ldo;
  for (uint i = 0; i < TILES_M; ++i)
    for (uint j = 0; j < TILES_N; ++j) {
      STORE(acc[i * TILES_N + j], Cs, c_off, LN);
      subgroupMemoryBarrierShared();
      subgroupBarrier();
      const uint tm0 = m0 + (wm * TILES_M + i) * LM, tn0 = n0 + (wn * TILES_N + j) * LN;
      for (uint e = sl; e < LM * LN; e += sg) {
        uint m = tm0 + e / LN, n = tn0 + e % LN;
        if (m >= M || n >= N) continue;
        float add = HAS_BIAS != 0 ? float(bias[n]) : 0.0;
        o[o_off + m * p.ldo + n] = T(activate(p.alpha * Cs[c_off + e] + add, ACT));
      }
      subgroupBarrier();  // the next tile overwrites the scratch
    }
}
