#include "vkformer/dtype.hpp"

#include <string>

#include "vkformer/error.hpp"

namespace vkformer {

DType parse_dtype(std::string_view name) {
  if (name == "f32" || name == "float32") return DType::f32;
  if (name == "f16" || name == "float16") return DType::f16;
  if (name == "i32" || name == "int32") return DType::i32;
  throw Error(ErrorCode::invalid_argument,
              "unknown dtype '" + std::string(name) + "' (expected f32, f16 or i32)");
}

}  // namespace vkformer
