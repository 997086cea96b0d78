#include "spirv_reflect.hpp"

#include <algorithm>
#include <map>

namespace vkformer::vk {

SpirvLayout reflect_spirv(const uint32_t* words, size_t count) {
  constexpr uint32_t kMagic = 0x07230203;
  constexpr uint32_t kOpTypeInt = 21;
  constexpr uint32_t kOpTypeImage = 25;
  constexpr uint32_t kOpTypeSampledImage = 27;
  constexpr uint32_t kOpTypePointer = 32;
  constexpr uint32_t kOpVariable = 59;
  constexpr uint32_t kOpDecorate = 71;
  constexpr uint32_t kDecorationBinding = 33;
  constexpr uint32_t kDimBuffer = 5;
  SpirvLayout layout;
  if (count < 5 || words[0] != kMagic) return layout;
  layout.valid = true;
  // Binding per variable id; a variable whose pointee is a sampled image of Dim Buffer (a GLSL
  // samplerBuffer) is a uniform texel buffer, everything else here is a storage buffer.
  std::map<uint32_t, uint32_t> binding_of;      // variable id -> binding
  std::map<uint32_t, uint32_t> pointee_of;      // pointer type id -> pointee type id
  std::map<uint32_t, uint32_t> variable_type;   // variable id -> pointer type id
  std::map<uint32_t, uint32_t> sampled_image;   // sampled image type id -> image type id
  std::map<uint32_t, bool> buffer_image;        // image type id -> Dim is Buffer
  std::map<uint32_t, bool> uint_image;          // image type id -> sampled type is an integer
  std::map<uint32_t, bool> int_type;            // OpTypeInt ids
  for (size_t i = 5; i < count;) {
    uint32_t op = words[i] & 0xffff, len = words[i] >> 16;
    if (len == 0 || i + len > count) break;
    const uint32_t* w = words + i;
    if (op == kOpDecorate && len >= 4 && w[2] == kDecorationBinding) {
      binding_of[w[1]] = w[3];
      layout.binding_count = std::max(layout.binding_count, w[3] + 1);
    } else if (op == kOpTypePointer && len >= 4) {
      pointee_of[w[1]] = w[3];
    } else if (op == kOpVariable && len >= 4) {
      variable_type[w[2]] = w[1];
    } else if (op == kOpTypeSampledImage && len >= 3) {
      sampled_image[w[1]] = w[2];
    } else if (op == kOpTypeInt && len >= 2) {
      int_type[w[1]] = true;
    } else if (op == kOpTypeImage && len >= 4) {
      buffer_image[w[1]] = w[3] == kDimBuffer;
      uint_image[w[1]] = int_type.count(w[2]) > 0;
    }
    i += len;
  }
  layout.kinds.assign(layout.binding_count, BindingKind::storage_buffer);
  for (auto [var, binding] : binding_of) {
    auto t = variable_type.find(var);
    if (t == variable_type.end()) continue;
    auto pointee = pointee_of.find(t->second);
    if (pointee == pointee_of.end()) continue;
    auto image = sampled_image.find(pointee->second);
    if (image != sampled_image.end() && buffer_image[image->second])
      layout.kinds[binding] = uint_image[image->second] ? BindingKind::uniform_texel_buffer_uint
                                                        : BindingKind::uniform_texel_buffer;
  }
  return layout;
}

}  // namespace vkformer::vk
