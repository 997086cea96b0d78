#include "device_impl.hpp"

#include <cstring>

#include "vk_check.hpp"

namespace vkformer {

namespace {
constexpr VkPipelineStageFlags kAllStages = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT |
                                            VK_PIPELINE_STAGE_TRANSFER_BIT;
constexpr VkAccessFlags kAllAccess = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                                     VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;

void full_barrier(VkCommandBuffer cmd, VkPipelineStageFlags dst_stage, VkAccessFlags dst_access) {
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = dst_access;
  vkCmdPipelineBarrier(cmd, kAllStages, dst_stage, 0, 1, &mb, 0, nullptr, 0, nullptr);
}
}  // namespace

DeviceImpl::DeviceImpl(std::shared_ptr<vk::DeviceCore> core)
    : core_(core), allocator_(core), pipelines_(core), tuning_(kernels::tuning_for(core->info())) {
  VkCommandPoolCreateInfo cpci{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  cpci.flags = VK_COMMAND_POOL_CREATE_TRANSIENT_BIT;
  cpci.queueFamilyIndex = core_->queue_family();
  core_->check(vkCreateCommandPool(core_->device(), &cpci, nullptr, &once_pool_),
               "vkCreateCommandPool");
  VkFenceCreateInfo fci{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  VkResult r = vkCreateFence(core_->device(), &fci, nullptr, &once_fence_);
  if (r != VK_SUCCESS) vkDestroyCommandPool(core_->device(), once_pool_, nullptr);  // no destructor runs
  core_->check(r, "vkCreateFence");
}

DeviceImpl::~DeviceImpl() {
  VkDevice dev = core_->device();
  vkDeviceWaitIdle(dev);
  vkDestroyFence(dev, once_fence_, nullptr);
  vkDestroyCommandPool(dev, once_pool_, nullptr);
}

void DeviceImpl::run_once(const std::function<void(VkCommandBuffer)>& record) {
  std::lock_guard lock(once_mutex_);
  core_->throw_if_lost();
  VkDevice dev = core_->device();
  VkCommandBufferAllocateInfo cbai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  cbai.commandPool = once_pool_;
  cbai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  cbai.commandBufferCount = 1;
  VkCommandBuffer cmd = VK_NULL_HANDLE;
  core_->check(vkAllocateCommandBuffers(dev, &cbai, &cmd), "vkAllocateCommandBuffers");
  struct Free {
    const vk::DeviceCore& core;
    VkCommandPool pool;
    VkCommandBuffer cmd;
    ~Free() {
      core.settle_if_lost();  // a timed-out submission may still be using it
      vkFreeCommandBuffers(core.device(), pool, 1, &cmd);
    }
  } free_cmd{*core_, once_pool_, cmd};

  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  core_->check(vkBeginCommandBuffer(cmd, &bi), "vkBeginCommandBuffer");
  full_barrier(cmd, kAllStages, kAllAccess);
  record(cmd);
  full_barrier(cmd, kAllStages | VK_PIPELINE_STAGE_HOST_BIT, kAllAccess | VK_ACCESS_HOST_READ_BIT);
  core_->check(vkEndCommandBuffer(cmd), "vkEndCommandBuffer");
  core_->submit_and_wait(cmd, once_fence_);
}

void DeviceImpl::write(const Allocation& dst, VkDeviceSize offset, const void* src, size_t bytes) {
  if (bytes == 0) return;
  auto staging = allocator_.allocate(bytes, vk::MemoryKind::staging, "upload staging");
  std::memcpy(staging->mapped(), src, bytes);
  staging->flush();
  run_once([&](VkCommandBuffer cmd) {
    VkBufferCopy region{staging->offset, dst.offset + offset, bytes};
    vkCmdCopyBuffer(cmd, staging->buffer(), dst.buffer(), 1, &region);
  });
}

void DeviceImpl::read(const Allocation& src, VkDeviceSize offset, void* dst, size_t bytes) {
  if (bytes == 0) return;
  auto staging = allocator_.allocate(bytes, vk::MemoryKind::staging, "download staging");
  run_once([&](VkCommandBuffer cmd) {
    VkBufferCopy region{src.offset + offset, staging->offset, bytes};
    vkCmdCopyBuffer(cmd, src.buffer(), staging->buffer(), 1, &region);
  });
  staging->invalidate();
  std::memcpy(dst, staging->mapped(), bytes);
}

void DeviceImpl::zero(const Allocation& dst, VkDeviceSize offset, size_t bytes) {
  if (bytes == 0) return;
  // vkCmdFillBuffer needs a size that is a multiple of 4; allocations are padded to 256 bytes.
  VkDeviceSize padded = (bytes + 3) / 4 * 4;
  run_once([&](VkCommandBuffer cmd) {
    vkCmdFillBuffer(cmd, dst.buffer(), dst.offset + offset, padded, 0);
  });
}

}  // namespace vkformer
