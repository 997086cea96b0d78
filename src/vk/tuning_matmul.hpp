#pragma once
// How matmul (shaders/matmul.comp) is tiled on a device.
#include <cstdint>

#include "vkformer/device.hpp"

namespace vkformer::vk {

// The matmul kernel's tiling (shaders/matmul.comp): each workgroup computes a bm x bn tile of
// the output with (bm / tm) * (bn / tn) invocations, each owning a tm x tn block of it.
struct MatmulTiles {
  uint32_t bm = 64, bn = 64;  // output tile per workgroup (rows, columns)
  uint32_t bk = 16;           // depth of the K slice staged in shared memory per barrier pair
  uint32_t tm = 4, tn = 4;    // outputs per invocation (rows, columns), kept in registers
  bool shared_memory = true;  // false: no shared memory or barriers, each invocation reads A and
                              // B from the buffers directly (CPU devices)
  uint32_t invocations() const { return (bm / tm) * (bn / tn); }
  // Staged slices: bk rows of bm + 1 and bn + 1 floats (padded, see shaders/matmul.comp); the
  // direct path (bk = 1) still declares one row of each.
  uint32_t shared_bytes() const { return (shared_memory ? bk : 1) * (bm + bn + 2) * 4; }
};

// The tiling for a device: its own configuration for CPU devices, the GPU default shrunk to fit
// the device's limits otherwise; VKFORMER_MATMUL_TILES overrides both (tuning experiments, tests).
MatmulTiles matmul_tiles_for(const DeviceInfo& info, bool cpu_device);

}  // namespace vkformer::vk
