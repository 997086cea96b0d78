#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tuning_attention.hpp"
#include "quirks.hpp"
#include "tuning_matmul.hpp"
#include "vkformer/device.hpp"

namespace vkformer::kernels {

// Per-device choices for kernels: derived from the device's limits and type, and from its quirks
// (src/vk/quirks.hpp: which a device has; here, what the kernels do about them). Op code asks
// Tuning, never the vendor id.
struct Tuning {
  bool cpu_device = false;          // lavapipe/SwiftShader: a workgroup runs on one CPU thread
  uint32_t reduction_workgroup = 256;  // softmax / layer norm workgroup size
  // Subgroup arithmetic in reductions where the device has it; VKFORMER_NO_SUBGROUP_OPS=1 turns
  // it off so the shared-memory form can be tested on any device.
  bool use_subgroup_reductions = false;
  MatmulTuning matmul;              // matmul / linear (and attention's unfused path)
  AttentionTiles attention;         // fused attention: which kernel, its tiling, automatic path
  std::vector<vk::Quirk> quirks;    // active quirks (for `vkformer devices` and bug reports)
  // The most bytes one binding may span: maxStorageBufferRange, or less with
  // VKFORMER_MAX_BINDING_BYTES (tests run the window splitting of large tensors on small ones).
  uint64_t max_binding_bytes = 0;
};

// The static table for the device, with the environment overrides and, unless `tuned` is false,
// the choices `vkformer tune` measured there (tuning_cache.hpp).
Tuning tuning_for(const DeviceInfo& info, bool tuned = true);

}  // namespace vkformer::kernels
