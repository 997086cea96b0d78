// Compiles a Graph for one device: lowers it to dispatches, plans activation memory, creates
// descriptor sets, records one command buffer, and replays it on every run().
#include "vkformer/executor.hpp"

#include <algorithm>
#include <cstring>

#include "graph_impl.hpp"
#include "hazard_tracker.hpp"
#include "lowering.hpp"
#include "memory_planner.hpp"
#include "program.hpp"

namespace vkformer {

namespace {

constexpr VkPipelineStageFlags kComputeTransfer =
    VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
constexpr VkAccessFlags kComputeTransferAccess =
    VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
    VK_ACCESS_TRANSFER_WRITE_BIT;

}  // namespace

class ExecutorImpl {
 public:
  ExecutorImpl(Device device, const Graph& graph, const CompileOptions& options);
  ~ExecutorImpl();

  void set_input(const std::string& name, const HostTensor& value);
  void run();
  HostTensor output(const std::string& name) const;
  std::vector<OpTime> profile() const { return profile_; }
  double last_gpu_microseconds() const;
  ExecutorStats stats() const { return stats_; }
  std::vector<std::string> input_names() const;
  std::vector<std::string> output_names() const;

 private:
  struct Location {
    const Allocation* allocation = nullptr;
    VkDeviceSize offset = 0;  // within the allocation's buffer
    VkDeviceSize size = 0;
  };
  struct IoSlot {
    std::string name;
    uint32_t value = kNoValue;
    VkDeviceSize staging_offset = 0;
    bool set = false;
  };

  void build_program(const GraphImpl& g);
  void plan_memory_and_upload();
  void create_descriptors();
  VkBufferView texel_view(const Dispatch& d, uint32_t binding, const Location& loc);
  void record();
  Location locate(uint32_t value) const;
  const IoSlot& find_slot(const std::vector<IoSlot>& slots, const std::string& name,
                          const char* what) const;

