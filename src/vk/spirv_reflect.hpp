#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace vkformer::vk {

// How a kernel reads or writes one binding of set 0.
enum class BindingKind : uint8_t {
  storage_buffer,        // a buffer block: T x[] (VK_DESCRIPTOR_TYPE_STORAGE_BUFFER)
  uniform_texel_buffer,  // a samplerBuffer read with texelFetch: 4-component texels of the
                         // bound value's dtype (VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER)
  uniform_texel_buffer_uint,  // a usamplerBuffer: the bound bytes as R32_UINT words (raw ggml
                              // blocks), also VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER
};

inline bool is_texel_buffer(BindingKind k) {
  return k == BindingKind::uniform_texel_buffer || k == BindingKind::uniform_texel_buffer_uint;
}

// What the executor needs to know of a SPIR-V module without a reflection library.
struct SpirvLayout {
  uint32_t binding_count = 0;  // highest Binding decoration in set 0, plus one
  std::vector<BindingKind> kinds;  // per binding (storage_buffer where nothing says otherwise)
  bool valid = false;          // the module starts with the SPIR-V magic number
};

SpirvLayout reflect_spirv(const uint32_t* words, size_t count);

}  // namespace vkformer::vk
