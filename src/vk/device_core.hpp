#pragma once
#include "vulkan_loader.hpp"

#include <atomic>
#include <memory>
#include <mutex>

#include "instance.hpp"
#include "physical_device.hpp"

namespace vkformer::vk {

// The logical VkDevice and its compute queue. Shared by everything that owns Vulkan objects so
// that the device is destroyed last. Once a call reports device loss the core is marked lost and
// every later use fails fast with ErrorCode::device_lost.
class DeviceCore {
 public:
  DeviceCore(std::shared_ptr<Instance> instance, PhysicalDevice physical, uint64_t timeout_ms);
  ~DeviceCore();
  DeviceCore(const DeviceCore&) = delete;
  DeviceCore& operator=(const DeviceCore&) = delete;

  VkDevice device() const { return device_; }
  VkPhysicalDevice physical_handle() const { return physical_.handle; }
  const PhysicalDevice& physical() const { return physical_; }
  const DeviceInfo& info() const { return physical_.info; }
  Instance& instance() const { return *instance_; }
  uint32_t queue_family() const { return physical_.compute_queue_family; }

  // Submits one command buffer and waits for it, at most timeout_ms.
  void submit_and_wait(VkCommandBuffer cmd, VkFence fence);

  // Like vk::check, but marks the device lost on VK_ERROR_DEVICE_LOST.
  void check(VkResult r, const char* call);
  void throw_if_lost() const;
  bool lost() const { return lost_; }
  // Before destroying objects a timed-out submission may still use: waits until the device is
  // idle (a device that is really lost returns VK_ERROR_DEVICE_LOST at once). No-op otherwise.
  void settle_if_lost() const;

  // Features that were enabled at device creation.
  bool storage_16bit = false;
  bool float16 = false;
  bool coopmat_nv = false;
  bool coopmat_khr = false;
  bool integer_dot = false;  // VK_KHR_shader_integer_dot_product's shaderIntegerDotProduct

 private:
  std::shared_ptr<Instance> instance_;
  PhysicalDevice physical_;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  // Guards the queue: submissions from all threads, and waits for the whole device.
  mutable std::mutex queue_mutex_;
  uint64_t timeout_ms_;
  std::atomic<bool> lost_{false};
};

}  // namespace vkformer::vk
