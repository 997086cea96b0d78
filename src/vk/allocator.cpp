#include "allocator.hpp"

#include <algorithm>
#include <cstdio>

#include "tuning_env.hpp"
#include "vk_check.hpp"

namespace vkformer::vk {

namespace {

constexpr VkDeviceSize kMiB = 1024 * 1024;

VkDeviceSize align_up(VkDeviceSize v, VkDeviceSize a) { return (v + a - 1) / a * a; }

// "16.0 MiB", or "12.5 KiB" below a MiB (where "0.0 MiB" would say nothing).
std::string mib(VkDeviceSize bytes) {
  char buf[32];
  if (bytes > 0 && bytes < kMiB)
    std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(bytes) / 1024);
  else
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / kMiB);
  return buf;
}

uint32_t pick_memory_type(VkPhysicalDevice pd, uint32_t type_bits, MemoryKind kind,
                          bool* coherent) {
  VkPhysicalDeviceMemoryProperties mem{};
  vkGetPhysicalDeviceMemoryProperties(pd, &mem);
  // Preferences in order; the first type allowed by type_bits that has all flags wins.
  std::vector<VkMemoryPropertyFlags> wanted;
  if (kind == MemoryKind::device) {
    wanted = {VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0};
  } else {
    const auto hv = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT;
    wanted = {hv | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT | VK_MEMORY_PROPERTY_HOST_CACHED_BIT,
              hv | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT, hv};
  }
  for (auto flags : wanted)
    for (uint32_t i = 0; i < mem.memoryTypeCount; ++i)
      if ((type_bits & (1u << i)) && (mem.memoryTypes[i].propertyFlags & flags) == flags) {
        *coherent = mem.memoryTypes[i].propertyFlags & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
        return i;
      }
  throw Error(ErrorCode::unsupported, "no suitable Vulkan memory type for " +
                                          std::string(kind == MemoryKind::device ? "device"
                                                                                 : "staging") +
                                          " buffers");
}

// "heap 0 (device-local, 24.0 GiB)": where a memory type's allocations come from.
std::string heap_name(VkPhysicalDevice pd, uint32_t type_index) {
  VkPhysicalDeviceMemoryProperties mem{};
  vkGetPhysicalDeviceMemoryProperties(pd, &mem);
  const uint32_t h = mem.memoryTypes[type_index].heapIndex;
  const VkMemoryHeap& heap = mem.memoryHeaps[h];
  char buf[96];
  std::snprintf(buf, sizeof buf, "heap %u (%s, %.1f GiB)", h,
                heap.flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT ? "device-local" : "host",
                static_cast<double>(heap.size) / (1024.0 * kMiB));
  return buf;
}

}  // namespace

