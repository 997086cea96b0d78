// Reading a KV cache of any type of kv_cache_types.glsl, bound as 32-bit words (no 8- or 16-bit
// storage feature needed). Included once per cache, with three macros naming it (no include
// guard):
//   KV_READ_FN    the function to define: vec4 KV_READ_FN(uint e), elements e .. e + 3 of the
//                 binding (e a multiple of 4), dequantized exactly as ggml does (d * q, d * (q - 8))
//   KV_READ_BUF   the binding's uint array
//   KV_READ_TYPE  the cache's type code (a specialization constant: the other types' code is
//                 removed when the pipeline is specialized)
// and optionally KV_READ_BLOCK_FN, a function reading a whole 32-element block (below).
// Every word read lies in the 4 elements' block, so nothing is read past the binding.

vec4 KV_READ_FN(uint e) {
  if (KV_READ_TYPE == KV_F32)
    return uintBitsToFloat(uvec4(KV_READ_BUF[e], KV_READ_BUF[e + 1u], KV_READ_BUF[e + 2u],
                                 KV_READ_BUF[e + 3u]));
  if (KV_READ_TYPE == KV_F16)
    return vec4(unpackHalf2x16(KV_READ_BUF[e >> 1]), unpackHalf2x16(KV_READ_BUF[(e >> 1) + 1u]));
  const uint block = e >> 5, within = e & 31u;
  const bool q8 = KV_READ_TYPE == KV_Q8_0;
  const uint h0 = block * (q8 ? KV_Q8_0_HALFWORDS : KV_Q4_0_HALFWORDS);
  const float d = unpackHalf2x16(KV_READ_BUF[h0 >> 1] >> ((h0 & 1u) << 4)).x;
  // The 4 bytes at halfword h (any parity): q8_0's elements within .. within + 3, or q4_0's
  // bytes holding them (low nibbles for the first 16 elements, high ones for the rest).
  const uint h = h0 + 1u + (q8 ? within : within & 15u) / 2u;
  const uint lo = KV_READ_BUF[h >> 1], hi = KV_READ_BUF[(h + 1u) >> 1];
  const uint w = (h & 1u) != 0u ? (lo >> 16) | (hi << 16) : lo;
  if (q8) return d * kv_signed_bytes(w);
  return d * (vec4((kv_bytes(w) >> (within < 16u ? 0u : 4u)) & 0xfu) - 8.0);
}

#ifdef KV_READ_BLOCK_FN
// void KV_READ_BLOCK_FN(uint e, out vec4 r[8]): elements e .. e + 31 (e a multiple of 32: one
// block), the same values as 8 calls of KV_READ_FN. A quantized block is read in one pass: the
// words from the one holding its scale through its last byte, 9 for q8_0 (34 bytes) and 5 for
// q4_0 (18), against 3 per 4 elements (24 a block) through KV_READ_FN. Where a buffer load is a
// loop over the lanes with a bounds check per word (lavapipe), the words loaded are the cost
// (bench/RESULTS.md, "the prompt's quantized K/V loads"). A block starting at an odd halfword
// has its scale in the high half of the first word and its bytes word-aligned after it; one at
// an even halfword its scale in the low half, and each 4 bytes straddle two words.
void KV_READ_BLOCK_FN(uint e, out vec4 r[8]) {
  if (KV_READ_TYPE == KV_F32 || KV_READ_TYPE == KV_F16) {
    [[unroll]] for (uint c = 0; c < 8u; ++c) r[c] = KV_READ_FN(e + 4u * c);
    return;
  }
  const bool q8 = KV_READ_TYPE == KV_Q8_0;
  const uint h0 = (e >> 5) * (q8 ? KV_Q8_0_HALFWORDS : KV_Q4_0_HALFWORDS), w0 = h0 >> 1;
  const bool odd = (h0 & 1u) != 0u;
  const uint first = KV_READ_BUF[w0];
  const float d = unpackHalf2x16(odd ? first >> 16 : first).x;
  // The block's data words (4 bytes each): 8 for q8_0, 4 for q4_0.
  uint w[8];
  uint prev = first;
  [[unroll]] for (uint i = 0; i < (q8 ? 8u : 4u); ++i) {
    const uint next = KV_READ_BUF[w0 + 1u + i];
    w[i] = odd ? next : (prev >> 16) | (next << 16);
    prev = next;
  }
  if (q8) {
    [[unroll]] for (uint c = 0; c < 8u; ++c) r[c] = d * kv_signed_bytes(w[c]);
  } else {
    [[unroll]] for (uint c = 0; c < 4u; ++c) {
      const uvec4 b = kv_bytes(w[c]);
      r[c] = d * (vec4(b & 0xfu) - 8.0);
      r[c + 4u] = d * (vec4(b >> 4) - 8.0);
    }
  }
}
#undef KV_READ_BLOCK_FN
#endif

#undef KV_READ_FN
#undef KV_READ_BUF
#undef KV_READ_TYPE
