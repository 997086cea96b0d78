// Rows of a KV cache of any type of kv_cache_types.glsl bound as 16-bit words (halfwords), built
// in shared memory as floats: what rope_kv_cache_quant.comp (the write) and rope_shift.comp (the
// context shift's re-rotation) share. Macros, since GLSL passes neither buffers nor shared
// arrays: a row's halfword size, a pass of the Walsh-Hadamard transform of a shared row, the store
// of an invocation's pair (quantized as ggml's reference quantizer) and the load of one.
#ifndef VKF_KV_CACHE_ROW_GLSL
#define VKF_KV_CACHE_ROW_GLSL

#include "hadamard.glsl"

// Pass H of the fast Walsh-Hadamard transform (hadamard.glsl) of a shared row at OFF, blocks of N
// (H[i][j] = (-1)^popcount(i & j) / sqrt(N)): butterfly K (of the row's D / 2), in place; the last
// pass (2H = N) scales by 1 / sqrt(N). A pass's butterflies touch disjoint pairs: the caller
// puts a barrier between passes. A macro: GLSL passes no shared arrays.
#define HADAMARD_ROW_PASS(ROW, OFF, K, H, N)                        \
  {                                                                 \
    const uint i_ = (OFF) + hadamard_butterfly(K, H);               \
    const float s_ = 2u * (H) == (N) ? 1.0 / sqrt(float(N)) : 1.0;  \
    const float a_ = ROW[i_], c_ = ROW[i_ + (H)];                   \
    ROW[i_] = (a_ + c_) * s_;                                       \
    ROW[i_ + (H)] = (a_ - c_) * s_;                                 \
  }

// Halfwords of a row of D elements of a cache of type `type`.
uint row_halfwords(uint type, uint d) {
  if (type == KV_F32) return 2u * d;
  if (type == KV_F16) return d;
  return d / 32u * (type == KV_Q8_0 ? KV_Q8_0_HALFWORDS : KV_Q4_0_HALFWORDS);
}

float round_half_away(float v) { return sign(v) * floor(abs(v) + 0.5); }

// Invocation x's halfwords of a row (elements in `row`, shared) into a cache row starting at
// halfword h of `type`. A macro: GLSL passes neither buffers nor shared arrays.
#define STORE_ROW(CACHE, ROW, TYPE, H, X)                                                       \
  {                                                                                             \
    const uint e = 2u * (X);                                                                    \
    if (TYPE == KV_F32) {                                                                       \
      const uint a = floatBitsToUint(ROW[e]), c = floatBitsToUint(ROW[e + 1u]);                 \
      CACHE[H + 2u * e] = uint16_t(a & 0xffffu);                                                \
      CACHE[H + 2u * e + 1u] = uint16_t(a >> 16);                                               \
      CACHE[H + 2u * e + 2u] = uint16_t(c & 0xffffu);                                           \
      CACHE[H + 2u * e + 3u] = uint16_t(c >> 16);                                               \
    } else if (TYPE == KV_F16) {                                                                \
      const uint w = packHalf2x16(vec2(ROW[e], ROW[e + 1u]));                                   \
      CACHE[H + e] = uint16_t(w & 0xffffu);                                                     \
      CACHE[H + e + 1u] = uint16_t(w >> 16);                                                    \
    } else {                                                                                    \
      const uint blk = e / 32u, lx = (X) % 16u, first = blk * 32u;                              \
      const bool q8 = TYPE == KV_Q8_0;                                                          \
      const uint hb = H + blk * (q8 ? KV_Q8_0_HALFWORDS : KV_Q4_0_HALFWORDS);                   \
      float amax = 0.0, vmax = 0.0;                                                             \
      for (uint i = 0; i < 32u; ++i) {                                                          \
        const float xv = ROW[first + i];                                                        \
        if (abs(xv) > amax) {                                                                   \
          amax = abs(xv);                                                                       \
          vmax = xv;                                                                            \
        }                                                                                       \
      }                                                                                         \
      const float d = q8 ? amax / 127.0 : vmax / -8.0;                                          \
      const float id = d != 0.0 ? 1.0 / d : 0.0;                                                \
      if (lx == 0u) CACHE[hb] = uint16_t(packHalf2x16(vec2(d, 0.0)) & 0xffffu);                 \
      if (q8) {                                                                                 \
        const int q0 = int(round_half_away(ROW[e] * id));                                      \
        const int q1 = int(round_half_away(ROW[e + 1u] * id));                                  \
        CACHE[hb + 1u + lx] = uint16_t((uint(q0) & 0xffu) | ((uint(q1) & 0xffu) << 8));         \
      } else if (lx < 8u) {                                                                     \
        const uint j = first + 2u * lx;                                                         \
        const uint n0 = min(15u, uint(int(ROW[j] * id + 8.5)));                                 \
        const uint n1 = min(15u, uint(int(ROW[j + 1u] * id + 8.5)));                            \
        const uint n16 = min(15u, uint(int(ROW[j + 16u] * id + 8.5)));                          \
        const uint n17 = min(15u, uint(int(ROW[j + 17u] * id + 8.5)));                          \
        CACHE[hb + 1u + lx] = uint16_t(n0 | (n16 << 4) | (n1 << 8) | (n17 << 12));              \
      }                                                                                         \
    }                                                                                           \
  }

// Elements E and E + 1 (E even) of the cache row starting at halfword H of type TYPE, dequantized
// exactly as ggml does (d * q, d * (q - 8)), into OUT (vec2).
#define LOAD_PAIR(CACHE, TYPE, H, E, OUT)                                                        \
  {                                                                                              \
    if (TYPE == KV_F32) {                                                                        \
      OUT = vec2(uintBitsToFloat(uint(CACHE[H + 2u * (E)]) | (uint(CACHE[H + 2u * (E) + 1u]) << 16)), \
                 uintBitsToFloat(uint(CACHE[H + 2u * (E) + 2u]) | (uint(CACHE[H + 2u * (E) + 3u]) << 16))); \
    } else if (TYPE == KV_F16) {                                                                 \
      OUT = unpackHalf2x16(uint(CACHE[H + (E)]) | (uint(CACHE[H + (E) + 1u]) << 16));            \
    } else {                                                                                     \
      const bool q8_ = TYPE == KV_Q8_0;                                                          \
      const uint w_ = (E) % 32u, hb_ = H + (E) / 32u * (q8_ ? KV_Q8_0_HALFWORDS : KV_Q4_0_HALFWORDS); \
      const float d_ = unpackHalf2x16(uint(CACHE[hb_])).x;                                       \
      if (q8_) {                                                                                 \
        const uint h_ = uint(CACHE[hb_ + 1u + w_ / 2u]);                                         \
        OUT = d_ * vec2(float(int(h_ << 24) >> 24), float(int(h_ << 16) >> 24));                 \
      } else {  /* byte j: element j (low nibble), j + 16 (high) */                              \
        const uint h_ = uint(CACHE[hb_ + 1u + (w_ % 16u) / 2u]), sh_ = w_ < 16u ? 0u : 4u;       \
        OUT = d_ * (vec2(float((h_ >> sh_) & 15u), float((h_ >> (8u + sh_)) & 15u)) - 8.0);      \
      }                                                                                          \
    }                                                                                            \
  }

#endif
