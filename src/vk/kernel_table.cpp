#include "kernel_table.hpp"

namespace vkformer::kernels {

const VariantEntry* find_variant(Kernel k, DType dtype) {
  for (size_t i = 0; i < kVariantCount; ++i)
    if (kVariantTable[i].kernel == k && kVariantTable[i].dtype == dtype) return &kVariantTable[i];
  return nullptr;
}

}  // namespace vkformer::kernels
