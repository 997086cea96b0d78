#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "integer_dot.glsl"
// out = act(alpha * A·Wᵀ + bias) for a quantized W [N, K] (any type of quant_types.def) and a
// few rows of A (decoding: M = 1, or a few rows), on integer dot products of 8-bit values.
//
// A workgroup computes NC = WG / LANES outputs n for ROWS rows of A (grid y: groups of ROWS
// rows), walking K in chunks of CHUNK blocks of 32 values. For each chunk it first quantizes its
// rows' blocks into shared memory, an invocation a block, as ggml's q8_1: dx = max|x| / 127,
// qx = round(x / dx) in [-127, 127], four to a 32-bit word, and Σqx over each half block. Then
// the LANES invocations of an output take the chunk's blocks in turn (lane l: blocks l,
// l + LANES, ...): the weight block's raw quantized values as four 8-bit lanes a word (read once
// for all ROWS rows), dotted with a row's words exactly in int32 (dot4x8), and the block's
// scales applied once in fp32:
//   q8_0: dw·dx·Σq·qx      q4_0: dw·dx·(Σq·qx − 8·Σqx)      q5_0: dw·dx·(Σq·qx − 16·Σqx)
//   q4_1, q4_k, q5_k: dw·dx·Σq·qx + m·dx·Σqx (m: weights.glsl's block_m, −dmin·mn for k-quants)
//   q6_k: dx·(d·sc0·(Σq·qx − 32·Σqx) over the block's first 16 values + d·sc1·(...) the last 16)
// Each block thus gives Σ w·x̂ of the dequantized weights w and x̂ = dx·qx up to fp32 rounding:
// the activations' rounding, |Σ w·(x − x̂)| ≤ dx/2 · Σ|w| per block, is the kernel's only other
// error. The LANES partial sums of each row are added in shared memory (a tree; LANES a power of
// 2). fp32 accumulation.

layout(local_size_x_id = 0) in;                // WG, a multiple of LANES
layout(constant_id = 1) const uint LANES = 16;  // invocations per output, a power of 2
layout(constant_id = 2) const uint HAS_BIAS = 0;
layout(constant_id = 3) const uint ACT = 0;
layout(constant_id = 4) const uint ROWS = 1;    // rows of A per workgroup, 1..MAX_ROWS
layout(constant_id = 5) const uint CHUNK = 32;  // blocks of K quantized per pass

const uint WG = gl_WorkGroupSize.x;
const uint NC = WG / LANES;
const uint MAX_ROWS = 8;

layout(set = 0, binding = 0) readonly buffer A4 { T4 a4[]; };
layout(set = 0, binding = 1) readonly buffer W { uint w[]; };
layout(set = 0, binding = 2) readonly buffer Bias { T bias[]; };  // bound to A when HAS_BIAS = 0
layout(set = 0, binding = 3) writeonly buffer Out { T o[]; };
#include "matmul_base.glsl"  // the push block p and matmul_epilogue

#include "weights.glsl"

shared uint xq[ROWS * CHUNK * 8];  // a block's 32 qx, four to a word
shared float xd[ROWS * CHUNK];     // its dx
shared ivec2 xs[ROWS * CHUNK];     // Σqx over its first and its last 16 values
shared float red[ROWS * WG];

// Elements 4g .. 4g + 3 of block b of the row at `row` as four 8-bit lanes of their raw
// quantized values (weights.glsl's block_q): int8 for q8_0, unsigned 4-, 5- or 6-bit (q6_k
// without its −32) for the others, each < 128, so a signed dot product reads them right.
uint packed_q(uint row, uint b, uint g) {
#if defined(W_Q8_0)
  return w_pair(block_at(row, b) + 1u + 2u * g);
#elif defined(W_Q4_0) || defined(W_Q4_1) || defined(W_Q5_0)
  const uint blk = block_at(row, b);
  const uint q = (w_pair(blk + Q4_HEADER_HW + 2u * (g & 3u)) >> (g < 4u ? 0u : 4u)) & 0x0f0f0f0fu;
#if defined(W_Q5_0)
  const uint h = (w_pair(blk + 1u) >> (4u * g)) & 0xfu;  // fifth bits of the four
  return q | (((h & 1u) | ((h & 2u) << 7) | ((h & 4u) << 14) | ((h & 8u) << 21)) << 4);
#else
  return q;
#endif
#elif defined(W_K4_SCALES)
  const uint s = b % 8u, sb = super_at(row, b);
  const uint q = (w_pair(sb + K4_NIBBLES_HW + 16u * (s / 2u) + 2u * g) >> (4u * (s & 1u))) & 0x0f0f0f0fu;
#if defined(W_Q5_K)
  return q | (((w_pair(sb + 8u + 2u * g) >> s) & 0x01010101u) << 4);
#else
  return q;
#endif
#else  // W_Q6_K
  const uint sb = super_at(row, b), s = b % 8u, h = s / 4u, r = s % 4u;
  const uint low = (w_pair(sb + 32u * h + 16u * (r & 1u) + 2u * g) >> (4u * (r / 2u))) & 0x0f0f0f0fu;
  const uint high = (w_pair(sb + 64u + 16u * h + 2u * g) >> (2u * r)) & 0x03030303u;
  return low | (high << 4);
#endif
}

