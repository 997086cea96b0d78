#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace vkformer {

// Element types of tensors. f16 and bf16 are storage types: kernels load them, compute in fp32,
// store f16. The q types are ggml's block-quantized weight types, listed once in
// vkformer/quant_types.def: each row (the last dim) is a run of blocks, stored exactly as in a
// GGUF file. 32-element blocks:
//   q8_0: f16 d, 32 × int8 q                     value d·q               (34 bytes)
//   q4_0: f16 d, 16 bytes of nibbles             value d·(q − 8)         (18 bytes)
//   q4_1: f16 d, f16 m, 16 bytes of nibbles      value d·q + m           (20 bytes)
//   q5_0: f16 d, 32 high bits, 16 bytes of nibbles  value d·(q − 16)     (22 bytes)
// with the low nibbles holding elements 0..15 of a block and the high nibbles 16..31; and the
// "k-quants", 256-element super-blocks of 32- or 16-element sub-blocks with 6- or 8-bit scales:
//   q4_k: f16 d, f16 dmin, 12 bytes of 6-bit scales and mins, 128 bytes of nibbles  (144 bytes)
//         value d·sc·q − dmin·m per 32 elements
//   q6_k: 128 bytes of low nibbles, 64 of high 2 bits, 16 int8 scales, f16 d       (210 bytes)
//         value d·sc·(q − 32) per 16 elements
// (shaders/weights.glsl details every layout). bf16 is the upper half of an f32. Quantized
// tensors are weights: matmul/linear (as B, [N, K] transposed) and embedding (as the table) read
// them; any other op refuses them by name.
enum class DType : uint8_t {
  f32,
  f16,
  i32,
  bf16,
#define VKFORMER_QUANT_TYPE(name, ggml_name, block_elements, block_bytes) name,
#include "vkformer/quant_types.def"
#undef VKFORMER_QUANT_TYPE
};

// Every dtype, in enumerator order.
inline constexpr DType kAllDTypes[] = {
    DType::f32, DType::f16, DType::i32, DType::bf16,
#define VKFORMER_QUANT_TYPE(name, ggml_name, block_elements, block_bytes) DType::name,
#include "vkformer/quant_types.def"
#undef VKFORMER_QUANT_TYPE
};
inline constexpr size_t kDTypeCount = sizeof(kAllDTypes) / sizeof(kAllDTypes[0]);

constexpr bool is_quantized(DType t) {
  return false
#define VKFORMER_QUANT_TYPE(name, ggml_name, block_elements, block_bytes) || t == DType::name
#include "vkformer/quant_types.def"
#undef VKFORMER_QUANT_TYPE
      ;
}

// Elements per block: 256 for the k-quants, 32 for the other quantized types, 1 otherwise.
constexpr int64_t dtype_block_elements(DType t) {
  switch (t) {
#define VKFORMER_QUANT_TYPE(name, ggml_name, block_elements, block_bytes) \
  case DType::name: return block_elements;
#include "vkformer/quant_types.def"
#undef VKFORMER_QUANT_TYPE
    case DType::f32:
    case DType::f16:
    case DType::i32:
    case DType::bf16: return 1;
  }
  return 1;
}

// ggml's 256-element super-block types.
constexpr bool is_k_quant(DType t) { return dtype_block_elements(t) == 256; }

// Bytes per block (per element for the plain types).
constexpr size_t dtype_block_bytes(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f16: return 2;
    case DType::i32: return 4;
    case DType::bf16: return 2;
#define VKFORMER_QUANT_TYPE(name, ggml_name, block_elements, block_bytes) \
  case DType::name: return block_bytes;
#include "vkformer/quant_types.def"
#undef VKFORMER_QUANT_TYPE
  }
  return 0;
}

// Bytes of one element, for the plain (not block-quantized) types; 0 for the quantized ones,
// whose sizes go through dtype_bytes.
constexpr size_t dtype_size(DType t) { return is_quantized(t) ? 0 : dtype_block_bytes(t); }

// Bytes of `numel` elements laid out in whole blocks (rows of a quantized tensor are a multiple
// of 32 elements, so a tensor's bytes are dtype_bytes(dtype, numel)). A partial block counts
// whole.
constexpr uint64_t dtype_bytes(DType t, int64_t numel) {
  const auto n = static_cast<uint64_t>(numel < 0 ? 0 : numel);
  const auto b = static_cast<uint64_t>(dtype_block_elements(t));
  return (n + b - 1) / b * dtype_block_bytes(t);
}

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::i32: return "i32";
    case DType::bf16: return "bf16";
#define VKFORMER_QUANT_TYPE(name, ggml_name, block_elements, block_bytes) \
  case DType::name: return #name;
#include "vkformer/quant_types.def"
#undef VKFORMER_QUANT_TYPE
  }
  return "?";
}

// f32 and f16: the types activations (and op outputs) have.
constexpr bool is_float(DType t) { return t == DType::f32 || t == DType::f16; }

// Types a weight of matmul/linear or an embedding table may have (read and widened to fp32).
constexpr bool is_weight_type(DType t) { return is_float(t) || t == DType::bf16 || is_quantized(t); }

// "f32, f16, bf16, q8_0, ... or q6_k": the weight types, for error messages.
const char* weight_type_names();

// Parses "f32" / "float32", "f16" / "float16", "i32" / "int32", "bf16" / "bfloat16" and the
// quantized types' names ("q8_0", ...); throws vkformer::Error otherwise.
DType parse_dtype(std::string_view name);

}  // namespace vkformer
