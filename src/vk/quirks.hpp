#pragma once
// Known driver problems vkformer works around, in one table keyed by what the device reports,
// each with the reason and where it is tracked. Which quirks a device has is decided here; what
// the kernels do about them, in the per-device tuning (src/kernels/tuning.cpp). Op code asks the
// tuning, never the vendor id.
#include <vector>

#include "vkformer/device.hpp"

namespace vkformer::vk {

enum class QuirkId : uint8_t {
  cpu_workgroup_per_thread,  // CPU implementations run a workgroup on one thread
};

struct Quirk {
  QuirkId which;
  const char* id;
  const char* reason;
  const char* link;
};

// The device's quirks, in the table's order; none with VKFORMER_TUNING_AS_GPU (the tests' GPU
// configuration of every kernel on a CPU device).
std::vector<Quirk> device_quirks(const DeviceInfo& info);

bool has_quirk(const std::vector<Quirk>& quirks, QuirkId which);

}  // namespace vkformer::vk
