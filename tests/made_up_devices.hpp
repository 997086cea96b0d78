#pragma once
// Made-up devices for tests of pure functions (which API, which shape, which table entry): the
// limits of a discrete GPU with an H100's workgroup and memory limits, and of a CPU device like
// lavapipe; each test adds the cooperative-matrix lists it is about.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "vkformer/device.hpp"

namespace vkformer::testing {

inline DeviceInfo made_up_discrete_gpu(std::string name, uint32_t compute_units) {
  DeviceInfo d;
  d.name = std::move(name);
  d.type = "discrete";
  d.subgroup_size = d.min_subgroup_size = d.max_subgroup_size = 32;
  d.subgroup_arithmetic = d.subgroup_shuffle = true;
  d.fp16_arithmetic = d.storage_16bit = true;
  d.shared_memory_bytes = 48 * 1024;
  d.max_storage_buffer_range = 1u << 31;
  d.max_texel_buffer_elements = 1u << 27;
  d.max_workgroup_count = {1u << 31, 65535, 65535};
  d.max_workgroup_size = {1024, 1024, 64};
  d.max_workgroup_invocations = 1024;
  d.compute_units = compute_units;
  return d;
}

// The same with VK_NV_cooperative_matrix and these shapes (M, N, K and the component types).
inline DeviceInfo made_up_nv_gpu(std::vector<CooperativeMatrixShape> shapes) {
  DeviceInfo d = made_up_discrete_gpu("made-up discrete GPU", 108);
  d.cooperative_matrix_nv = true;
  d.cooperative_matrix_nv_shapes = std::move(shapes);
  return d;
}

// One fixed subgroup of 8 lanes with shuffles and 32 KiB of shared memory, no cooperative
// matrices, compute units unknown.
inline DeviceInfo made_up_cpu() {
  DeviceInfo d = made_up_discrete_gpu("made-up CPU", 0);
  d.type = "cpu";
  d.subgroup_size = d.min_subgroup_size = d.max_subgroup_size = 8;
  d.shared_memory_bytes = 32 * 1024;
  return d;
}

}  // namespace vkformer::testing
