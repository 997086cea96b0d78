#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// out[z] = act(alpha * A[z]·B[z] + bias) for a batch of row-major matrices: A[z] is M x K,
// B[z] is K x N (or N x K with TRANSPOSE_B), bias is [N], out[z] is M x N. Products accumulate in
// fp32 whatever T is; alpha, bias and the activation are applied once, when storing.
//
// Tiling. Workgroup (x, y, z) computes the BM x BN tile of out[z_base + z] at rows
// (y_base + y)*BM, columns x*BN. Its (BM/TM)*(BN/TN) invocations form a TX = BN/TN wide,
// TY = BM/TM tall grid; invocation (tx, ty) owns the TM x TN outputs at rows ty + i*TY and columns
// tx + j*TX of the tile, strided so that neighbouring invocations touch neighbouring columns
// (coalesced stores, conflict-free shared reads, and B loads that are contiguous across a CPU's
// SIMD lanes). No subgroup operations: any subgroup size works.
//   USE_SHARED = 1 (GPUs): for each BK-deep slice of K the workgroup stages A[BM x BK] and
//     B[BK x BN] in shared memory as fp32 (zero outside the matrices), then every invocation
//     accumulates its TM x TN block from there: TM + TN shared reads per TM*TN FMAs.
//   USE_SHARED = 0 (CPU devices, where a workgroup runs on one thread and barrier() is a real
//     cost): no shared memory and no barriers; each invocation reads its TM values of A and TN
//     values of B straight from the buffers for every k. With TY = 1 every row is uniform across
//     the workgroup, so A reads are uniform loads. BK is unused (the lowering passes 1).
// Rows and columns past the edge of out are clamped to the last one for loading and not stored,
// so any M, N, K >= 1 works, multiple of a tile or not.
//
// VEC4 = 1 (shared memory only; K, and N without TRANSPOSE_B, multiples of 4): the slices are
// loaded as 4-element vectors along the contiguous dim, a quarter of the load instructions.
//
// Batch: z splits into (z0, z1) over out's batch dims [*, batch1]; a and b step by their own
// element strides per batch dim, 0 where they broadcast. Row tiles and batches beyond the grid
// limits go in further dispatches, which start at tile row y_base and batch z_base.
//
// SPLIT_K (compiled as matmul_split): grid z runs over batch x p.splits; workgroup z covers K
// range [s * k_split, (s + 1) * k_split) (k_split a multiple of BK) and writes its raw fp32 sums
// to part[(z * splits + s) * M * N + ...]; matmul_reduce.comp adds the splits and applies alpha,
// bias and the activation. For outputs with too few tiles to fill a GPU.

layout(local_size_x_id = 0) in;  // = (BM / TM) * (BN / TN)
layout(constant_id = 1) const uint BM = 64;
layout(constant_id = 2) const uint BN = 64;
layout(constant_id = 3) const uint BK = 16;
layout(constant_id = 4) const uint TM = 4;
layout(constant_id = 5) const uint TN = 4;
layout(constant_id = 6) const uint USE_SHARED = 1;
layout(constant_id = 7) const uint TRANSPOSE_B = 0;
layout(constant_id = 8) const uint HAS_BIAS = 0;
layout(constant_id = 9) const uint ACT = 0;  // 0 none, 1 relu, 2 gelu
layout(constant_id = 10) const uint VEC4 = 0;

const uint TX = BN / TN;
const uint TY = BM / TM;

layout(set = 0, binding = 0) readonly buffer A { T a[]; };
layout(set = 0, binding = 0) readonly buffer A4 { T4 a4[]; };  // the same buffer, for VEC4
layout(set = 0, binding = 1) readonly buffer B { T b[]; };
layout(set = 0, binding = 1) readonly buffer B4 { T4 b4[]; };
layout(set = 0, binding = 2) readonly buffer Bias { T bias[]; };  // bound to A when HAS_BIAS = 0
#ifdef SPLIT_K
layout(set = 0, binding = 3) writeonly buffer Part { float part[]; };
#else
layout(set = 0, binding = 3) writeonly buffer Out { T o[]; };
#endif
#include "matmul_base.glsl"  // the push block p and matmul_epilogue

// Slices of A (transposed, so that a k-step reads one row) and B. Rows are padded by one float:
// the loads store along k (A, and B with TRANSPOSE_B), which would otherwise hit one bank.
const uint AS = BM + 1;
const uint BS = BN + 1;
shared float As[BK * AS];  // As[k * AS + m]
shared float Bs[BK * BS];  // Bs[k * BS + n]

