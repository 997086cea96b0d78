// Reading weights stored in any weight dtype, widened to fp32. One of W_F32, W_F16, W_BF16 or
// W_<type> (a type of include/vkformer/quant_types.def: W_Q8_0, ...) is defined; the kernel declares the weight
// buffer as `uint w[]` and includes this after it. Only 32-bit loads: ggml's blocks are 18
// (q4_0), 22 (q5_0), 34 (q8_0) and 210 (q6_k) bytes, so 2-byte aligned only, and a 32-bit view
// with halfword extraction needs no 8- or 16-bit storage feature (vendor-neutral; on lavapipe
// the shifts cost less than the loads).
//
// Addresses are in halfwords (16-bit units) from the start of the binding; a row of K elements
// takes row_halfwords(K) and starts at row * row_halfwords(K). Every quantized type is read as
// 32-element blocks b = 0, 1, ... of a row, whatever its own block size:
//   q8_0: d (f16), 32 x int8                    value d * q
//   q4_0: d (f16), 16 bytes                     value d * (q - 8)
//   q4_1: d (f16), m (f16), 16 bytes            value d * q + m
//   q5_0: d (f16), 32 high bits, 16 bytes       value d * (q - 16), q = nibble | bit << 4
// where byte j of the 16 holds element j in its low nibble and element j + 16 in its high one;
// the k-quants are 256-element super-blocks, block b being sub-block b % 8 of super-block b / 8:
//   q4_k: d, dmin (f16), 12 bytes of 6-bit scales sc and mins mn (8 each), 128 bytes: sub-block
//         s has its nibbles in bytes 32 * (s / 2) ..+ 31, low for even s; value d*sc * q - dmin*mn
//   q5_k: q4_k's header (d, dmin, 12 scale bytes), 32 bytes of high bits, then its 128 bytes
//         of nibbles; element e of sub-block s has its fifth bit at bit s of high byte e % 32
//   q6_k: 128 bytes of low nibbles, 64 bytes of 2-bit highs, 16 int8 scales, d (f16); element e
//         of sub-block s = 4h + r: low nibble in byte 64h + 32(r % 2) + e (high nibble for
//         r >= 2), high bits 2r.. of byte 128 + 32h + e, scale byte 192 + 8h + 2r + e / 16;
//         value d*sc * (q - 32)
#ifndef VKF_WEIGHTS_GLSL
#define VKF_WEIGHTS_GLSL

#if defined(W_Q8_0)
#define W_QUANTIZED 1
#define BLOCK_HW 17u
#elif defined(W_Q4_0)
#define W_QUANTIZED 1
#define W_SUM_X 1
#define BLOCK_HW 9u
#define Q4_HEADER_HW 1u
#elif defined(W_Q4_1)
#define W_QUANTIZED 1
#define W_SUM_X 1
#define BLOCK_HW 10u
#define Q4_HEADER_HW 2u
#elif defined(W_Q5_0)
#define W_QUANTIZED 1
#define W_SUM_X 1
#define BLOCK_HW 11u
#define Q4_HEADER_HW 3u
#elif defined(W_Q4_K)
#define W_QUANTIZED 1
#define W_SUM_X 1
#define W_K_QUANT 1
#define W_K4_SCALES 1
#define SUPER_HW 72u
#define K4_NIBBLES_HW 8u
#elif defined(W_Q5_K)
#define W_QUANTIZED 1
#define W_SUM_X 1
#define W_K_QUANT 1
#define W_K4_SCALES 1
#define SUPER_HW 88u
#define K4_NIBBLES_HW 24u
#elif defined(W_Q6_K)
#define W_QUANTIZED 1
#define W_K_QUANT 1
#define SUPER_HW 105u
#elif defined(W_F32)
#define ELEMENT_HW 2u
#elif defined(W_F16) || defined(W_BF16)
#define ELEMENT_HW 1u
#else
#error "define W_F32, W_F16, W_BF16 or one W_<type> of include/vkformer/quant_types.def"
#endif