MemoryBlock::MemoryBlock(std::shared_ptr<DeviceCore> core, VkDeviceSize size, MemoryKind kind,
                         VkDeviceSize alignment, std::shared_ptr<MemoryAccount> account)
    : core_(std::move(core)), size_(size), alignment_(alignment), account_(std::move(account)) {
  VkDevice dev = core_->device();
  VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bci.size = size;
  // Uniform texel buffers: kernels may read a tensor through a VkBufferView of 4-component
  // texels (matmul on CPU devices, where texel fetches gather much faster than buffer loads).
  bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT |
              VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  bci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  core_->check(vkCreateBuffer(dev, &bci, nullptr, &buffer_), "vkCreateBuffer");

  VkMemoryRequirements req{};
  vkGetBufferMemoryRequirements(dev, buffer_, &req);
  VkMemoryAllocateInfo mai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  mai.allocationSize = req.size;
  try {
    mai.memoryTypeIndex = pick_memory_type(core_->physical_handle(), req.memoryTypeBits, kind,
                                           &coherent_);
    const bool device = kind == MemoryKind::device;
    const uint64_t held = account_->device_bytes;
    VkResult r = VK_SUCCESS;
    if (device && account_->budget && held + req.size > account_->budget)
      r = VK_ERROR_OUT_OF_DEVICE_MEMORY;  // as the device would, at the budget's size
    else
      r = vkAllocateMemory(dev, &mai, nullptr, &memory_);
    if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY) {
      std::string budget;
      if (device && account_->budget)
        budget = ", of a budget of " + mib(account_->budget) + " (VKFORMER_DEVICE_MEMORY_BUDGET)";
      throw Error(ErrorCode::out_of_memory,
                  "allocating " + mib(req.size) + " of " + (device ? "device" : "staging") +
                      " memory from " + heap_name(core_->physical_handle(), mai.memoryTypeIndex) +
                      " of '" + core_->info().name + "' failed (vkAllocateMemory: " +
                      result_name(r) + "; this device holds " + mib(held) +
                      " of vkformer's device memory" + budget + "): " + remedy(r));
    }
    core_->check(r, "vkAllocateMemory");
    if (device) {
      accounted_ = req.size;
      account_->device_bytes += accounted_;
    }
    core_->check(vkBindBufferMemory(dev, buffer_, memory_, 0), "vkBindBufferMemory");
    if (kind == MemoryKind::staging) {
      void* p = nullptr;
      core_->check(vkMapMemory(dev, memory_, 0, VK_WHOLE_SIZE, 0, &p), "vkMapMemory");
      mapped_ = static_cast<std::byte*>(p);
    }
  } catch (...) {
    account_->device_bytes -= accounted_;
    if (memory_) vkFreeMemory(dev, memory_, nullptr);
    vkDestroyBuffer(dev, buffer_, nullptr);
    throw;
  }
  free_[0] = size;
}

MemoryBlock::~MemoryBlock() {
  account_->device_bytes -= accounted_;
  VkDevice dev = core_->device();
  if (mapped_) vkUnmapMemory(dev, memory_);
  vkDestroyBuffer(dev, buffer_, nullptr);
  vkFreeMemory(dev, memory_, nullptr);
}

bool MemoryBlock::try_reserve(VkDeviceSize size, VkDeviceSize* offset) {
  std::lock_guard lock(mutex_);
  size = align_up(size, alignment_);
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    // Ranges start aligned because every reservation size is a multiple of the alignment.
    if (it->second < size) continue;
    *offset = it->first;
    VkDeviceSize rest = it->second - size;
    VkDeviceSize next = it->first + size;
    free_.erase(it);
    if (rest) free_[next] = rest;
    return true;
  }
  return false;
}

void MemoryBlock::release(VkDeviceSize offset, VkDeviceSize size) {
  std::lock_guard lock(mutex_);
  size = align_up(size, alignment_);
  auto it = free_.emplace(offset, size).first;
  auto next = std::next(it);
  if (next != free_.end() && it->first + it->second == next->first) {
    it->second += next->second;
    free_.erase(next);
  }
  if (it != free_.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second == it->first) {
      prev->second += it->second;
      free_.erase(it);
    }
  }
}

VkDeviceSize MemoryBlock::free_bytes() const {
  std::lock_guard lock(mutex_);
  VkDeviceSize n = 0;
  for (auto& [off, len] : free_) n += len;
  return n;
}

Allocator::Allocator(std::shared_ptr<DeviceCore> core) : core_(std::move(core)) {
  const DeviceInfo& info = core_->info();
  VkPhysicalDeviceProperties p{};
  vkGetPhysicalDeviceProperties(core_->physical_handle(), &p);
  alignment_ = std::max<VkDeviceSize>({256, info.min_storage_buffer_offset_alignment,
                                       info.min_texel_buffer_offset_alignment,
                                       p.limits.nonCoherentAtomSize});
  max_allocation_ = info.max_memory_allocation_size;
  if (auto cap = env_number("VKFORMER_MAX_ALLOCATION_BYTES", 1 << 20, INT64_MAX))
    max_allocation_ = std::min<VkDeviceSize>(max_allocation_, static_cast<VkDeviceSize>(*cap));
  if (auto budget = env_number("VKFORMER_DEVICE_MEMORY_BUDGET", 1 << 20, INT64_MAX))
    account_->budget = static_cast<uint64_t>(*budget);
}