void main() {
  const uint lid = gl_LocalInvocationID.x;
  const uint tx = TY == 1 ? lid : lid % TX;
  const uint ty = TY == 1 ? 0 : lid / TX;
  const uint m0 = (p.y_base + gl_WorkGroupID.y) * BM;
  const uint n0 = gl_WorkGroupID.x * BN;
#ifdef SPLIT_K
  const uint zs = p.z_base + gl_WorkGroupID.z;  // batch * splits + split
  const uint z = zs / p.splits;
  const uint k_begin = (zs % p.splits) * p.k_split;
  const uint K = min(p.K, k_begin + p.k_split);  // end of this split's range
#else
  const uint z = p.z_base + gl_WorkGroupID.z;
  const uint k_begin = 0;
  const uint K = p.K;
#endif
  const uint z0 = z / p.batch1, z1 = z % p.batch1;
  const uint a_off = z0 * p.a_stride0 + z1 * p.a_stride1;
  const uint b_off = z0 * p.b_stride0 + z1 * p.b_stride1;
  const uint M = p.M, N = p.N, KA = p.K;  // KA: the row length of A (and of B transposed)

  float acc[TM * TN];
  for (uint i = 0; i < TM * TN; ++i) acc[i] = 0.0;

  if (USE_SHARED != 0) {
    const uint WG = TX * TY;
    for (uint k0 = k_begin; k0 < K; k0 += BK) {
      // A is read along K and B along its contiguous dim, so consecutive invocations read
      // consecutive elements.
      if (VEC4 != 0) {
        // Whole vectors are in or out of the matrices: K (and N) are multiples of 4.
        for (uint e = lid; e < BM * BK / 4; e += WG) {
          uint r = e / (BK / 4), c = e % (BK / 4) * 4;
          uint m = m0 + r, k = k0 + c;
          vec4 v = vec4(a4[(a_off + min(m, M - 1) * KA + min(k, KA - 4)) / 4]);
          if (m >= M || k >= K) v = vec4(0.0);
          for (uint q = 0; q < 4; ++q) As[(c + q) * AS + r] = v[q];
        }
        for (uint e = lid; e < BK * BN / 4; e += WG) {
          if (TRANSPOSE_B != 0) {
            uint c = e / (BK / 4), r = e % (BK / 4) * 4;  // c: n, r: k within the slice
            uint n = n0 + c, k = k0 + r;
            vec4 v = vec4(b4[(b_off + min(n, N - 1) * KA + min(k, KA - 4)) / 4]);
            if (n >= N || k >= K) v = vec4(0.0);
            for (uint q = 0; q < 4; ++q) Bs[(r + q) * BS + c] = v[q];
          } else {
            uint r = e / (BN / 4), c = e % (BN / 4) * 4;
            uint n = n0 + c, k = k0 + r;
            vec4 v = vec4(b4[(b_off + min(k, KA - 1) * N + min(n, N - 4)) / 4]);
            if (n >= N || k >= K) v = vec4(0.0);
            for (uint q = 0; q < 4; ++q) Bs[r * BS + c + q] = v[q];
          }
        }
      } else {
        for (uint e = lid; e < BM * BK; e += WG) {
          uint r = e / BK, c = e % BK;
          uint m = m0 + r, k = k0 + c;
          float v = float(a[a_off + min(m, M - 1) * KA + min(k, K - 1)]);
          As[c * AS + r] = (m < M && k < K) ? v : 0.0;
        }
        for (uint e = lid; e < BK * BN; e += WG) {
          uint r, c;  // r: k within the slice, c: n within the tile
          if (TRANSPOSE_B != 0) {
            c = e / BK;
            r = e % BK;
          } else {
            r = e / BN;
            c = e % BN;
          }
          uint n = min(n0 + c, N - 1), k = min(k0 + r, K - 1);
          float v = float(b[b_off + (TRANSPOSE_B != 0 ? n * KA + k : k * N + n)]);
          Bs[r * BS + c] = (n0 + c < N && k0 + r < K) ? v : 0.0;
        }
      }
      barrier();
      for (uint k = 0; k < BK; ++k) {
        float bv[TN];
        for (uint j = 0; j < TN; ++j) bv[j] = Bs[k * BS + tx + j * TX];
        for (uint i = 0; i < TM; ++i) {
          float av = As[k * AS + ty + i * TY];
          for (uint j = 0; j < TN; ++j) acc[i * TN + j] = fma(av, bv[j], acc[i * TN + j]);
        }
      }
      barrier();
    }
  } else {
    for (uint k = k_begin; k < K; ++k) {
      float bv[TN];
      for (uint j = 0; j < TN; ++j) {
        uint n = min(n0 + tx + j * TX, N - 1);
        bv[j] = float(b[b_off + (TRANSPOSE_B != 0 ? n * KA + k : k * N + n)]);
      }
      for (uint i = 0; i < TM; ++i) {
        uint m = min(m0 + ty + i * TY, M - 1);
        float av = float(a[a_off + m * KA + k]);
        for (uint j = 0; j < TN; ++j) acc[i * TN + j] = fma(av, bv[j], acc[i * TN + j]);
      }
    }
  }

#ifdef SPLIT_K
  const uint p_off = zs * M * N;
  for (uint j = 0; j < TN; ++j) {
    uint n = n0 + tx + j * TX;
    if (n >= N) continue;
    for (uint i = 0; i < TM; ++i) {
      uint m = m0 + ty + i * TY;
      if (m < M) part[p_off + m * N + n] = acc[i * TN + j];
    }
  }
#else
  const uint o_off = z * M * p.ldo;
  for (uint j = 0; j < TN; ++j) {
    uint n = n0 + tx + j * TX;
    if (n >= N) continue;
    float add = 0.0;
    if (HAS_BIAS != 0) add = float(bias[n]);
    for (uint i = 0; i < TM; ++i) {
      uint m = m0 + ty + i * TY;
      if (m < M) o[o_off + m * p.ldo + n] = T(matmul_epilogue(p.alpha * acc[i * TN + j] + add, 0.0, 0.0));
    }
  }
#endif
}