uint w_half(uint i) { return (w[i >> 1] >> ((i & 1u) << 4)) & 0xffffu; }
// Halfwords i (low) and i + 1 (high) as one 32-bit value, at any alignment.
uint w_pair(uint i) {
  return (i & 1u) == 0u ? w[i >> 1] : (w[i >> 1] >> 16) | (w[(i >> 1) + 1u] << 16);
}
float w_f16(uint i) { return unpackHalf2x16(w_half(i)).x; }
// The four bytes of a 32-bit value as the lanes of a vector.
uvec4 bytes4(uint v) { return uvec4(v, v >> 8, v >> 16, v >> 24) & 0xffu; }

uint row_halfwords(uint k) {
#if defined(W_K_QUANT)
  return (k / 256u) * SUPER_HW;
#elif defined(W_QUANTIZED)
  return (k / 32u) * BLOCK_HW;
#else
  return k * ELEMENT_HW;
#endif
}

#ifdef W_QUANTIZED
#ifdef W_K_QUANT
// The first halfword of the super-block holding block b of the row at `row`.
uint super_at(uint row, uint b) { return row + (b / 8u) * SUPER_HW; }
#else
uint block_at(uint row, uint b) { return row + b * BLOCK_HW; }
#endif

#ifdef W_K4_SCALES  // q4_k, q5_k
// Byte i of the 12 scale bytes of the super-block at halfword sb.
uint q4k_scale_byte(uint sb, uint i) { return (w_pair(sb + 2u + (i & ~3u) / 2u) >> (8u * (i & 3u))) & 0xffu; }
// Sub-block s's 6-bit scale (x) and min (y), ggml's get_scale_min_k4.
uvec2 q4k_scale_min(uint sb, uint s) {
  if (s < 4u) return uvec2(q4k_scale_byte(sb, s) & 63u, q4k_scale_byte(sb, s + 4u) & 63u);
  const uint hi = q4k_scale_byte(sb, s + 4u);
  return uvec2((hi & 0xfu) | ((q4k_scale_byte(sb, s - 4u) >> 6) << 4),
               (hi >> 4) | ((q4k_scale_byte(sb, s) >> 6) << 4));
}
#endif
#if defined(W_Q4_0) || defined(W_Q4_1) || defined(W_Q5_0)
// The low 4 bits of elements 4g .. 4g + 3 of the block at halfword blk.
uvec4 block_nibbles(uint blk, uint g) {
  return bytes4(w_pair(blk + Q4_HEADER_HW + 2u * (g & 3u)) >> (g < 4u ? 0u : 4u)) & 0xfu;
}
#endif
#ifdef W_Q6_K
// q - 32 of elements 4g .. 4g + 3 of sub-block s of the super-block at halfword sb.
vec4 q6k_quants(uint sb, uint s, uint g) {
  const uint h = s / 4u, r = s % 4u;
  const uint low = w_pair(sb + 32u * h + 16u * (r & 1u) + 2u * g) >> (4u * (r / 2u));
  const uint high = w_pair(sb + 64u + 16u * h + 2u * g) >> (2u * r);
  return vec4(ivec4((bytes4(low) & 0xfu) | ((bytes4(high) & 3u) << 4)) - 32);
}
// The int8 scale of elements 4g .. 4g + 3 of sub-block s.
float q6k_scale(uint sb, uint s, uint g) {
  const uint half_scales = w_half(sb + 96u + 4u * (s / 4u) + s % 4u);
  return float(int(half_scales << (24u - 8u * (g / 4u))) >> 24);
}
#endif

