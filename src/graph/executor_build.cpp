// Executor compilation, first half: lower every live node to dispatches, then plan where each
// value lives (activation arena with reuse, constant block uploaded once, staging for I/O).
#include <algorithm>
#include <cstring>
#include <set>

#include "executor_impl.hpp"
#include "lowering.hpp"
#include "memory_planner.hpp"

namespace vkformer {

namespace {

// Each value's readers among the nodes, the outputs and the pinned values.
std::vector<uint32_t> count_uses(const GraphImpl& g, const std::vector<Node>& nodes) {
  std::vector<uint32_t> uses(g.values.size(), 0);
  for (const Node& n : nodes)
    for (uint32_t v : n.inputs) ++uses[v];
  for (const auto& [name, v] : g.outputs) ++uses[v];
  for (const auto& [value, target] : g.pinned) ++uses[value];
  return uses;
}

// A decoding step's rope_kv_cache (one new row, caches in q's type, no slots or rotation) whose
// rotated q only an attention reads, with k and v its caches after the write: that attention's
// kernel rotates q and k and writes the caches itself (src/ops/attention.cpp, or it emits the
// rope_kv_cache dispatch where its kernel cannot), one dispatch fewer per decoded layer.
void fuse_rope_into_attention(const GraphImpl& g, std::vector<Node>& nodes) {
  const std::vector<uint32_t> uses = count_uses(g, nodes);
  auto producer = [&](uint32_t v) -> Node& { return nodes[g.values[v].producer]; };
  for (Node& n : nodes) {
    if (n.kind != OpKind::attention) continue;
    AttentionAttrs& a = std::get<AttentionAttrs>(n.attrs);
    Node& rope = producer(n.inputs[0]);
    if (a.has_kv_slot || rope.kind != OpKind::rope_kv_cache) continue;
    RopeKvCacheAttrs& r = std::get<RopeKvCacheAttrs>(rope.attrs);
    const uint32_t q = rope.output, cache_k = rope.inputs[3], cache_v = rope.inputs[4];
    auto cache_written = [&](uint32_t v, uint32_t cache) {
      const Node& after = producer(v);
      return after.kind == OpKind::cache_after && after.inputs[0] == q && after.inputs[1] == cache &&
             uses[v] == 1;
    };
    if (r.has_cache_slot || r.rotate_k || r.rotate_v || r.in_attention || g.values[q].shape[2] != 1 ||
        g.values[cache_k].dtype != g.values[q].dtype || g.values[cache_v].dtype != g.values[q].dtype ||
        uses[q] != 3 || !cache_written(n.inputs[1], cache_k) || !cache_written(n.inputs[2], cache_v))
      continue;
    r.in_attention = true;
    a.rope_kv = r;
    n.inputs.insert(n.inputs.end(), rope.inputs.begin(), rope.inputs.begin() + 6);
  }
}

// Such an attention (rope_kv folded in) whose output only a concat_heads reads (a view: one
// query row), and that only the output projection with its residual and no other fusion: the
// projection's node becomes the attention with W_O and the residual as further inputs, so that
// its kernel multiplies each KV head's rows by their slice of W_O (src/ops/attention.cpp, which
// emits the linear apart where its kernel cannot), one dispatch fewer per decoded layer. The
// attention and concat_heads nodes are left without readers and are not lowered.
void fuse_out_proj_into_attention(const GraphImpl& g, std::vector<Node>& nodes) {
  const std::vector<uint32_t> uses = count_uses(g, nodes);
  auto producer = [&](uint32_t v) -> const Node& { return nodes[g.values[v].producer]; };
  for (Node& n : nodes) {
    if (n.kind != OpKind::matmul || n.inputs.size() != 3) continue;  // a, W, residual
    const MatmulAttrs& m = std::get<MatmulAttrs>(n.attrs);
    if (!m.transpose_b || !m.has_residual || m.has_bias || m.has_norm || m.gated || m.alpha != 1.0f ||
        m.activation != Activation::none)
      continue;
    const Node& heads = producer(n.inputs[0]);
    if (heads.kind != OpKind::concat_heads || uses[n.inputs[0]] != 1 || uses[heads.inputs[0]] != 1) continue;
    const Node& attention = producer(heads.inputs[0]);
    if (attention.kind != OpKind::attention || !std::get<AttentionAttrs>(attention.attrs).rope_kv) continue;
    Node fused = attention;
    std::get<AttentionAttrs>(fused.attrs).out_proj = true;
    fused.inputs.push_back(n.inputs[1]);
    fused.inputs.push_back(n.inputs[2]);
    fused.output = n.output;
    n = std::move(fused);
  }
}

}  // namespace

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
  try {
    build_program(graph.impl());
    plan_memory_and_upload();
    create_descriptors();
    record();
  } catch (...) {
    // No destructor runs for an object whose constructor throws: free what was made so far.
    release_vulkan_objects();
    throw;
  }
}

