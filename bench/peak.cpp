// The peak probes: raw dispatches of the peak_fma and peak_copy kernels, outside any graph, so
// nothing but the kernel is timed. They use the library's internals (device, pipeline cache,
// allocator), as the tests do.
#include "peak.hpp"

#include "vulkan_loader.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>

#include "device_impl.hpp"
#include "kernel_table.hpp"
#include "vkformer/error.hpp"

namespace vkformer::bench {

namespace {

using kernels::Kernel;

// One binding of a dispatch: a byte range of an allocation.
struct Range {
  const Allocation* allocation;
  VkDeviceSize offset;  // relative to the allocation
  VkDeviceSize size;
};

struct DispatchDesc {
  std::vector<Range> bindings;
  std::array<uint32_t, 3> groups{1, 1, 1};
};

// Descriptor sets for a list of dispatches of one pipeline, a query pool for two timestamps,
// and a way to time them recorded together in one submission.
class TimedDispatches {
 public:
  TimedDispatches(DeviceImpl& dev, const vk::Pipeline& pipeline, std::vector<DispatchDesc> list,
                  std::vector<uint32_t> push)
      : dev_(dev), pipeline_(pipeline), list_(std::move(list)), push_(std::move(push)) {
    VkDevice d = dev_.core().device();
    uint32_t buffers = 0, texels = 0;
    for (auto& x : list_)
      for (uint32_t b = 0; b < x.bindings.size(); ++b) (is_texel(b) ? texels : buffers) += 1;
    std::vector<VkDescriptorPoolSize> sizes;
    if (buffers) sizes.push_back({VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, buffers});
    if (texels) sizes.push_back({VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER, texels});
    VkDescriptorPoolCreateInfo dpci{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
    dpci.maxSets = static_cast<uint32_t>(list_.size());
    dpci.poolSizeCount = static_cast<uint32_t>(sizes.size());
    dpci.pPoolSizes = sizes.data();
    dev_.core().check(vkCreateDescriptorPool(d, &dpci, nullptr, &pool_), "vkCreateDescriptorPool");
    std::vector<VkDescriptorSetLayout> layouts(list_.size(), pipeline_.set_layout);
    sets_.resize(list_.size());
    VkDescriptorSetAllocateInfo dsai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    dsai.descriptorPool = pool_;
    dsai.descriptorSetCount = static_cast<uint32_t>(sets_.size());
    dsai.pSetLayouts = layouts.data();
    dev_.core().check(vkAllocateDescriptorSets(d, &dsai, sets_.data()), "vkAllocateDescriptorSets");
    std::vector<VkDescriptorBufferInfo> infos;
    infos.reserve(buffers);
    views_.reserve(texels);
    std::vector<VkWriteDescriptorSet> writes;
    for (size_t i = 0; i < list_.size(); ++i)
      for (uint32_t b = 0; b < list_[i].bindings.size(); ++b) {
        const Range& r = list_[i].bindings[b];
        VkWriteDescriptorSet w{VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
        w.dstSet = sets_[i];
        w.dstBinding = b;
        w.descriptorCount = 1;
        if (is_texel(b)) {
          // vec4 texels of f32, the only kind the probes read
          VkBufferViewCreateInfo bvci{VK_STRUCTURE_TYPE_BUFFER_VIEW_CREATE_INFO};
          bvci.buffer = r.allocation->buffer();
          bvci.format = VK_FORMAT_R32G32B32A32_SFLOAT;
          bvci.offset = r.allocation->offset + r.offset;
          bvci.range = r.size;
          views_.push_back(VK_NULL_HANDLE);
          dev_.core().check(vkCreateBufferView(d, &bvci, nullptr, &views_.back()),
                            "vkCreateBufferView");
          w.descriptorType = VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER;
          w.pTexelBufferView = &views_.back();
        } else {
          infos.push_back({r.allocation->buffer(), r.allocation->offset + r.offset, r.size});
          w.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
          w.pBufferInfo = &infos.back();
        }
        writes.push_back(w);
      }
    vkUpdateDescriptorSets(d, static_cast<uint32_t>(writes.size()), writes.data(), 0, nullptr);
    VkQueryPoolCreateInfo qpci{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
    qpci.queryType = VK_QUERY_TYPE_TIMESTAMP;
    qpci.queryCount = 2;
    dev_.core().check(vkCreateQueryPool(d, &qpci, nullptr, &queries_), "vkCreateQueryPool");
  }
  ~TimedDispatches() {
    VkDevice d = dev_.core().device();
    vkDestroyQueryPool(d, queries_, nullptr);
    vkDestroyDescriptorPool(d, pool_, nullptr);
    for (VkBufferView v : views_) vkDestroyBufferView(d, v, nullptr);
  }
  TimedDispatches(const TimedDispatches&) = delete;
  TimedDispatches& operator=(const TimedDispatches&) = delete;

  bool is_texel(uint32_t binding) const {
    return binding < pipeline_.binding_kinds.size() &&
           pipeline_.binding_kinds[binding] == vk::BindingKind::uniform_texel_buffer;
  }

  // GPU microseconds of all dispatches, recorded back to back (they are independent).
  double run() {
    dev_.run_once([&](VkCommandBuffer cmd) {
      vkCmdResetQueryPool(cmd, queries_, 0, 2);
      vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline_.pipeline);
      if (!push_.empty())
        vkCmdPushConstants(cmd, pipeline_.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0,
                           static_cast<uint32_t>(push_.size() * 4), push_.data());
      vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries_, 0);
      for (size_t i = 0; i < list_.size(); ++i) {
        vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline_.layout, 0, 1,
                                &sets_[i], 0, nullptr);
        vkCmdDispatch(cmd, list_[i].groups[0], list_[i].groups[1], list_[i].groups[2]);
      }
      vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries_, 1);
    });
    uint64_t ticks[2] = {};
    dev_.core().check(vkGetQueryPoolResults(dev_.core().device(), queries_, 0, 2, sizeof ticks,
                                            ticks, 8,
                                            VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
                      "vkGetQueryPoolResults");
    const uint32_t bits = dev_.core().physical().queue_timestamp_bits;
    const uint64_t mask = bits >= 64 ? ~0ull : ((1ull << bits) - 1);
    return static_cast<double>(((ticks[1] & mask) - (ticks[0] & mask)) & mask) *
           dev_.info().timestamp_period_ns / 1000.0;
  }

