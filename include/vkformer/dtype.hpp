#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace vkformer {

// Element types of tensors. f16 is a storage type: kernels load it, compute in fp32, store it.
enum class DType : uint8_t { f32, f16, i32 };

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f16: return 2;
    case DType::i32: return 4;
  }
  return 0;
}

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::i32: return "i32";
  }
  return "?";
}

constexpr bool is_float(DType t) { return t == DType::f32 || t == DType::f16; }

// Parses "f32" / "float32", "f16" / "float16", "i32" / "int32"; throws vkformer::Error otherwise.
DType parse_dtype(std::string_view name);

}  // namespace vkformer
