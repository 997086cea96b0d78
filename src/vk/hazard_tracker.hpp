#pragma once
#include "vulkan_loader.hpp"

#include <span>
#include <vector>

namespace vkformer::vk {

// One command's use of a byte range of a buffer.
struct BufferAccess {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceSize offset = 0;
  VkDeviceSize size = 0;
  bool write = false;
  VkPipelineStageFlags stage = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT;
};

// Inserts a pipeline barrier only when a command touches bytes that a command since the last
// barrier wrote (read-after-write, write-after-write) or read while it writes them
// (write-after-read). Ranges are compared by bytes, so aliased memory from the planner is
// handled like any other overlap.
class HazardTracker {
 public:
  // Records a barrier into `cmd` first if `accesses` conflict with pending ones; then makes them
  // pending. Returns true if a barrier was recorded.
  bool use(VkCommandBuffer cmd, std::span<const BufferAccess> accesses);
  // Whether `accesses` conflict with what is pending (what use() would put a barrier before).
  bool conflicts(std::span<const BufferAccess> accesses) const;
  // A barrier from everything pending (and everything before, across submissions) to `dst`.
  void full_barrier(VkCommandBuffer cmd, VkPipelineStageFlags src_stage,
                    VkPipelineStageFlags dst_stage, VkAccessFlags dst_access);
  size_t barrier_count() const { return barriers_; }

  static bool overlaps(const BufferAccess& a, const BufferAccess& b);

 private:
  void barrier(VkCommandBuffer cmd, VkPipelineStageFlags dst_stage);
  std::vector<BufferAccess> pending_;
  size_t barriers_ = 0;
};

}  // namespace vkformer::vk
