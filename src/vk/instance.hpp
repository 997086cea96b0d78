#pragma once
#include "vulkan_loader.hpp"

#include <memory>
#include <mutex>
#include <vector>

#include "vkformer/device.hpp"

namespace vkformer::vk {

// The VkInstance, with the validation layer and a debug messenger that collects its messages
// when asked for.
class Instance {
 public:
  static std::shared_ptr<Instance> create(const InstanceOptions& options);
  ~Instance();
  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;

  VkInstance handle() const { return instance_; }
  uint32_t api_version() const { return api_version_; }
  bool validation_enabled() const { return messenger_ != VK_NULL_HANDLE; }
  std::vector<VkPhysicalDevice> physical_devices() const;

  std::vector<ValidationMessage> take_messages();
  size_t message_count() const;

 private:
  Instance() = default;
  static VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                   VkDebugUtilsMessageTypeFlagsEXT types,
                                                   const VkDebugUtilsMessengerCallbackDataEXT* data,
                                                   void* user);
  VkInstance instance_ = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  uint32_t api_version_ = VK_API_VERSION_1_1;
  mutable std::mutex mutex_;
  std::vector<ValidationMessage> messages_;
  size_t total_messages_ = 0;
};

// An on/off environment variable: true for 1, true, on, yes; false for 0, false, off, no, empty
// or unset (any case). Throws invalid_argument naming the variable for any other value.
bool env_flag(const char* name);

}  // namespace vkformer::vk
