#pragma once
// The compiled kernels: the generated enum of kernel families (kernels.gen.hpp) and a table of
// their SPIR-V variants per dtype (kernels.gen.cpp), both produced from shaders/kernels.cmake.
#include <cstddef>
#include <cstdint>

#include "kernels.gen.hpp"
#include "vkformer/dtype.hpp"

namespace vkformer::kernels {

// Device features a variant needs (bits of VariantEntry::features).
namespace Feature {
constexpr uint32_t storage_16bit = 1u << 0;   // storageBuffer16BitAccess
constexpr uint32_t fp16_arith = 1u << 1;      // shaderFloat16
constexpr uint32_t subgroup_arith = 1u << 2;  // subgroup arithmetic in compute
constexpr uint32_t coopmat_nv = 1u << 3;      // VK_NV_cooperative_matrix
constexpr uint32_t coopmat_khr = 1u << 4;     // VK_KHR_cooperative_matrix
constexpr uint32_t subgroup_shuffle = 1u << 5;  // subgroup shuffles in compute
constexpr uint32_t integer_dot = 1u << 6;  // VK_KHR_shader_integer_dot_product (shaderIntegerDotProduct)
}  // namespace Feature

struct VariantEntry {
  Kernel kernel;
  DType dtype;
  const char* name;        // "matmul_f32"
  const uint32_t* spirv;   // nullptr when the shader compiler could not build it
  size_t words;
  uint32_t features;       // Feature bits it needs
  const char* missing;     // why spirv is nullptr
};

extern const VariantEntry kVariantTable[];
extern const size_t kVariantCount;
extern const char* const kFamilyNames[];

inline const char* family_name(Kernel k) { return kFamilyNames[static_cast<size_t>(k)]; }

// The variant of `k` for `dtype`, or nullptr if the manifest declares none.
const VariantEntry* find_variant(Kernel k, DType dtype);

}  // namespace vkformer::kernels
