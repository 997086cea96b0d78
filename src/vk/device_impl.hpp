#pragma once
#include "vulkan_loader.hpp"

#include <functional>
#include <memory>
#include <mutex>

#include "allocator.hpp"
#include "device_core.hpp"
#include "pipeline_cache.hpp"
#include "tuning.hpp"

namespace vkformer {

// Everything behind a vkformer::Device handle: the Vulkan device, its memory, its pipelines and
// its tuning. Executors hold a shared_ptr to it.
class DeviceImpl {
 public:
  explicit DeviceImpl(std::shared_ptr<vk::DeviceCore> core);
  ~DeviceImpl();

  vk::DeviceCore& core() const { return *core_; }
  const std::shared_ptr<vk::DeviceCore>& core_ptr() const { return core_; }
  const DeviceInfo& info() const { return core_->info(); }
  vk::Allocator& allocator() { return allocator_; }
  vk::PipelineCache& pipelines() { return pipelines_; }
  const kernels::Tuning& tuning() const { return tuning_; }

  // Records commands into a one-time command buffer, submits it and waits. Commands are
  // bracketed by full barriers, so they are ordered with every other submission.
  void run_once(const std::function<void(VkCommandBuffer)>& record);

  void write(const Allocation& dst, VkDeviceSize offset, const void* src, size_t bytes);
  void read(const Allocation& src, VkDeviceSize offset, void* dst, size_t bytes);
  void zero(const Allocation& dst, VkDeviceSize offset, size_t bytes);

 private:
  std::shared_ptr<vk::DeviceCore> core_;
  vk::Allocator allocator_;
  vk::PipelineCache pipelines_;
  kernels::Tuning tuning_;
  std::mutex once_mutex_;
  VkCommandPool once_pool_ = VK_NULL_HANDLE;
  VkFence once_fence_ = VK_NULL_HANDLE;
};

}  // namespace vkformer