// The scales of block b: (d, m) as in d·q + m, (d, 0) for q8_0, q4_0 and q5_0 (whose offsets
// come off the sums), and for q6_k the two halves' d·sc.
vec2 block_scales(uint row, uint b) {
#if defined(W_Q6_K)
  const uint sb = super_at(row, b), s = b % 8u;
  const float d = block_d(row, b);
  precise vec2 ds = d * vec2(q6k_scale(sb, s, 0u), q6k_scale(sb, s, 4u));
  return ds;
#else
  return vec2(block_d(row, b), block_m(row, b));
#endif
}

// Σ w·qx over a block from its dot halves dot = (Σq·qx first 16, last 16), the row's half sums
// sx = Σqx and the block's scales.
float block_sum(vec2 sc, ivec2 dot, ivec2 sx) {
#if defined(W_Q6_K)
  return sc.x * float(dot.x - 32 * sx.x) + sc.y * float(dot.y - 32 * sx.y);
#elif defined(W_Q4_0)
  return sc.x * float(dot.x + dot.y - 8 * (sx.x + sx.y));
#elif defined(W_Q5_0)
  return sc.x * float(dot.x + dot.y - 16 * (sx.x + sx.y));
#elif defined(W_Q8_0)
  return sc.x * float(dot.x + dot.y);
#else
  return sc.x * float(dot.x + dot.y) + sc.y * float(sx.x + sx.y);
#endif
}

// Quantizes block kb of row m of A (a row past M: zeros) into slot `slot`.
void quantize_block(uint m, uint kb, uint slot) {
  vec4 x[8];
  float amax = 0.0;
  for (uint g = 0; g < 8u; ++g) {
    x[g] = m < p.M ? vec4(a4[(m * p.K + kb * 32u) / 4u + g]) : vec4(0.0);
    const vec4 ax = abs(x[g]);
    amax = max(amax, max(max(ax.x, ax.y), max(ax.z, ax.w)));
  }
  const float d = amax / 127.0;
  const float id = amax > 0.0 ? 127.0 / amax : 0.0;
  ivec2 sums = ivec2(0);
  for (uint g = 0; g < 8u; ++g) {
    const ivec4 q = clamp(ivec4(round(x[g] * id)), -127, 127);
    xq[slot * 8u + g] = (uint(q.x) & 0xffu) | ((uint(q.y) & 0xffu) << 8) |
                        ((uint(q.z) & 0xffu) << 16) | (uint(q.w) << 24);
    const int s = q.x + q.y + q.z + q.w;
    if (g < 4u) sums.x += s; else sums.y += s;
  }
  xd[slot] = d;
  xs[slot] = sums;
}

void main() {
  const uint tid = gl_LocalInvocationID.x;
  const uint lane = tid % LANES, c = tid / LANES;
  const uint M = p.M, N = p.N, K = p.K, KB = K / 32u;
  const uint m0 = (p.y_base + gl_WorkGroupID.y) * ROWS;
  const uint n = gl_WorkGroupID.x * NC + c;
  const uint row = min(n, N - 1) * row_halfwords(K);

  float acc[MAX_ROWS];
  for (uint r = 0; r < MAX_ROWS; ++r) acc[r] = 0.0;
  for (uint c0 = 0; c0 < KB; c0 += CHUNK) {
    const uint cb = min(CHUNK, KB - c0);
    for (uint i = tid; i < ROWS * cb; i += WG) quantize_block(m0 + i / cb, c0 + i % cb, (i / cb) * CHUNK + i % cb);
    barrier();
    for (uint b = lane; b < cb; b += LANES) {
      uint q[8];
      for (uint g = 0; g < 8u; ++g) q[g] = packed_q(row, c0 + b, g);
      const vec2 sc = block_scales(row, c0 + b);
      for (uint r = 0; r < ROWS; ++r) {
        const uint slot = r * CHUNK + b;
        ivec2 dot = ivec2(0);
        for (uint g = 0; g < 4u; ++g) {
          dot.x += dot4x8(q[g], xq[slot * 8u + g]);
          dot.y += dot4x8(q[g + 4u], xq[slot * 8u + g + 4u]);
        }
        acc[r] += xd[slot] * block_sum(sc, dot, xs[slot]);
      }
    }
    barrier();  // the chunk's slots are read before the next chunk overwrites them
  }

  for (uint r = 0; r < ROWS; ++r) red[r * WG + tid] = acc[r];
  barrier();
  for (uint s = LANES / 2; s > 0; s /= 2) {
    if (lane < s)
      for (uint r = 0; r < ROWS; ++r) red[r * WG + tid] += red[r * WG + tid + s];
    barrier();
  }
  if (lane == 0 && n < N)
    for (uint r = 0; r < ROWS && m0 + r < M; ++r) {
      const float add = HAS_BIAS != 0 ? float(bias[n]) : 0.0;
      o[(m0 + r) * p.ldo + n] = T(matmul_epilogue(p.alpha * red[r * WG + tid] + add, 0.0, 0.0));
    }
}
