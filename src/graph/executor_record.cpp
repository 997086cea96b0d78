// Executor compilation, second half: one descriptor set per dispatch, and the command buffer,
// recorded once with a barrier only where the hazard tracker finds one.
#include <algorithm>
#include <string_view>

#include "executor_impl.hpp"
#include "hazard_tracker.hpp"

namespace vkformer {

void ExecutorImpl::create_descriptors() {
  VkDevice dev = dev_->core().device();
  const uint32_t sets = static_cast<uint32_t>(program_.dispatches.size());
  if (sets == 0) return;
  sets_.resize(sets);
  pipelines_.resize(sets);
  std::vector<VkDescriptorSetLayout> layouts(sets);
  uint32_t total_bindings = 0, texel_bindings = 0;
  for (uint32_t i = 0; i < sets; ++i) {
    const Dispatch& d = program_.dispatches[i];
    pipelines_[i] = &dev_->pipelines().get(*d.kernel, d.spec);
    if (pipelines_[i]->binding_count != d.bindings.size())
      throw Error(ErrorCode::internal,
                  program_.node_labels[d.node] + ": kernel " + d.kernel->name + " has " +
                      std::to_string(pipelines_[i]->binding_count) + " bindings, lowering gave " +
                      std::to_string(d.bindings.size()));
    layouts[i] = pipelines_[i]->set_layout;
    total_bindings += static_cast<uint32_t>(d.bindings.size());
    for (vk::BindingKind k : pipelines_[i]->binding_kinds)
      texel_bindings += vk::is_texel_buffer(k);
  }
  // Pool sizes must be positive; a type no dispatch uses gets one spare descriptor.
  VkDescriptorPoolSize sizes[2] = {
      {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, std::max(total_bindings - texel_bindings, 1u)},
      {VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER, std::max(texel_bindings, 1u)}};
  VkDescriptorPoolCreateInfo dpci{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
  dpci.maxSets = sets;
  dpci.poolSizeCount = 2;
  dpci.pPoolSizes = sizes;
  dev_->core().check(vkCreateDescriptorPool(dev, &dpci, nullptr, &descriptor_pool_),
                     "vkCreateDescriptorPool");
  VkDescriptorSetAllocateInfo dsai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
  dsai.descriptorPool = descriptor_pool_;
  dsai.descriptorSetCount = sets;
  dsai.pSetLayouts = layouts.data();
  dev_->core().check(vkAllocateDescriptorSets(dev, &dsai, sets_.data()), "vkAllocateDescriptorSets");

  std::vector<VkDescriptorBufferInfo> infos;
  infos.reserve(total_bindings);
  views_.reserve(texel_bindings);
  std::vector<VkWriteDescriptorSet> writes;
  for (uint32_t i = 0; i < sets; ++i)
    for (uint32_t b = 0; b < program_.dispatches[i].bindings.size(); ++b) {
      const Dispatch& d = program_.dispatches[i];
      Location loc = locate(d.bindings[b]);
      VkWriteDescriptorSet w{VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
      w.dstSet = sets_[i];
      w.dstBinding = b;
      w.descriptorCount = 1;
      w.descriptorType = vk::descriptor_type(pipelines_[i]->binding_kinds[b]);
      if (vk::is_texel_buffer(pipelines_[i]->binding_kinds[b])) {
        views_.push_back(texel_view(d, b, loc, pipelines_[i]->binding_kinds[b]));
        w.pTexelBufferView = &views_.back();
      } else {
        infos.push_back({loc.allocation->buffer(), loc.offset, loc.size});
        w.pBufferInfo = &infos.back();
      }
      writes.push_back(w);
    }
  vkUpdateDescriptorSets(dev, static_cast<uint32_t>(writes.size()), writes.data(), 0, nullptr);
}

// A view of 4-component texels of the value's dtype (R32G32B32A32 / R16G16B16A16 float), or of
// its raw bytes as 16-byte texels of four 32-bit words (R32G32B32A32_UINT) where the kernel
// declares a usamplerBuffer (quantized weights: lavapipe fetches a 16-byte texel with plain
// vector loads, a 4-byte one with a gather that costs about as much). A raw view ends on the
// texel that holds the binding's last byte (the allocation, sized in multiples of 256 bytes,
// has the rest); the kernels read no further than the binding's bytes. The lowering that picks
// a texel-reading kernel guarantees whole texels and the device's texel limits; this checks
// them again, since a violation would be undefined behaviour, not an error.
VkBufferView ExecutorImpl::texel_view(const Dispatch& d, uint32_t binding, const Location& loc,
                                      vk::BindingKind kind) {
  const ValueDesc& v = program_.values[d.bindings[binding].value];
  const DeviceInfo& info = dev_->info();
  const bool raw = kind == vk::BindingKind::uniform_texel_buffer_uint;
  const VkDeviceSize texel = raw ? 16 : 4 * dtype_size(v.dtype);
  const uint32_t align = std::max(info.min_texel_buffer_offset_alignment, 1u);
  const VkDeviceSize range = raw ? (loc.size + texel - 1) / texel * texel : loc.size;
  const bool inside = loc.offset + range <= loc.allocation->offset + loc.allocation->size;
  if ((!raw && v.dtype != DType::f32 && v.dtype != DType::f16) || range % texel || !inside ||
      loc.offset % align || range / texel > info.max_texel_buffer_elements)
    throw Error(ErrorCode::internal,
                program_.node_labels[d.node] + ": kernel " + d.kernel->name + " reads " +
                    v.shape.str() + " " + std::string(dtype_name(v.dtype)) + " at offset " +
                    std::to_string(loc.offset) + " as a texel buffer, which does not fit it");
  VkBufferViewCreateInfo bvci{VK_STRUCTURE_TYPE_BUFFER_VIEW_CREATE_INFO};
  bvci.buffer = loc.allocation->buffer();
  bvci.format = raw                     ? VK_FORMAT_R32G32B32A32_UINT
                : v.dtype == DType::f32 ? VK_FORMAT_R32G32B32A32_SFLOAT
                                        : VK_FORMAT_R16G16B16A16_SFLOAT;
  bvci.offset = loc.offset;
  bvci.range = range;
  VkBufferView view = VK_NULL_HANDLE;
  dev_->core().check(vkCreateBufferView(dev_->core().device(), &bvci, nullptr, &view),
                     "vkCreateBufferView");
  return view;
}

void ExecutorImpl::record() {
  vk::DeviceCore& core = dev_->core();
  VkDevice dev = core.device();
  VkCommandPoolCreateInfo cpci{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  cpci.queueFamilyIndex = core.queue_family();
  core.check(vkCreateCommandPool(dev, &cpci, nullptr, &command_pool_), "vkCreateCommandPool");
  VkCommandBufferAllocateInfo cbai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  cbai.commandPool = command_pool_;
  cbai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  cbai.commandBufferCount = 1;
  core.check(vkAllocateCommandBuffers(dev, &cbai, &cmd_), "vkAllocateCommandBuffers");
  VkFenceCreateInfo fci{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  core.check(vkCreateFence(dev, &fci, nullptr, &fence_), "vkCreateFence");

  const auto& dispatches = program_.dispatches;
  if (options_.profile) {
    for (size_t i = 0; i < dispatches.size(); ++i)
      if (i == 0 || dispatches[i].node != dispatches[i - 1].node) {
        profiled_nodes_.push_back(dispatches[i].node);
        profiled_ops_.push_back({program_.node_labels[dispatches[i].node]});
      }
    if (!profiled_nodes_.empty()) {
      VkQueryPoolCreateInfo qpci{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
      qpci.queryType = VK_QUERY_TYPE_TIMESTAMP;
      qpci.queryCount = static_cast<uint32_t>(profiled_nodes_.size() * 2);
      core.check(vkCreateQueryPool(dev, &qpci, nullptr, &query_pool_), "vkCreateQueryPool");
    }
  }

  if (options_.timestamps) {
    VkQueryPoolCreateInfo qpci{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
    qpci.queryType = VK_QUERY_TYPE_TIMESTAMP;
    qpci.queryCount = 2;
    core.check(vkCreateQueryPool(dev, &qpci, nullptr, &run_timestamps_), "vkCreateQueryPool");
  }

  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  core.check(vkBeginCommandBuffer(cmd_, &bi), "vkBeginCommandBuffer");
  if (query_pool_)
    vkCmdResetQueryPool(cmd_, query_pool_, 0, static_cast<uint32_t>(profiled_nodes_.size() * 2));
  if (run_timestamps_) vkCmdResetQueryPool(cmd_, run_timestamps_, 0, 2);

  vk::HazardTracker tracker;
  // Orders this replay after whatever earlier submissions did to the same memory.
  tracker.full_barrier(cmd_, kComputeTransfer, kComputeTransfer, kComputeTransferAccess);
  // Begin: once the barrier above has drained earlier work. End: once every command recorded
  // before it has completed (a timestamp waits for all earlier commands at its stage).
  if (run_timestamps_)
    vkCmdWriteTimestamp(cmd_, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, run_timestamps_, 0);

  auto copy = [&](const Location& src, const Location& dst) {
    vk::BufferAccess acc[2] = {
        {src.allocation->buffer(), src.offset, src.size, false, VK_PIPELINE_STAGE_TRANSFER_BIT},
        {dst.allocation->buffer(), dst.offset, dst.size, true, VK_PIPELINE_STAGE_TRANSFER_BIT}};
    tracker.use(cmd_, acc);
    VkBufferCopy region{src.offset, dst.offset, src.size};
    vkCmdCopyBuffer(cmd_, src.allocation->buffer(), dst.allocation->buffer(), 1, &region);
  };
  auto staging_at = [&](const IoSlot& s) {
    return Location{staging_.get(), staging_->offset + s.staging_offset,
                    program_.values[s.value].bytes()};
  };

  for (auto& in : inputs_) copy(staging_at(in), locate(in.value));

  // Weights: externals and constants that no dispatch writes.
  std::vector<bool> written(program_.values.size(), false);
  for (const Dispatch& d : dispatches)
    for (const Binding& b : d.bindings)
      if (b.write) written[program_.root(b.value)] = true;
  auto weight_bytes = [&](const Binding& b) -> uint64_t {
    const uint32_t r = program_.root(b.value);
    const ValueKind kind = program_.values[r].kind;
    if (b.write || written[r] || (kind != ValueKind::external && kind != ValueKind::constant))
      return 0;
    const uint64_t bound = b.bytes(program_.values[b.value]);
    return b.read_bytes ? std::min(b.read_bytes, bound) : bound;
  };
  stats_.weight_bytes_read = 0;
  stats_.pipeline_binds = 0;

  const vk::Pipeline* bound = nullptr;
  size_t query = 0;
  size_t profile_barriers = 0;
  std::vector<vk::BufferAccess> accesses;
  for (size_t i = 0; i < dispatches.size(); ++i) {
    const Dispatch& d = dispatches[i];
    bool node_start = i == 0 || dispatches[i - 1].node != d.node;
    bool node_end = i + 1 == dispatches.size() || dispatches[i + 1].node != d.node;
    if (query_pool_ && node_start) {
      tracker.full_barrier(cmd_, kComputeTransfer, kComputeTransfer, kComputeTransferAccess);
      ++profile_barriers;
      vkCmdWriteTimestamp(cmd_, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, query_pool_,
                          static_cast<uint32_t>(query++));
    }
    accesses.clear();
    // The op this dispatch belongs to: its begin timestamp was the last query written.
    OpTime* op = query_pool_ ? &profiled_ops_[(query - 1) / 2] : nullptr;
    if (op) {
      // The op's kernels in order, "+" between them; a kernel repeated back to back (windows)
      // once. The last name is compared whole: "add" is not a repeat after "layer_norm_add".
      const std::string name = d.kernel->name;
      const size_t last = op->kernels.rfind('+');
      const bool repeat = !node_start &&
                          std::string_view(op->kernels).substr(last == std::string::npos ? 0 : last + 1) == name;
      if (!repeat) op->kernels += (op->kernels.empty() ? "" : "+") + name;
      ++op->dispatches;
    }
    for (auto& b : d.bindings) {
      stats_.weight_bytes_read += weight_bytes(b);
      if (op) op->weight_bytes_read += weight_bytes(b);
      Location loc = locate(b);
      accesses.push_back({loc.allocation->buffer(), loc.offset, loc.size, b.write,
                          VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT});
    }
    tracker.use(cmd_, accesses);
    const vk::Pipeline* p = pipelines_[i];
    if (p != bound) {
      vkCmdBindPipeline(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, p->pipeline);
      bound = p;
      ++stats_.pipeline_binds;
    }
    vkCmdBindDescriptorSets(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, p->layout, 0, 1, &sets_[i], 0,
                            nullptr);
    if (d.push.size)
      vkCmdPushConstants(cmd_, p->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, d.push.size,
                         d.push.words.data());
    vkCmdDispatch(cmd_, d.groups[0], d.groups[1], d.groups[2]);
    if (query_pool_ && node_end)
      vkCmdWriteTimestamp(cmd_, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, query_pool_,
                          static_cast<uint32_t>(query++));
  }

  for (auto& out : outputs_) copy(locate(out.value), staging_at(out));
  if (run_timestamps_)
    vkCmdWriteTimestamp(cmd_, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, run_timestamps_, 1);

  // Downloads must be visible to the host once the fence signals.
  VkMemoryBarrier to_host{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  to_host.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_SHADER_WRITE_BIT;
  to_host.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
  vkCmdPipelineBarrier(cmd_, kComputeTransfer, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &to_host, 0,
                       nullptr, 0, nullptr);
  core.check(vkEndCommandBuffer(cmd_), "vkEndCommandBuffer");

  stats_.dispatches = dispatches.size();
  // Hazard barriers plus, when profiling, the ones that serialize ops for their timestamps.
  stats_.barriers = tracker.barrier_count() + profile_barriers;
  // And the two every recording has: after earlier submissions, before the host reads.
  stats_.pipeline_barriers = stats_.barriers + 2;
  stats_.recordings = 1;
}

ExecutorImpl::~ExecutorImpl() { release_vulkan_objects(); }

void ExecutorImpl::release_vulkan_objects() {
  dev_->core().settle_if_lost();
  VkDevice dev = dev_->core().device();
  if (query_pool_) vkDestroyQueryPool(dev, query_pool_, nullptr);
  if (run_timestamps_) vkDestroyQueryPool(dev, run_timestamps_, nullptr);
  if (fence_) vkDestroyFence(dev, fence_, nullptr);
  if (command_pool_) vkDestroyCommandPool(dev, command_pool_, nullptr);
  if (descriptor_pool_) vkDestroyDescriptorPool(dev, descriptor_pool_, nullptr);
  for (VkBufferView view : views_) vkDestroyBufferView(dev, view, nullptr);
  query_pool_ = run_timestamps_ = VK_NULL_HANDLE;
  fence_ = VK_NULL_HANDLE;
  command_pool_ = VK_NULL_HANDLE;
  descriptor_pool_ = VK_NULL_HANDLE;
  views_.clear();
}

}  // namespace vkformer
