// KV cache element types (src/ops/kv_cache_types.hpp: kv_type_code), for the kernels compiled
// with KV_QUANT that write or read caches in another type than their activations T: llama.cpp's
// --cache-type-k/v names and ggml's block layouts.
//   f32  (0): 4 bytes an element
//   f16  (1): 2 bytes an element
//   q8_0 (2): blocks of 32 elements, 34 bytes: d (f16), 32 x int8 q;          value d * q
//   q4_0 (3): blocks of 32 elements, 18 bytes: d (f16), 16 bytes of nibbles;  value d * (q - 8),
//             byte j holding element j (low nibble) and j + 16 (high nibble)
// A cache row holds head_dim elements (a multiple of 32 for the block types), so element e of a
// binding that starts at a row is element e % 32 of block e / 32. Blocks are 2-byte aligned only:
// addresses below are in halfwords.
#ifndef VKF_KV_CACHE_TYPES_GLSL
#define VKF_KV_CACHE_TYPES_GLSL

const uint KV_F32 = 0u;
const uint KV_F16 = 1u;
const uint KV_Q8_0 = 2u;
const uint KV_Q4_0 = 3u;

const uint KV_Q8_0_HALFWORDS = 17u;  // 34 bytes
const uint KV_Q4_0_HALFWORDS = 9u;   // 18 bytes

// The four signed bytes of a word, low byte first.
vec4 kv_signed_bytes(uint w) {
  return vec4(ivec4(int(w << 24), int(w << 16), int(w << 8), int(w)) >> 24);
}

// The four bytes of a word, low byte first.
uvec4 kv_bytes(uint w) { return uvec4(w, w >> 8, w >> 16, w >> 24) & 0xffu; }

#endif
