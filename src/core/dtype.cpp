#include "vkformer/dtype.hpp"

#include <string>

#include "vkformer/error.hpp"

namespace vkformer {

const char* weight_type_names() {
  static const std::string names = [] {
    std::string s = "f32, f16, bf16";
    const char* const quantized[] = {
#define VKFORMER_QUANT_TYPE(name, ggml_name, block_elements, block_bytes) #name,
#include "vkformer/quant_types.def"
#undef VKFORMER_QUANT_TYPE
    };
    const size_t n = sizeof(quantized) / sizeof(quantized[0]);
    for (size_t i = 0; i < n; ++i) s += std::string(i + 1 == n ? " or " : ", ") + quantized[i];
    return s;
  }();
  return names.c_str();
}

DType parse_dtype(std::string_view name) {
  if (name == "float32") return DType::f32;
  if (name == "float16") return DType::f16;
  if (name == "int32") return DType::i32;
  if (name == "bfloat16") return DType::bf16;
  for (DType t : kAllDTypes)
    if (name == dtype_name(t)) return t;
  throw Error(ErrorCode::invalid_argument, "unknown dtype '" + std::string(name) +
                                               "' (expected i32 or one of " + weight_type_names() + ")");
}

}  // namespace vkformer
