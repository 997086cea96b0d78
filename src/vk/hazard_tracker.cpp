#include "hazard_tracker.hpp"

namespace vkformer::vk {

namespace {

// The access masks of what each pipeline stage the tracker sees reads and writes.
struct StageAccess {
  VkPipelineStageFlags stage;
  VkAccessFlags read, write;
};
constexpr StageAccess kStageAccess[] = {
    {VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT, VK_ACCESS_SHADER_WRITE_BIT},
    {VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_READ_BIT, VK_ACCESS_TRANSFER_WRITE_BIT},
    {VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT, VK_ACCESS_HOST_WRITE_BIT},
};

VkAccessFlags reads_of(VkPipelineStageFlags stage) {
  VkAccessFlags a = 0;
  for (const StageAccess& s : kStageAccess)
    if (stage & s.stage) a |= s.read;
  return a;
}

VkAccessFlags writes_of(VkPipelineStageFlags stage) {
  VkAccessFlags a = 0;
  for (const StageAccess& s : kStageAccess)
    if (stage & s.stage) a |= s.write;
  return a;
}

}  // namespace

bool HazardTracker::overlaps(const BufferAccess& a, const BufferAccess& b) {
  return a.buffer == b.buffer && a.offset < b.offset + b.size && b.offset < a.offset + a.size;
}

bool HazardTracker::conflicts(std::span<const BufferAccess> accesses) const {
  for (const auto& a : accesses)
    for (const auto& p : pending_)
      if ((a.write || p.write) && overlaps(a, p)) return true;
  return false;
}

bool HazardTracker::use(VkCommandBuffer cmd, std::span<const BufferAccess> accesses) {
  bool hazard = conflicts(accesses);
  // The barrier's destination is every stage the executor uses (compute and transfer), not just
  // the next access's: then every pending write is visible to, and every pending read ordered
  // before, all later commands, and forgetting the pending set is sound.
  if (hazard) barrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT);
  pending_.insert(pending_.end(), accesses.begin(), accesses.end());
  return hazard;
}

void HazardTracker::barrier(VkCommandBuffer cmd, VkPipelineStageFlags dst_stage) {
  VkPipelineStageFlags src_stage = 0;
  VkAccessFlags src_access = 0;
  for (const auto& p : pending_) {
    src_stage |= p.stage;
    if (p.write) src_access |= writes_of(p.stage);
  }
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = src_access;
  mb.dstAccessMask = reads_of(dst_stage) | writes_of(dst_stage);
  vkCmdPipelineBarrier(cmd, src_stage, dst_stage, 0, 1, &mb, 0, nullptr, 0, nullptr);
  pending_.clear();
  ++barriers_;
}

void HazardTracker::full_barrier(VkCommandBuffer cmd, VkPipelineStageFlags src_stage,
                                 VkPipelineStageFlags dst_stage, VkAccessFlags dst_access) {
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = writes_of(src_stage);
  mb.dstAccessMask = dst_access;
  vkCmdPipelineBarrier(cmd, src_stage, dst_stage, 0, 1, &mb, 0, nullptr, 0, nullptr);
  pending_.clear();
}

}  // namespace vkformer::vk
