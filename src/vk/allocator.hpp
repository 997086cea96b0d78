#pragma once
#include "vulkan_loader.hpp"

#include <atomic>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "device_core.hpp"

namespace vkformer::vk {

enum class MemoryKind : uint8_t {
  device,   // device-local: tensors, arenas
  staging,  // host-visible: uploads and downloads
};

// Device memory held by one allocator's blocks, against an optional budget
// (VKFORMER_DEVICE_MEMORY_BUDGET, bytes: a device that runs out sooner, for tests of exhaustion).
struct MemoryAccount {
  std::atomic<uint64_t> device_bytes{0};
  uint64_t budget = 0;  // 0: only the device's own limits
};

// One VkDeviceMemory with one VkBuffer over all of it; allocations are byte ranges of it, so a
// whole block is bound with one buffer handle and hazards are tracked per (buffer, range).
class MemoryBlock {
 public:
  // Throws out_of_memory naming the size, the memory heap and what is held in it when the device
  // (or the account's budget) refuses.
  MemoryBlock(std::shared_ptr<DeviceCore> core, VkDeviceSize size, MemoryKind kind,
              VkDeviceSize alignment, std::shared_ptr<MemoryAccount> account);
  ~MemoryBlock();
  MemoryBlock(const MemoryBlock&) = delete;
  MemoryBlock& operator=(const MemoryBlock&) = delete;

  bool try_reserve(VkDeviceSize size, VkDeviceSize* offset);
  void release(VkDeviceSize offset, VkDeviceSize size);

  VkBuffer buffer() const { return buffer_; }
  std::byte* mapped() const { return mapped_; }
  bool coherent() const { return coherent_; }
  VkDeviceSize size() const { return size_; }
  VkDeviceSize free_bytes() const;
  VkDevice device() const { return core_->device(); }
  VkDeviceMemory memory() const { return memory_; }

 private:
  std::shared_ptr<DeviceCore> core_;
  VkDeviceSize size_;
  VkDeviceSize alignment_;
  std::shared_ptr<MemoryAccount> account_;
  VkDeviceSize accounted_ = 0;  // bytes added to account_->device_bytes
  VkBuffer buffer_ = VK_NULL_HANDLE;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  std::byte* mapped_ = nullptr;
  bool coherent_ = true;
  mutable std::mutex mutex_;
  std::map<VkDeviceSize, VkDeviceSize> free_;  // offset -> size, non-adjacent ranges
};

// Sub-allocates tensors from a few large blocks; requests larger than a block get their own.
class Allocator {
 public:
  explicit Allocator(std::shared_ptr<DeviceCore> core);
  // Throws unsupported beyond max_allocation(), out_of_memory when the device refuses; the
  // message starts with `what`. Either way the device and every earlier allocation stay usable.
  std::shared_ptr<Allocation> allocate(VkDeviceSize size, MemoryKind kind, const char* what);
  VkDeviceSize alignment() const { return alignment_; }
  // The largest single allocation: maxMemoryAllocationSize, or less with
  // VKFORMER_MAX_ALLOCATION_BYTES (tests split arenas without allocating gigabytes).
  VkDeviceSize max_allocation() const { return max_allocation_; }
  // Device-local bytes held in blocks (shared and dedicated).
  VkDeviceSize device_bytes_held() const { return account_->device_bytes; }
  // The same less what the shared blocks have free: the device memory allocations use now.
  VkDeviceSize device_bytes_in_use() const;
  // VKFORMER_DEVICE_MEMORY_BUDGET in bytes; 0 without one.
  uint64_t budget() const { return account_->budget; }
  VkDeviceSize block_size(MemoryKind kind) const;
  size_t block_count() const;
  // Bytes handed out from the shared blocks and not yet released (dedicated blocks not counted),
  // for leak checks such as bench/soak.cpp.
  VkDeviceSize bytes_in_use() const;

 private:
  std::shared_ptr<DeviceCore> core_;
  VkDeviceSize alignment_;
  VkDeviceSize max_allocation_;
  std::shared_ptr<MemoryAccount> account_ = std::make_shared<MemoryAccount>();
  mutable std::mutex mutex_;
  std::vector<std::shared_ptr<MemoryBlock>> blocks_[2];
};

}  // namespace vkformer::vk

namespace vkformer {

// A byte range of a MemoryBlock. Returns its range to the block when destroyed.
struct Allocation {
  std::shared_ptr<vk::MemoryBlock> block;
  VkDeviceSize offset = 0;
  VkDeviceSize size = 0;

  Allocation(std::shared_ptr<vk::MemoryBlock> b, VkDeviceSize off, VkDeviceSize sz)
      : block(std::move(b)), offset(off), size(sz) {}
  ~Allocation() { block->release(offset, size); }
  Allocation(const Allocation&) = delete;
  Allocation& operator=(const Allocation&) = delete;

  VkBuffer buffer() const { return block->buffer(); }
  std::byte* mapped() const { return block->mapped() ? block->mapped() + offset : nullptr; }
  // For host-visible memory that is not coherent: make host writes visible to the device /
  // device writes visible to the host. No-ops on coherent memory.
  void flush() const;
  void invalidate() const;
};

}  // namespace vkformer
