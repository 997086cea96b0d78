#include "vkformer/dtype.hpp"

#include <string>

#include "vkformer/error.hpp"

namespace vkformer {

DType parse_dtype(std::string_view name) {
  const std::string_view lower = name;
  if (lower == "f32" || lower == "float32") return DType::f32;
  if (lower == "f16" || lower == "float16") return DType::f16;
  if (lower == "i32" || lower == "int32") return DType::i32;
  if (lower == "bf16" || lower == "bfloat16") return DType::bf16;
  if (lower == "q8_0") return DType::q8_0;
  if (lower == "q4_0") return DType::q4_0;
  if (lower == "q4_1") return DType::q4_1;
  if (lower == "q5_0") return DType::q5_0;
  if (lower == "q4_k") return DType::q4_k;
  if (lower == "q6_k") return DType::q6_k;
  throw Error(ErrorCode::invalid_argument,
              "unknown dtype '" + std::string(name) +
                  "' (expected f32, f16, i32, bf16, q8_0, q4_0, q4_1, q5_0, q4_k or q6_k)");
}

}  // namespace vkformer
