// Reading a KV cache of any type of kv_cache_types.glsl, bound as 32-bit words (no 8- or 16-bit
// storage feature needed). Included once per cache, with three macros naming it (no include
// guard):
//   KV_READ_FN    the function to define: vec4 KV_READ_FN(uint e), elements e .. e + 3 of the
//                 binding (e a multiple of 4), dequantized exactly as ggml does (d * q, d * (q - 8))
//   KV_READ_BUF   the binding's uint array
//   KV_READ_TYPE  the cache's type code (a specialization constant: the other types' code is
//                 removed when the pipeline is specialized)
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

#undef KV_READ_FN
#undef KV_READ_BUF
#undef KV_READ_TYPE
