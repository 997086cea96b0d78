#pragma once
// The types a KV cache may hold (llama.cpp's --cache-type-k/v: f32, f16, q8_0, q4_0) and their
// codes in the kernels that write or read caches in another type than their activations
// (shaders/kv_cache_types.glsl, compiled with KV_QUANT).
#include <cstdint>
#include <string>

#include "vkformer/dtype.hpp"

namespace vkformer::ops {

constexpr bool is_kv_cache_type(DType t) {
  return t == DType::f32 || t == DType::f16 || t == DType::q8_0 || t == DType::q4_0;
}

// The code of shaders/kv_cache_types.glsl (KV_F32 .. KV_Q4_0).
constexpr uint32_t kv_type_code(DType t) {
  return t == DType::f32 ? 0u : t == DType::f16 ? 1u : t == DType::q8_0 ? 2u : 3u;
}

// Whether attention with activations `act` reads k and v of these types through the KV_QUANT
// kernels (any cache not in the activations' own type).
constexpr bool kv_converted(DType act, DType k, DType v) { return k != act || v != act; }

}  // namespace vkformer::ops
