#pragma once
#include <cstddef>
#include <cstdint>

namespace vkformer::vk {

// What the executor needs to know of a SPIR-V module without a reflection library.
struct SpirvLayout {
  uint32_t binding_count = 0;  // highest Binding decoration in set 0, plus one
  bool valid = false;          // the module starts with the SPIR-V magic number
};

SpirvLayout reflect_spirv(const uint32_t* words, size_t count);

}  // namespace vkformer::vk
