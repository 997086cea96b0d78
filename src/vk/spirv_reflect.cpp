#include "spirv_reflect.hpp"

#include <algorithm>

namespace vkformer::vk {

SpirvLayout reflect_spirv(const uint32_t* words, size_t count) {
  constexpr uint32_t kMagic = 0x07230203;
  constexpr uint32_t kOpDecorate = 71;
  constexpr uint32_t kDecorationBinding = 33;
  SpirvLayout layout;
  if (count < 5 || words[0] != kMagic) return layout;
  layout.valid = true;
  for (size_t i = 5; i < count;) {
    uint32_t op = words[i] & 0xffff, len = words[i] >> 16;
    if (len == 0) break;
    if (op == kOpDecorate && len >= 4 && words[i + 2] == kDecorationBinding)
      layout.binding_count = std::max(layout.binding_count, words[i + 3] + 1);
    i += len;
  }
  return layout;
}

}  // namespace vkformer::vk