  std::shared_ptr<DeviceImpl> dev_;
  CompileOptions options_;
  Program program_;
  std::vector<uint64_t> offsets_;  // per root value: offset in the arena or constant block
  std::shared_ptr<Allocation> arena_, constants_, staging_;
  std::vector<IoSlot> inputs_, outputs_;
  std::vector<VkDescriptorSet> sets_;
  std::vector<VkBufferView> views_;  // of uniform texel buffer bindings
  std::vector<const vk::Pipeline*> pipelines_;
  VkDescriptorPool descriptor_pool_ = VK_NULL_HANDLE;
  VkCommandPool command_pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cmd_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  VkQueryPool query_pool_ = VK_NULL_HANDLE;
  std::vector<uint32_t> profiled_nodes_;  // node index per timestamp pair
  std::vector<OpTime> profile_;
  VkQueryPool run_timestamps_ = VK_NULL_HANDLE;  // CompileOptions::timestamps: [begin, end]
  double last_gpu_us_ = -1;
  ExecutorStats stats_;
  bool has_run_ = false;
};

ExecutorImpl::ExecutorImpl(Device device, const Graph& graph, const CompileOptions& options)
    : dev_(device.impl_ptr()), options_(options) {
  dev_->core().throw_if_lost();
  if (graph.impl().outputs.empty() && graph.impl().pinned.empty())
    throw Error(ErrorCode::invalid_argument, "the graph has no outputs: call Graph::output");
  if (options_.profile && !dev_->info().timestamps)
    throw Error(ErrorCode::unsupported,
                "profiling needs timestamp queries, which device '" + dev_->info().name + "' lacks");
  if (options_.timestamps && !dev_->info().timestamps)
    throw Error(ErrorCode::unsupported, "CompileOptions::timestamps needs timestamp queries, which "
                                        "device '" + dev_->info().name + "' lacks");
  build_program(graph.impl());
  plan_memory_and_upload();
  create_descriptors();
  record();
}

void ExecutorImpl::build_program(const GraphImpl& g) {
  const size_t nv = g.values.size();
  program_.values.resize(nv);
  for (uint32_t v = 0; v < nv; ++v) {
    const Node& producer = g.nodes[g.values[v].producer];
    ValueDesc& d = program_.values[v];
    d.shape = g.values[v].shape;
    d.dtype = g.values[v].dtype;
    switch (producer.kind) {
      case OpKind::input: d.kind = ValueKind::input; break;
      case OpKind::constant: d.kind = ValueKind::constant; break;
      case OpKind::external: d.kind = ValueKind::external; break;
      case OpKind::reshape: d.alias_of = producer.inputs[0]; break;
      // The updated cache is the cache: same bytes, written in place by the op's dispatch.
      case OpKind::update_cache: d.alias_of = producer.inputs[0]; break;
      default: d.kind = ValueKind::activation; break;
    }
  }
  for (auto [value, target] : g.pinned) program_.values[value].alias_of = target;
  program_.externals = g.externals;
  for (auto& n : g.nodes) program_.node_labels.push_back(n.label);

  // Only nodes that an output (or a write into an external tensor) depends on are lowered.
  std::vector<bool> needed(nv, false);
  for (auto& [name, v] : g.outputs) needed[v] = true;
  for (auto [value, target] : g.pinned) needed[value] = true;
  std::vector<bool> live(g.nodes.size(), false);
  for (size_t i = g.nodes.size(); i-- > 0;) {
    const Node& n = g.nodes[i];
    if (!needed[n.output]) continue;
    live[i] = true;
    for (uint32_t in : n.inputs) needed[in] = true;
  }
  for (auto& [v, t] : g.constants)
    if (needed[v]) program_.constants.emplace(v, t);

  const OpRegistry& ops = builtin_ops();
  for (uint32_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (!live[i]) continue;
    if (n.kind == OpKind::input || n.kind == OpKind::constant || n.kind == OpKind::external ||
        n.kind == OpKind::reshape)
      continue;
    LowerFn fn = ops.lower[static_cast<size_t>(n.kind)];
    if (!fn) throw Error(ErrorCode::internal, n.label + ": op has no lowering registered");
    Lowering lowering(*dev_, program_, n, i);
    fn(lowering);
  }

  for (auto& [name, v] : g.inputs) inputs_.push_back({name, v});
  for (auto& [name, v] : g.outputs) outputs_.push_back({name, v});
}

void ExecutorImpl::plan_memory_and_upload() {
  const DeviceInfo& info = dev_->info();
  const size_t nv = program_.values.size();
  const uint32_t steps = static_cast<uint32_t>(program_.dispatches.size()) + 2;
  // Step 0 uploads inputs, step i+1 runs dispatch i, the last step downloads outputs.
  std::vector<uint32_t> first(nv, UINT32_MAX), last(nv, 0);
  auto touch = [&](uint32_t v, uint32_t step) {
    uint32_t r = program_.root(v);
    first[r] = std::min(first[r], step);
    last[r] = std::max(last[r], step);
  };
  for (auto& in : inputs_) touch(in.value, 0);
  for (uint32_t i = 0; i < program_.dispatches.size(); ++i)
    for (auto& b : program_.dispatches[i].bindings) {
      touch(b.value, i + 1);
      const ValueDesc& v = program_.values[b.value];
      if (v.bytes() > info.max_storage_buffer_range)
        throw Error(ErrorCode::unsupported,
                    program_.node_labels[program_.dispatches[i].node] + ": tensor " +
                        v.shape.str() + " " + std::string(dtype_name(v.dtype)) + " takes " +
                        std::to_string(v.bytes()) + " bytes, more than device '" + info.name +
                        "' can bind (maxStorageBufferRange " +
                        std::to_string(info.max_storage_buffer_range) + ")");
    }
  for (auto& out : outputs_) touch(out.value, steps - 1);

  // Activations and inputs share the arena; constants get their own block, uploaded once.
  std::vector<uint32_t> planned;
  std::vector<Lifetime> lifetimes;
  uint64_t unplanned = 0;
  std::vector<uint32_t> constant_values;
  for (uint32_t v = 0; v < nv; ++v) {
    if (program_.values[v].alias_of != kNoValue || first[v] == UINT32_MAX) continue;
    ValueKind k = program_.values[v].kind;
    if (k == ValueKind::activation || k == ValueKind::input) {
      planned.push_back(v);
      lifetimes.push_back({program_.values[v].bytes(), first[v], last[v]});
      unplanned += program_.values[v].bytes();
    } else if (k == ValueKind::constant) {
      constant_values.push_back(v);
    }
  }
  const uint64_t align = dev_->allocator().alignment();
  MemoryPlan plan = plan_memory(lifetimes, align, options_.reuse_memory);
  offsets_.assign(nv, 0);
  for (size_t i = 0; i < planned.size(); ++i) offsets_[planned[i]] = plan.offsets[i];
  if (plan.total)
    arena_ = dev_->allocator().allocate(plan.total, vk::MemoryKind::device, "activation arena");
  stats_.activation_bytes = plan.total;
  stats_.unplanned_bytes = unplanned;

  uint64_t const_total = 0;
  for (uint32_t v : constant_values) {
    offsets_[v] = const_total;
    const_total += (program_.values[v].bytes() + align - 1) / align * align;
  }
  if (const_total) {
    constants_ = dev_->allocator().allocate(const_total, vk::MemoryKind::device, "graph constants");
    auto upload = dev_->allocator().allocate(const_total, vk::MemoryKind::staging, "constant upload");
    for (uint32_t v : constant_values) {
      const HostTensor& t = program_.constants.at(v);
      std::memcpy(upload->mapped() + offsets_[v], t.data(), t.nbytes());
    }
    upload->flush();
    dev_->run_once([&](VkCommandBuffer cmd) {
      VkBufferCopy region{upload->offset, constants_->offset, const_total};
      vkCmdCopyBuffer(cmd, upload->buffer(), constants_->buffer(), 1, &region);
    });
  }
  program_.constants.clear();  // on the device now
  stats_.constant_bytes = const_total;

  uint64_t staging_total = 0;
  for (auto* slots : {&inputs_, &outputs_})
    for (auto& s : *slots) {
      s.staging_offset = staging_total;
      staging_total += (program_.values[s.value].bytes() + align - 1) / align * align;
    }
  if (staging_total)
    staging_ = dev_->allocator().allocate(staging_total, vk::MemoryKind::staging, "executor staging");
  stats_.staging_bytes = staging_total;
}

ExecutorImpl::Location ExecutorImpl::locate(uint32_t value) const {
  uint32_t r = program_.root(value);
  const ValueDesc& root = program_.values[r];
  Location loc;
  loc.size = program_.values[value].bytes();
  switch (root.kind) {
    case ValueKind::activation:
    case ValueKind::input:
      loc.allocation = arena_.get();
      loc.offset = arena_->offset + offsets_[r];
      break;
    case ValueKind::constant:
      loc.allocation = constants_.get();
      loc.offset = constants_->offset + offsets_[r];
      break;
    case ValueKind::external: {
      const auto& a = program_.externals.at(r).allocation();
      loc.allocation = a.get();
      loc.offset = a->offset;
      break;
    }
  }
  return loc;
}

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
      texel_bindings += k == vk::BindingKind::uniform_texel_buffer;
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
      Location loc = locate(d.bindings[b].value);
      VkWriteDescriptorSet w{VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
      w.dstSet = sets_[i];
      w.dstBinding = b;
      w.descriptorCount = 1;
      w.descriptorType = vk::descriptor_type(pipelines_[i]->binding_kinds[b]);
      if (pipelines_[i]->binding_kinds[b] == vk::BindingKind::uniform_texel_buffer) {
        views_.push_back(texel_view(d, b, loc));
        w.pTexelBufferView = &views_.back();
      } else {
        infos.push_back({loc.allocation->buffer(), loc.offset, loc.size});
        w.pBufferInfo = &infos.back();
      }
      writes.push_back(w);
    }
  vkUpdateDescriptorSets(dev, static_cast<uint32_t>(writes.size()), writes.data(), 0, nullptr);
}

