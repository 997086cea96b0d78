#include "kernel_table.hpp"

#include "vkformer/device.hpp"

namespace vkformer {

std::vector<KernelNotBuilt> kernels_not_built() {
  std::vector<KernelNotBuilt> out;
  for (size_t i = 0; i < kernels::kVariantCount; ++i)
    if (!kernels::kVariantTable[i].spirv)
      out.push_back({kernels::kVariantTable[i].name, kernels::kVariantTable[i].missing});
  return out;
}

}  // namespace vkformer

namespace vkformer::kernels {

const VariantEntry* find_variant(Kernel k, DType dtype) {
  for (size_t i = 0; i < kVariantCount; ++i)
    if (kVariantTable[i].kernel == k && kVariantTable[i].dtype == dtype) return &kVariantTable[i];
  return nullptr;
}

}  // namespace vkformer::kernels