void ExecutorImpl::build_program(const GraphImpl& g) {
  const size_t nv = g.values.size();
  program_.values.resize(nv);
  // Externals the graph writes in place: output_to targets and KV caches. Their contents change
  // during a run, so nothing may read them later than its node's own place through a view.
  std::set<uint32_t> written;
  for (auto [value, target] : g.pinned) written.insert(target);
  for (const Node& n : g.nodes) {
    if (n.kind == OpKind::update_cache || n.kind == OpKind::rope_shift) written.insert(n.inputs[0]);
    if (n.kind == OpKind::rope_kv_cache) {  // inputs q, k, v, cache_k, cache_v, position
      written.insert(n.inputs[3]);
      written.insert(n.inputs[4]);
    }
  }
  // The value whose bytes v lives in (aliases of values before v are already set).
  auto storage_of = [&](uint32_t v) {
    for (;;) {
      if (auto it = g.pinned.find(v); it != g.pinned.end()) v = it->second;
      else if (program_.values[v].alias_of != kNoValue) v = program_.values[v].alias_of;
      else return v;
    }
  };
  // A view starts where a storage or texel binding may start (one of its own, or a kernel's).
  const DeviceInfo& info = dev_->info();
  const uint64_t view_align = std::max<uint64_t>(
      {4, info.min_storage_buffer_offset_alignment, info.min_texel_buffer_offset_alignment});
  std::vector<bool> is_view(nv, false);
  for (uint32_t v = 0; v < nv; ++v) {
    const Node& producer = g.nodes[g.values[v].producer];
    ValueDesc& d = program_.values[v];
    d.shape = g.values[v].shape;
    d.dtype = g.values[v].dtype;
    int64_t first = 0;
    // Reshapes and head copies that move nothing are views, unless they read an external that
    // the graph writes: then a copy keeps its contents as they are at the node's place. (Integer
    // reshapes stay views: the copy kernel is for floats, and no op writes integers in place.)
    if (g.view_of_input(producer, &first) && dtype_bytes(d.dtype, first) % view_align == 0 &&
        !(written.count(storage_of(producer.inputs[0])) &&
          (producer.kind != OpKind::reshape || is_float(d.dtype)))) {
      is_view[v] = true;
      d.alias_of = producer.inputs[0];
      d.alias_offset = dtype_bytes(d.dtype, first);
      continue;
    }
    switch (producer.kind) {
      case OpKind::input: d.kind = ValueKind::input; break;
      case OpKind::constant: d.kind = ValueKind::constant; break;
      case OpKind::external: d.kind = ValueKind::external; break;
      // The updated cache is the cache: same bytes, written in place by the op's dispatch.
      case OpKind::update_cache:
      case OpKind::rope_shift: d.alias_of = producer.inputs[0]; break;
      case OpKind::cache_after: d.alias_of = producer.inputs[1]; break;
      default: d.kind = ValueKind::activation; break;
    }
  }
  for (auto [value, target] : g.pinned) program_.values[value].alias_of = target;
  program_.externals = g.externals;
  for (auto& n : g.nodes) program_.node_labels.push_back(n.label);

  // A KV-cache write whose rows are split from a packed projection reads them where they are,
  // so the split's copy is only made for its other consumers, if any. Not where the projection
  // lives in a written external: the copy fixes its contents at the split's place.
  std::vector<Node> nodes = g.nodes;
  for (Node& n : nodes) {
    if (n.kind != OpKind::update_cache) continue;
    const Node& split = g.nodes[g.values[n.inputs[1]].producer];
    if (split.kind != OpKind::split_heads || written.count(storage_of(split.inputs[0]))) continue;
    n.inputs[1] = split.inputs[0];
    n.attrs = UpdateCacheAttrs{true, std::get<SplitHeadsAttrs>(split.attrs).offset};
  }

  fuse_rope_into_attention(g, nodes);
  fuse_out_proj_into_attention(g, nodes);

  // Only nodes that an output (or a write into an external tensor) depends on are lowered.
  std::vector<bool> needed(nv, false);
  for (auto& [name, v] : g.outputs) needed[v] = true;
  for (auto [value, target] : g.pinned) needed[value] = true;
  // A cache write changes an external tensor: it runs whether or not anything reads its result.
  for (const Node& n : nodes)
    if (n.kind == OpKind::update_cache || n.kind == OpKind::rope_kv_cache || n.kind == OpKind::rope_shift)
      needed[n.output] = true;
  std::vector<bool> live(nodes.size(), false);
  for (size_t i = nodes.size(); i-- > 0;) {
    const Node& n = nodes[i];
    if (!needed[n.output]) continue;
    live[i] = true;
    for (uint32_t in : n.inputs) needed[in] = true;
  }
  for (auto& [v, t] : g.constants)
    if (needed[v]) program_.constants.emplace(v, t);

  const OpRegistry& ops = builtin_ops();
  for (uint32_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    if (!live[i]) continue;
    if (n.kind == OpKind::input || n.kind == OpKind::constant || n.kind == OpKind::external ||
        is_view[n.output])
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
      const uint64_t limit = dev_->tuning().max_binding_bytes;
      if (b.window_bytes && b.window_offset + b.window_bytes > v.bytes())
        throw Error(ErrorCode::internal,
                    program_.node_labels[program_.dispatches[i].node] + ": a binding window [" +
                        std::to_string(b.window_offset) + ", +" + std::to_string(b.window_bytes) +
                        ") lies outside its tensor of " + std::to_string(v.bytes()) + " bytes");
      if (b.bytes(v) > limit)
        throw Error(ErrorCode::unsupported,
                    program_.node_labels[program_.dispatches[i].node] + ": tensor " +
                        v.shape.str() + " " + std::string(dtype_name(v.dtype)) + " takes " +
                        std::to_string(v.bytes()) + " bytes, more than device '" + info.name +
                        "' can bind (maxStorageBufferRange " + std::to_string(limit) +
                        "), and this op cannot split it into windows");
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
  // Beyond the device's largest allocation, the arena becomes several (plan_arenas).
  const uint64_t cap = dev_->allocator().max_allocation();
  const ArenaPlan plan = plan_arenas(lifetimes, align, options_.reuse_memory, cap);
  offsets_.assign(nv, 0);
  arena_of_.assign(nv, 0);
  for (size_t i = 0; i < planned.size(); ++i) {
    offsets_[planned[i]] = plan.offsets[i];
    arena_of_[planned[i]] = plan.arena[i];
  }
  stats_.activation_bytes = 0;
  for (uint64_t total : plan.totals) {
    arenas_.push_back(
        dev_->allocator().allocate(total, vk::MemoryKind::device, "activation arena"));
    stats_.activation_bytes += total;
  }
  stats_.unplanned_bytes = unplanned;

  // Constants live for the whole run: one after the other, in as many blocks as they need.
  std::vector<Lifetime> constant_lifetimes;
  for (uint32_t v : constant_values) constant_lifetimes.push_back({program_.values[v].bytes(), 0, 0});
  const ArenaPlan cplan = plan_arenas(constant_lifetimes, align, false, cap);
  for (size_t i = 0; i < constant_values.size(); ++i) {
    offsets_[constant_values[i]] = cplan.offsets[i];
    arena_of_[constant_values[i]] = cplan.arena[i];
  }
  uint64_t const_total = 0;
  for (uint32_t block = 0; block < cplan.totals.size(); ++block) {
    const uint64_t total = cplan.totals[block];
    constants_.push_back(
        dev_->allocator().allocate(total, vk::MemoryKind::device, "graph constants"));
    auto upload = dev_->allocator().allocate(total, vk::MemoryKind::staging, "constant upload");
    for (size_t i = 0; i < constant_values.size(); ++i) {
      if (cplan.arena[i] != block) continue;
      const HostTensor& t = program_.constants.at(constant_values[i]);
      std::memcpy(upload->mapped() + cplan.offsets[i], t.data(), t.nbytes());
    }
    upload->flush();
    const Allocation& dst = *constants_.back();
    dev_->run_once([&](VkCommandBuffer cmd) {
      VkBufferCopy region{upload->offset, dst.offset, total};
      vkCmdCopyBuffer(cmd, upload->buffer(), dst.buffer(), 1, &region);
    });
    const_total += total;
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

ExecutorImpl::Location ExecutorImpl::locate(const Binding& binding) const {
  Location loc = locate(binding.value);
  if (binding.window_bytes) {
    loc.offset += binding.window_offset;
    loc.size = binding.window_bytes;
  }
  return loc;
}

ExecutorImpl::Location ExecutorImpl::locate(uint32_t value) const {
  uint32_t r = program_.root(value);
  const ValueDesc& root = program_.values[r];
  Location loc;
  loc.size = program_.values[value].bytes();
  VkDeviceSize view_offset = 0;
  for (uint32_t v = value; v != r; v = program_.values[v].alias_of)
    view_offset += program_.values[v].alias_offset;
  switch (root.kind) {
    case ValueKind::activation:
    case ValueKind::input:
      loc.allocation = arenas_.at(arena_of_[r]).get();
      loc.offset = loc.allocation->offset + offsets_[r];
      break;
    case ValueKind::constant:
      loc.allocation = constants_.at(arena_of_[r]).get();
      loc.offset = loc.allocation->offset + offsets_[r];
      break;
    case ValueKind::external: {
      const auto& a = program_.externals.at(r).allocation();
      loc.allocation = a.get();
      loc.offset = a->offset;
      break;
    }
  }
  loc.offset += view_offset;
  return loc;
}

}  // namespace vkformer