// The scale d of block b of the row at `row` (q4_k: d * sc, rounded as ggml does).
float block_d(uint row, uint b) {
#if defined(W_K4_SCALES)
  const uint sb = super_at(row, b);
  precise float d = w_f16(sb) * float(q4k_scale_min(sb, b % 8u).x);
  return d;
#elif defined(W_Q6_K)
  return w_f16(super_at(row, b) + 104u);
#else
  return w_f16(block_at(row, b));
#endif
}
// The additive term of the value d * q + m: q4_1's m, q4_k's -dmin * mn; 0 for the other types
// (q4_0 and q5_0 subtract their offset from q instead).
float block_m(uint row, uint b) {
#if defined(W_Q4_1)
  return w_f16(block_at(row, b) + 1u);
#elif defined(W_K4_SCALES)
  const uint sb = super_at(row, b);
  precise float m = w_f16(sb + 1u) * float(q4k_scale_min(sb, b % 8u).y);
  return -m;
#else
  return 0.0;
#endif
}
// Elements 4g .. 4g + 3 (g in 0..7) of block b as raw quantized values: int8 for q8_0, the
// unsigned 4-bit (q4_0, q4_1, q4_k) or 5-bit (q5_0, q5_k) values, and for q6_k the signed q - 32
// times the int8 scale of those elements. Callers apply block_d (and block_m) once per block.
vec4 block_q(uint row, uint b, uint g) {
#if defined(W_Q8_0)
  const uint v = w_pair(block_at(row, b) + 1u + 2u * g);
  return vec4(ivec4(int(v << 24), int(v << 16), int(v << 8), int(v)) >> 24);
#elif defined(W_Q4_0) || defined(W_Q4_1)
  return vec4(block_nibbles(block_at(row, b), g));
#elif defined(W_Q5_0)
  const uint blk = block_at(row, b);
  const uvec4 high = (uvec4(w_pair(blk + 1u)) >> (4u * g + uvec4(0u, 1u, 2u, 3u))) & 1u;
  return vec4(block_nibbles(blk, g) | (high << 4));
#elif defined(W_K4_SCALES)
  const uint s = b % 8u, sb = super_at(row, b);
  const uint v = w_pair(sb + K4_NIBBLES_HW + 16u * (s / 2u) + 2u * g);
  const uvec4 q = bytes4(v >> (4u * (s & 1u))) & 0xfu;
#if defined(W_Q5_K)
  return vec4(q | (((bytes4(w_pair(sb + 8u + 2u * g)) >> s) & 1u) << 4));
#else
  return vec4(q);
#endif
#else  // W_Q6_K
  const uint sb = super_at(row, b), s = b % 8u;
  return q6k_scale(sb, s, g) * q6k_quants(sb, s, g);
#endif
}
// Σ value_e · x_e over block b from the raw sums s = Σ block_q · x and (W_SUM_X types) sx = Σ x.
float block_dot(uint row, uint b, float s, float sx) {
#if defined(W_Q4_0)
  return block_d(row, b) * (s - 8.0 * sx);
#elif defined(W_Q5_0)
  return block_d(row, b) * (s - 16.0 * sx);
#elif defined(W_SUM_X)
  return block_d(row, b) * s + block_m(row, b) * sx;
#else
  return block_d(row, b) * s;
#endif
}
// Elements 4g .. 4g + 3 of block b, dequantized exactly as ggml does: `precise` keeps products
// and sums rounded one at a time (no fused multiply-add) in ggml's order, so the values equal
// ggml's (and the gguf package's) bit for bit.
vec4 block_values(uint row, uint b, uint g) {
#if defined(W_Q4_0)
  precise vec4 v = block_d(row, b) * (block_q(row, b, g) - 8.0);
#elif defined(W_Q5_0)
  precise vec4 v = block_d(row, b) * (block_q(row, b, g) - 16.0);
#elif defined(W_Q4_1) || defined(W_K4_SCALES)
  precise vec4 v = block_d(row, b) * block_q(row, b, g) + block_m(row, b);
#elif defined(W_Q6_K)
  // ggml: (d * sc) * q, the scale product rounded first.
  const uint sb = super_at(row, b), s = b % 8u;
  precise float ds = block_d(row, b) * q6k_scale(sb, s, g);
  precise vec4 v = ds * q6k_quants(sb, s, g);
#else
  precise vec4 v = block_d(row, b) * block_q(row, b, g);
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
