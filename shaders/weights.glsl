// Reading weights stored in any weight dtype, widened to fp32. One of W_F32, W_F16, W_BF16,
// W_Q8_0, W_Q4_0, W_Q4_1 is defined; the kernel declares the weight buffer as `uint w[]` and
// includes this after it. Only 32-bit loads: ggml's blocks are 18 (q4_0) and 34 (q8_0) bytes,
// so 2-byte aligned only, and a 32-bit view with halfword extraction needs no 8- or 16-bit
// storage feature (vendor-neutral; on lavapipe the shifts cost less than the loads).
//
// Addresses are in halfwords (16-bit units) from the start of the binding. A row of K elements
// takes row_halfwords(K); quantized rows are K / 32 blocks of BLOCK_HW halfwords:
//   q8_0: d (f16), 32 x int8          value d * q
//   q4_0: d (f16), 16 bytes           value d * (q - 8)
//   q4_1: d (f16), m (f16), 16 bytes  value d * q + m
// where byte j of the 16 holds element j in its low nibble and element j + 16 in its high one.
#ifndef VKF_WEIGHTS_GLSL
#define VKF_WEIGHTS_GLSL

#if defined(W_Q8_0)
#define W_QUANTIZED 1
#define BLOCK_HW 17u
#elif defined(W_Q4_0)
#define W_QUANTIZED 1
#define W_Q4 1
#define BLOCK_HW 9u
#define Q4_HEADER_HW 1u
#elif defined(W_Q4_1)
#define W_QUANTIZED 1
#define W_Q4 1
#define BLOCK_HW 10u
#define Q4_HEADER_HW 2u
#elif defined(W_F32)
#define ELEMENT_HW 2u
#elif defined(W_F16) || defined(W_BF16)
#define ELEMENT_HW 1u
#else
#error "define one of W_F32, W_F16, W_BF16, W_Q8_0, W_Q4_0, W_Q4_1"
#endif

uint w_half(uint i) { return (w[i >> 1] >> ((i & 1u) << 4)) & 0xffffu; }
// Halfwords i (low) and i + 1 (high) as one 32-bit value, at any alignment.
uint w_pair(uint i) {
  return (i & 1u) == 0u ? w[i >> 1] : (w[i >> 1] >> 16) | (w[(i >> 1) + 1u] << 16);
}
float w_f16(uint i) { return unpackHalf2x16(w_half(i)).x; }

uint row_halfwords(uint k) {
#ifdef W_QUANTIZED
  return (k / 32u) * BLOCK_HW;
#else
  return k * ELEMENT_HW;
#endif
}

#ifdef W_QUANTIZED
// The scale d of the block starting at halfword `blk`.
float block_d(uint blk) { return w_f16(blk); }
// q4_1's offset m (0 for the other types).
float block_m(uint blk) {
#ifdef W_Q4_1
  return w_f16(blk + 1u);
#else
  return 0.0;
#endif
}
// Elements 4g .. 4g + 3 (g in 0..7) of a block as the raw quantized values: int8 for q8_0, the
// unsigned nibbles 0..15 for q4_0 and q4_1. Callers apply the scale once per block.
vec4 block_q(uint blk, uint g) {
#ifdef W_Q8_0
  const uint v = w_pair(blk + 1u + 2u * g);
  return vec4(ivec4(int(v << 24), int(v << 16), int(v << 8), int(v)) >> 24);
#else
  const uint v = w_pair(blk + Q4_HEADER_HW + 2u * (g & 3u)) >> (g < 4u ? 0u : 4u);
  return vec4(uvec4(v, v >> 8, v >> 16, v >> 24) & 0xfu);
#endif
}
// Elements 4g .. 4g + 3 of a block, dequantized exactly as ggml does: `precise` keeps q4_1's
// d * q + m a rounded product and a rounded sum (no fused multiply-add), so the values equal
// ggml's bit for bit.
vec4 block_values(uint blk, uint g) {
  const float d = block_d(blk);
#if defined(W_Q4_0)
  precise vec4 v = d * (block_q(blk, g) - 8.0);
#elif defined(W_Q4_1)
  precise vec4 v = d * block_q(blk, g) + block_m(blk);
#else
  precise vec4 v = d * block_q(blk, g);
#endif
  return v;
}
#else
// Element k of the row starting at halfword `row`.
float weight_at(uint row, uint k) {
#if defined(W_F32)
  return uintBitsToFloat(w_pair(row + 2u * k));
#elif defined(W_F16)
  return w_f16(row + k);
#else
  return uintBitsToFloat(w_half(row + k) << 16);
#endif
}
#endif

#endif