 private:
  DeviceImpl& dev_;
  const vk::Pipeline& pipeline_;
  std::vector<DispatchDesc> list_;
  std::vector<uint32_t> push_;
  VkDescriptorPool pool_ = VK_NULL_HANDLE;
  std::vector<VkDescriptorSet> sets_;
  std::vector<VkBufferView> views_;
  VkQueryPool queries_ = VK_NULL_HANDLE;
};

const kernels::VariantEntry& variant(DeviceImpl& dev, Kernel k) {
  const kernels::VariantEntry* v = kernels::find_variant(k, DType::f32);
  if (!v) throw Error(ErrorCode::internal, "the peak kernels are missing from the manifest");
  dev.pipelines().check_supported(*v);
  return *v;
}

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

std::string fmt(const char* format, auto... args) {
  char buf[160];
  std::snprintf(buf, sizeof buf, format, args...);
  return buf;
}

void fma_probe(DeviceImpl& dev, const PeakOptions& o, Peak& peak) {
  const DeviceInfo& info = dev.info();
  const auto& v = variant(dev, Kernel::peak_fma);
  const uint64_t out_floats = 1u << 16;  // the kernel's one store per invocation wraps around
  auto out = dev.allocator().allocate(out_floats * 4, vk::MemoryKind::device, "peak_fma output");
  const std::vector<uint32_t> accs = o.quick ? std::vector<uint32_t>{2, 3, 4}
                                             : std::vector<uint32_t>{2, 3, 4, 6, 8, 12};
  const std::vector<uint32_t> wgs =
      o.quick ? std::vector<uint32_t>{64} : std::vector<uint32_t>{64, 256};
  const double target_us = o.target_ms * 1000;
  // Two grids: one that fills the largest GPUs several times over (an H100 holds ~270k resident
  // threads), and 256 workgroups, enough for any CPU's threads, where each workgroup costs a
  // task switch and fewer, longer ones measure faster.
  struct Config {
    uint32_t wg, groups, acc;
  };
  std::vector<Config> configs;
  for (uint32_t wg : wgs) {
    wg = std::min({wg, info.max_workgroup_invocations, info.max_workgroup_size[0]});
    for (uint32_t groups : {(1u << 20) / wg, 256u})
      for (uint32_t acc : accs)
        configs.push_back({wg, std::min(groups, info.max_workgroup_count[0]), acc});
  }
  for (const auto& [wg, groups, acc] : configs) {
    const vk::Pipeline& p = dev.pipelines().get(v, std::vector<uint32_t>{wg, acc});
    uint32_t iterations = 1;
    auto time = [&] {
      TimedDispatches t(dev, p, {{{{out.get(), 0, out_floats * 4}}, {groups, 1, 1}}},
                        {iterations, bits_of(0.9999999f), bits_of(1e-7f)});
      return t.run();
    };
    // Calibrate the loop so one run takes about target_ms: timer resolution, launch overhead
    // and a partial last wave then cost a negligible share. The first run is not timed: CPU
    // devices compile the shader on first use.
    time();
    double us = time();
    for (int step = 0; step < 16 && us < target_us * 0.7 && iterations < (1u << 20); ++step) {
      const double grow = us > 0 ? std::clamp(target_us / us, 1.5, 16.0) : 16.0;
      iterations = static_cast<uint32_t>(std::min<double>(std::ceil(iterations * grow), 1u << 20));
      us = time();
    }
    double best = us;
    for (int r = 0; r < o.repeats; ++r) best = std::min(best, time());
    const double flops = double(groups) * wg * 8.0 * iterations * acc * 4 * 2;
    PeakTrial trial{fmt("acc=%u wg=%u groups=%u iterations=%u", acc, wg, groups, iterations),
                    best, best > 0 ? flops / best / 1e3 : 0};
    peak.fma.push_back(trial);
    peak.fma_gflops = std::max(peak.fma_gflops, trial.value);
  }
}

struct CopyConfig {
  uint32_t wg, unroll, groups_per_chunk;  // 0 groups: one vec4 per invocation and unroll step
  bool blocked = false;                   // contiguous blocks per workgroup (peak_copy.comp)
};

// One copy kernel (buffer or texel reads) over `bytes` with each configuration.
std::vector<PeakTrial> copy_trials_reading(DeviceImpl& dev, uint64_t bytes,
                                           const std::vector<CopyConfig>& configs, int repeats,
                                           bool texel) {
  const DeviceInfo& info = dev.info();
  const auto& v = variant(dev, texel ? Kernel::peak_copy_texel : Kernel::peak_copy);
  uint64_t chunk_max = std::min<uint64_t>(info.max_storage_buffer_range, 1ull << 30);
  if (texel) chunk_max = std::min<uint64_t>(chunk_max, uint64_t(info.max_texel_buffer_elements) * 16);
  chunk_max &= ~uint64_t(255);
  bytes = std::max<uint64_t>(bytes & ~uint64_t(255), 256);
  auto src = dev.allocator().allocate(bytes, vk::MemoryKind::device, "peak_copy source");
  auto dst = dev.allocator().allocate(bytes, vk::MemoryKind::device, "peak_copy destination");
  dev.zero(*src, 0, bytes);
  std::vector<PeakTrial> trials;
  for (CopyConfig c : configs) {
    c.wg = std::min({c.wg, info.max_workgroup_invocations, info.max_workgroup_size[0]});
    const vk::Pipeline& p =
        dev.pipelines().get(v, std::vector<uint32_t>{c.wg, c.unroll, c.blocked ? 1u : 0u});
    // Equal chunks, so one push constant (n) serves every dispatch.
    const uint64_t chunk = std::min(chunk_max, bytes), chunks = bytes / chunk;
    const uint64_t timed_bytes = chunks * chunk;
    const uint32_t n = static_cast<uint32_t>(chunk / 16);
    const uint64_t per_group = uint64_t(c.wg) * c.unroll;
    const uint32_t groups = static_cast<uint32_t>(std::min<uint64_t>(
        c.groups_per_chunk ? c.groups_per_chunk : (n + per_group - 1) / per_group,
        info.max_workgroup_count[0]));
    std::vector<DispatchDesc> list;
    for (uint64_t i = 0; i < chunks; ++i)
      list.push_back({{{src.get(), i * chunk, chunk}, {dst.get(), i * chunk, chunk}}, {groups, 1, 1}});
    TimedDispatches t(dev, p, list, {n});
    double best = t.run();  // the first run also faults in the pages on CPU devices
    for (int r = 0; r < repeats; ++r) best = std::min(best, t.run());
    trials.push_back({fmt("read=%s layout=%s wg=%u unroll=%u groups=%u chunks=%zu bytes=%llu",
                          texel ? "texel" : "buffer", c.blocked ? "blocked" : "strided", c.wg,
                          c.unroll, groups,
                          list.size(), static_cast<unsigned long long>(timed_bytes)),
                      best, best > 0 ? 2.0 * double(timed_bytes) / best / 1e3 : 0});
  }
  return trials;
}

// Copies `bytes` with each configuration, reading through storage buffers and, where the device
// has texel buffers, through texels too; returns the trials (best time of `repeats` each).
std::vector<PeakTrial> copy_trials(DeviceImpl& dev, uint64_t bytes, const std::vector<CopyConfig>& configs,
                                   int repeats) {
  std::vector<PeakTrial> trials = copy_trials_reading(dev, bytes, configs, repeats, false);
  if (dev.info().max_texel_buffer_elements >= 16 &&
      dev.pipelines().supported(*kernels::find_variant(Kernel::peak_copy_texel, DType::f32)))
    for (auto& t : copy_trials_reading(dev, bytes, configs, repeats, true)) trials.push_back(t);
  return trials;
}

const std::vector<CopyConfig> kCopyConfigs = {
    {64, 1, 0},  {64, 4, 0},  {256, 1, 0},       {256, 4, 0},      {256, 4, 1024},
    {64, 8, 256}, {8, 8, 0, true}, {64, 4, 0, true}, {256, 4, 0, true}};
const std::vector<CopyConfig> kQuickCopyConfigs = {{64, 4, 0}, {256, 1, 0}, {256, 4, 0, true}};

void copy_probe(DeviceImpl& dev, const PeakOptions& o, Peak& peak) {
  const DeviceInfo& info = dev.info();
  // 2 x 512 MiB: beyond the caches of GPUs and of most CPUs (some server L3s hold hundreds of
  // MiB); --quick uses less. In chunks no larger than a binding may be.
  uint64_t bytes = o.quick ? (128ull << 20) : (512ull << 20);
  if (info.device_local_memory_bytes) bytes = std::min(bytes, info.device_local_memory_bytes / 4);
  if (info.max_memory_allocation_size) bytes = std::min(bytes, info.max_memory_allocation_size);
  peak.copy_bytes = bytes & ~uint64_t(255);
  for (auto& trial : copy_trials(dev, bytes, o.quick ? kQuickCopyConfigs : kCopyConfigs, o.repeats)) {
    peak.copy.push_back(trial);
    peak.copy_gbps = std::max(peak.copy_gbps, trial.value);
  }
}

}  // namespace

double copy_gbps_at(Device& device, uint64_t bytes, int repeats) {
  double best = 0;
  for (auto& t : copy_trials(device.impl(), bytes, kCopyConfigs, repeats)) best = std::max(best, t.value);
  return best;
}

Peak measure_peak(Device& device, const PeakOptions& options) {
  Peak peak;
  DeviceImpl& dev = device.impl();
  if (!dev.info().timestamps) {
    peak.error = "device '" + dev.info().name + "' has no timestamp queries";
    return peak;
  }
  try {
    // Twice over (once with --quick), some time apart: the best of both resists a moment of
    // contention on a shared machine.
    for (int pass = 0; pass < (options.quick ? 1 : 2); ++pass) fma_probe(dev, options, peak);
  } catch (const Error& e) {
    if (e.code() == ErrorCode::device_lost) throw;
    peak.error = std::string("fma probe: ") + e.what();
  }
  try {
    copy_probe(dev, options, peak);
  } catch (const Error& e) {
    if (e.code() == ErrorCode::device_lost) throw;
    peak.error += (peak.error.empty() ? "" : "; ") + std::string("copy probe: ") + e.what();
  }
  return peak;
}

}  // namespace vkformer::bench
