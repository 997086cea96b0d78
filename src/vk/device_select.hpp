#pragma once
#include <string>
#include <vector>

#include "vkformer/device.hpp"

namespace vkformer::vk {

// Picks a device from `devices` by `selector`: "" = the default order (discrete, integrated,
// virtual, cpu, other; first of each kind wins), else an index, a UUID, or a case-insensitive
// name substring. Throws device_not_found listing the devices present.
size_t select_device(const std::vector<DeviceInfo>& devices, const std::string& selector);

// "  0: llvmpipe (LLVM 15.0.6, 256 bits) [cpu, Mesa, uuid ...]" lines, for error messages.
std::string list_devices(const std::vector<DeviceInfo>& devices);

}  // namespace vkformer::vk
