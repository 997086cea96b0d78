#pragma once
#include "vulkan_loader.hpp"

#include <string>
#include <vector>

#include "vkformer/device.hpp"

namespace vkformer::vk {

// Everything vkformer needs to know about a physical device before creating a logical one.
struct PhysicalDevice {
  VkPhysicalDevice handle = VK_NULL_HANDLE;
  DeviceInfo info;
  uint32_t api_version = 0;          // min(device, instance)
  uint32_t compute_queue_family = UINT32_MAX;
  uint32_t queue_timestamp_bits = 0;
  std::vector<std::string> extensions;
  bool has_extension(const char* name) const;
};

PhysicalDevice query_physical_device(VkInstance instance, VkPhysicalDevice handle, uint32_t index,
                                     uint32_t instance_api_version);

std::string vendor_name(uint32_t vendor_id);
std::string format_api_version(uint32_t v);
std::string format_driver_version(uint32_t vendor_id, uint32_t v);

}  // namespace vkformer::vk