VkDeviceSize Allocator::block_size(MemoryKind kind) const {
  VkDeviceSize want = kind == MemoryKind::device ? 256 * kMiB : 32 * kMiB;
  return std::min<VkDeviceSize>(want, max_allocation_);
}

size_t Allocator::block_count() const {
  std::lock_guard lock(mutex_);
  return blocks_[0].size() + blocks_[1].size();
}

VkDeviceSize Allocator::bytes_in_use() const {
  std::lock_guard lock(mutex_);
  VkDeviceSize n = 0;
  for (auto& kind : blocks_)
    for (auto& b : kind) n += b->size() - b->free_bytes();
  return n;
}

VkDeviceSize Allocator::device_bytes_in_use() const {
  std::lock_guard lock(mutex_);
  VkDeviceSize free = 0;
  for (auto& b : blocks_[static_cast<int>(MemoryKind::device)]) free += b->free_bytes();
  return account_->device_bytes - free;
}

std::shared_ptr<Allocation> Allocator::allocate(VkDeviceSize size, MemoryKind kind,
                                                const char* what) {
  core_->throw_if_lost();
  size = std::max<VkDeviceSize>(align_up(size, alignment_), alignment_);
  const DeviceInfo& info = core_->info();
  if (size > max_allocation_)
    throw Error(ErrorCode::unsupported,
                std::string(what) + " needs " + mib(size) + " in one allocation, more than '" +
                    info.name + "' allows (maxMemoryAllocationSize " + mib(max_allocation_) +
                    ")");
  auto& blocks = blocks_[static_cast<int>(kind)];
  try {
    if (size > block_size(kind)) {
      // Dedicated block, owned only by this allocation: freed with it.
      auto block = std::make_shared<MemoryBlock>(core_, size, kind, alignment_, account_);
      VkDeviceSize off = 0;
      block->try_reserve(size, &off);
      return std::make_shared<Allocation>(std::move(block), off, size);
    }
    std::lock_guard lock(mutex_);
    VkDeviceSize off = 0;
    for (auto& b : blocks)
      if (b->try_reserve(size, &off)) return std::make_shared<Allocation>(b, off, size);
    // A new shared block; where the device cannot give a whole one, a block of just this size.
    std::shared_ptr<MemoryBlock> block;
    try {
      block = std::make_shared<MemoryBlock>(core_, block_size(kind), kind, alignment_, account_);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::out_of_memory || size == block_size(kind)) throw;
      block = std::make_shared<MemoryBlock>(core_, size, kind, alignment_, account_);
    }
    blocks.push_back(std::move(block));
    blocks.back()->try_reserve(size, &off);
    return std::make_shared<Allocation>(blocks.back(), off, size);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::out_of_memory) throw;
    throw Error(ErrorCode::out_of_memory, std::string(what) + " (" + mib(size) + "): " + e.what());
  }
}

}  // namespace vkformer::vk

namespace vkformer {

void Allocation::flush() const {
  if (block->coherent()) return;
  VkMappedMemoryRange r{VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE};
  r.memory = block->memory();
  r.offset = offset;  // offsets and sizes are multiples of nonCoherentAtomSize
  r.size = size;
  vk::check(vkFlushMappedMemoryRanges(block->device(), 1, &r), "vkFlushMappedMemoryRanges");
}

void Allocation::invalidate() const {
  if (block->coherent()) return;
  VkMappedMemoryRange r{VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE};
  r.memory = block->memory();
  r.offset = offset;
  r.size = size;
  vk::check(vkInvalidateMappedMemoryRanges(block->device(), 1, &r),
            "vkInvalidateMappedMemoryRanges");
}

}  // namespace vkformer
