#pragma once
// Checks of which kernel variants a device can run, for tests that include the library's internal
// headers (src/vk is on their include path).
#include <gtest/gtest.h>

#include <cstdlib>
#include <initializer_list>
#include <string>

#include "device_impl.hpp"
#include "kernel_table.hpp"
#include "vkformer/vkformer.hpp"

namespace vkformer::testing {

// Every family in `families` has its f32 and f16 variants built into the library, and each is
// runnable on `device` exactly when `device_has_feature` (f16 only where the device has 16-bit
// storage).
inline void expect_runnable_exactly_where(Device& device, std::initializer_list<kernels::Kernel> families,
                                          bool device_has_feature) {
  auto& pipelines = device.impl().pipelines();
  for (kernels::Kernel k : families) {
    for (DType dtype : {DType::f32, DType::f16}) {
      const auto* v = kernels::find_variant(k, dtype);
      ASSERT_NE(v, nullptr) << kernels::family_name(k);
      ASSERT_NE(v->spirv, nullptr) << v->name << ": " << v->missing;
      if (dtype == DType::f16 && !device.info().storage_16bit) continue;
      EXPECT_EQ(pipelines.supported(*v), device_has_feature) << v->name;
    }
  }
}

// The row kernels (softmax, layer_norm, rms_norm) reduce with subgroup shuffles here: the device
// has them and VKFORMER_NO_SUBGROUP_OPS=1 does not turn them off.
inline bool rows_reduce_with_shuffles(Device& device) {
  const char* env = std::getenv("VKFORMER_NO_SUBGROUP_OPS");
  return device.info().subgroup_shuffle && !(env && std::string(env) == "1");
}

}  // namespace vkformer::testing