// A view of 4-component texels of the value's dtype (R32G32B32A32 / R16G16B16A16 float). The
// lowering that picks a texel-reading kernel guarantees whole texels and the device's texel
// limits; this checks them again, since a violation would be undefined behaviour, not an error.
VkBufferView ExecutorImpl::texel_view(const Dispatch& d, uint32_t binding, const Location& loc) {
  const ValueDesc& v = program_.values[d.bindings[binding].value];
  const DeviceInfo& info = dev_->info();
  const VkDeviceSize texel = 4 * dtype_size(v.dtype);
  const uint32_t align = std::max(info.min_texel_buffer_offset_alignment, 1u);
  if ((v.dtype != DType::f32 && v.dtype != DType::f16) || loc.size % texel ||
      loc.offset % align || loc.size / texel > info.max_texel_buffer_elements)
    throw Error(ErrorCode::internal,
                program_.node_labels[d.node] + ": kernel " + d.kernel->name + " reads " +
                    v.shape.str() + " " + std::string(dtype_name(v.dtype)) + " at offset " +
                    std::to_string(loc.offset) + " as a texel buffer, which does not fit it");
  VkBufferViewCreateInfo bvci{VK_STRUCTURE_TYPE_BUFFER_VIEW_CREATE_INFO};
  bvci.buffer = loc.allocation->buffer();
  bvci.format = v.dtype == DType::f32 ? VK_FORMAT_R32G32B32A32_SFLOAT
                                      : VK_FORMAT_R16G16B16A16_SFLOAT;
  bvci.offset = loc.offset;
  bvci.range = loc.size;
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
      if (i == 0 || dispatches[i].node != dispatches[i - 1].node)
        profiled_nodes_.push_back(dispatches[i].node);
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
    for (auto& b : d.bindings) {
      Location loc = locate(b.value);
      accesses.push_back({loc.allocation->buffer(), loc.offset, loc.size, b.write,
                          VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT});
    }
    tracker.use(cmd_, accesses);
    const vk::Pipeline* p = pipelines_[i];
    if (p != bound) {
      vkCmdBindPipeline(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, p->pipeline);
      bound = p;
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
  stats_.recordings = 1;
}

ExecutorImpl::~ExecutorImpl() {
  dev_->core().settle_if_lost();
  VkDevice dev = dev_->core().device();
  if (query_pool_) vkDestroyQueryPool(dev, query_pool_, nullptr);
  if (run_timestamps_) vkDestroyQueryPool(dev, run_timestamps_, nullptr);
  if (fence_) vkDestroyFence(dev, fence_, nullptr);
  if (command_pool_) vkDestroyCommandPool(dev, command_pool_, nullptr);
  if (descriptor_pool_) vkDestroyDescriptorPool(dev, descriptor_pool_, nullptr);
  for (VkBufferView view : views_) vkDestroyBufferView(dev, view, nullptr);
}

const ExecutorImpl::IoSlot& ExecutorImpl::find_slot(const std::vector<IoSlot>& slots,
                                                    const std::string& name,
                                                    const char* what) const {
  for (auto& s : slots)
    if (s.name == name) return s;
  std::string names;
  for (auto& s : slots) names += (names.empty() ? "" : ", ") + s.name;
  throw Error(ErrorCode::invalid_argument, std::string("the graph has no ") + what + " named '" +
                                               name + "' (it has: " +
                                               (names.empty() ? "none" : names) + ")");
}

void ExecutorImpl::set_input(const std::string& name, const HostTensor& value) {
  auto& slot = const_cast<IoSlot&>(find_slot(inputs_, name, "input"));
  const ValueDesc& v = program_.values[slot.value];
  auto expected = [&] {
    return v.shape.str() + " " + std::string(dtype_name(v.dtype)) + ", got " +
           value.shape().str() + " " + std::string(dtype_name(value.dtype()));
  };
  if (value.shape() != v.shape)
    throw Error(ErrorCode::shape_mismatch, "input '" + name + "': expected " + expected());
  if (is_float(v.dtype) != is_float(value.dtype()))
    throw Error(ErrorCode::shape_mismatch, "input '" + name + "': expected " + expected());
  HostTensor converted;
  const HostTensor* data = &value;
  if (value.dtype() != v.dtype) {
    converted = value.cast(v.dtype);
    data = &converted;
  }

  auto bound = program_.index_bounds.find(slot.value);
  if (bound != program_.index_bounds.end()) {
    const auto* ids = reinterpret_cast<const int32_t*>(value.data());
    for (int64_t i = 0; i < value.numel(); ++i)
      if (ids[i] < 0 || ids[i] >= bound->second)
        throw Error(ErrorCode::invalid_argument,
                    "input '" + name + "': index " + std::to_string(ids[i]) + " at position " +
                        std::to_string(i) + " is outside [0, " + std::to_string(bound->second) +
                        ")");
  }
  if (staging_) {
    std::memcpy(staging_->mapped() + slot.staging_offset, data->data(), data->nbytes());
    staging_->flush();
  }
  slot.set = true;
}

void ExecutorImpl::run() {
  for (auto& in : inputs_)
    if (!in.set)
      throw Error(ErrorCode::invalid_argument,
                  "input '" + in.name + "' was not set before run()");
  dev_->core().submit_and_wait(cmd_, fence_);
  ++stats_.runs;
  has_run_ = true;
  if (run_timestamps_) {
    uint64_t ticks[2] = {};
    dev_->core().check(vkGetQueryPoolResults(dev_->core().device(), run_timestamps_, 0, 2,
                                             sizeof ticks, ticks, 8,
                                             VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
                       "vkGetQueryPoolResults");
    const uint32_t bits = dev_->core().physical().queue_timestamp_bits;
    const uint64_t mask = bits >= 64 ? ~0ull : ((1ull << bits) - 1);
    last_gpu_us_ = static_cast<double>(((ticks[1] & mask) - (ticks[0] & mask)) & mask) *
                   dev_->info().timestamp_period_ns / 1000.0;
  }
  if (query_pool_) {
    std::vector<uint64_t> ticks(profiled_nodes_.size() * 2);
    dev_->core().check(
        vkGetQueryPoolResults(dev_->core().device(), query_pool_, 0,
                              static_cast<uint32_t>(ticks.size()), ticks.size() * 8, ticks.data(),
                              8, VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
        "vkGetQueryPoolResults");
    const uint32_t bits = dev_->core().physical().queue_timestamp_bits;
    const uint64_t mask = bits >= 64 ? ~0ull : ((1ull << bits) - 1);
    const double period = dev_->info().timestamp_period_ns;
    profile_.clear();
    for (size_t i = 0; i < profiled_nodes_.size(); ++i) {
      uint64_t t0 = ticks[2 * i] & mask, t1 = ticks[2 * i + 1] & mask;
      double us = static_cast<double>((t1 - t0) & mask) * period / 1000.0;
      profile_.push_back({program_.node_labels[profiled_nodes_[i]], us});
    }
  }
}

double ExecutorImpl::last_gpu_microseconds() const {
  if (!run_timestamps_)
    throw Error(ErrorCode::invalid_argument,
                "last_gpu_microseconds needs an executor compiled with CompileOptions::timestamps");
  return last_gpu_us_;
}

HostTensor ExecutorImpl::output(const std::string& name) const {
  const IoSlot& slot = find_slot(outputs_, name, "output");
  if (!has_run_)
    throw Error(ErrorCode::invalid_argument, "output '" + name + "' read before run()");
  const ValueDesc& v = program_.values[slot.value];
  HostTensor t(v.shape, v.dtype);
  staging_->invalidate();
  std::memcpy(t.data(), staging_->mapped() + slot.staging_offset, t.nbytes());
  return t;
}

std::vector<std::string> ExecutorImpl::input_names() const {
  std::vector<std::string> names;
  for (auto& s : inputs_) names.push_back(s.name);
  return names;
}

std::vector<std::string> ExecutorImpl::output_names() const {
  std::vector<std::string> names;
  for (auto& s : outputs_) names.push_back(s.name);
  return names;
}

Executor::Executor(Device device, const Graph& graph, const CompileOptions& options)
    : impl_(std::make_unique<ExecutorImpl>(std::move(device), graph, options)) {}
Executor::~Executor() = default;
Executor::Executor(Executor&&) noexcept = default;
Executor& Executor::operator=(Executor&&) noexcept = default;

void Executor::set_input(const std::string& name, const HostTensor& value) {
  impl_->set_input(name, value);
}
void Executor::run() { impl_->run(); }
HostTensor Executor::output(const std::string& name) const { return impl_->output(name); }

std::map<std::string, HostTensor> Executor::run(const std::map<std::string, HostTensor>& inputs) {
  for (auto& [name, value] : inputs) impl_->set_input(name, value);
  impl_->run();
  std::map<std::string, HostTensor> outputs;
  for (auto& name : impl_->output_names()) outputs.emplace(name, impl_->output(name));
  return outputs;
}

std::vector<OpTime> Executor::profile() const { return impl_->profile(); }
double Executor::last_gpu_microseconds() const { return impl_->last_gpu_microseconds(); }
ExecutorStats Executor::stats() const { return impl_->stats(); }
std::vector<std::string> Executor::input_names() const { return impl_->input_names(); }
std::vector<std::string> Executor::output_names() const { return impl_->output_names(); }

}  // namespace vkformer
