#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "vkformer/device.hpp"

namespace vkformer::vk {

// A known driver problem vkformer works around, with the reason and where it is tracked.
// Op code asks Tuning, never the vendor id.
struct Quirk {
  const char* id;
  const char* reason;
  const char* link;
};

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

// Per-device choices for kernels: derived from the device's limits and type, plus quirks.
struct Tuning {
  bool cpu_device = false;          // lavapipe/SwiftShader: a workgroup runs on one CPU thread
  uint32_t reduction_workgroup = 256;  // softmax / layer norm workgroup size
  bool use_subgroup_reductions = false;
  MatmulTiles matmul;               // matmul / linear (and attention's unfused path)
  std::vector<Quirk> quirks;        // active quirks (for `vkformer devices` and bug reports)
};

Tuning tuning_for(const DeviceInfo& info);

}  // namespace vkformer::vk
