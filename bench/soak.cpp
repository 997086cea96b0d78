// vkformer_soak (`make soak`): does memory stay flat when an app keeps using vkformer? It replays
// one compiled executor 10,000 times (inputs set and outputs read back each time, as an app does)
// and generates 2,000 tokens with a small seq2seq model, then compares host and device memory
// after warm-up with memory at the end. Exit status 1 if the host's resident set grew by more than
// the tolerance or device memory grew at all, or if a replay stopped reproducing its first result.
#include "vulkan_loader.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "device_impl.hpp"
#include "synthetic_weights.hpp"
#include "vkformer/vkformer.hpp"

namespace {

using namespace vkformer;
using Clock = std::chrono::steady_clock;

constexpr int kReplays = 10'000;
constexpr int kTokens = 2'000;
constexpr int kTokensPerCall = 100;  // generate() in 20 calls; max_len bounds one call
constexpr int kWarmupRuns = 200;
constexpr double kMiB = 1024.0 * 1024.0;
// Host memory may move a little without a leak (malloc arenas, the driver's caches). A leak of
// 400 bytes per replay, injected to try this, read +2.2 MiB (malloc first reuses free space).
// Device memory has no tolerance: the allocator's count is exact.
constexpr double kHostToleranceMiB = 2.0;

// VmRSS (resident now) and VmHWM (the peak) from /proc/self/status, in KiB.
struct HostMemory {
  long rss_kib = -1, hwm_kib = -1;
};

HostMemory host_memory() {
  HostMemory m;
  std::ifstream status("/proc/self/status");
  std::string key;
  long value = 0;
  while (status >> key) {
    if (key == "VmRSS:" && status >> value) m.rss_kib = value;
    else if (key == "VmHWM:" && status >> value) m.hwm_kib = value;
  }
  return m;
}

struct Snapshot {
  std::string when;
  HostMemory host;
  std::optional<uint64_t> heap_usage;  // VK_EXT_memory_budget, summed over heaps
  uint64_t held = 0;                   // device-local memory vkformer's allocator holds
  uint64_t in_use = 0;                 // bytes it has handed out from its shared blocks
  size_t blocks = 0;                   // its shared blocks (it never frees one)
};

// Device memory twice: as the driver counts it (VK_EXT_memory_budget's heap usage, where the
// device has the extension; lavapipe in Mesa 22.3 does not) and as vkformer's allocator does.
class MemoryProbe {
 public:
  explicit MemoryProbe(Device& device) : device_(device) {
    // Once, here: the first vkEnumerateDeviceExtensionProperties call costs the host ~1 MiB,
    // which would read as growth if it fell between two snapshots.
    VkPhysicalDevice physical = device.impl().core().physical_handle();
    uint32_t n = 0;
    vkEnumerateDeviceExtensionProperties(physical, nullptr, &n, nullptr);
    std::vector<VkExtensionProperties> extensions(n);
    vkEnumerateDeviceExtensionProperties(physical, nullptr, &n, extensions.data());
    for (auto& e : extensions)
      has_budget_ |= std::string(e.extensionName) == VK_EXT_MEMORY_BUDGET_EXTENSION_NAME;
  }

  bool has_budget() const { return has_budget_; }

  Snapshot take(const std::string& when) const {
    auto& allocator = device_.impl().allocator();
    return {when, host_memory(), heap_usage(), allocator.device_bytes_held(), allocator.bytes_in_use(),
            allocator.block_count()};
  }

 private:
  std::optional<uint64_t> heap_usage() const {
    if (!has_budget_) return std::nullopt;
    VkPhysicalDeviceMemoryBudgetPropertiesEXT budget{
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
    VkPhysicalDeviceMemoryProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2};
    props.pNext = &budget;
    vkGetPhysicalDeviceMemoryProperties2(device_.impl().core().physical_handle(), &props);
    uint64_t used = 0;
    for (uint32_t h = 0; h < props.memoryProperties.memoryHeapCount; ++h) used += budget.heapUsage[h];
    return used;
  }

  Device& device_;
  bool has_budget_ = false;
};

// A small chain as an app would compile once: y = layer_norm(softmax(x·Wᵀ + b) + x).
class Chain {
 public:
  static constexpr int64_t kBatch = 4, kSeq = 32, kDim = 128;

  explicit Chain(Device& device) : executor_(device, build()) {
    for (uint32_t i = 0; i < inputs_.size(); ++i) inputs_[i] = ref::uniform_values(kBatch * kSeq * kDim, 1.0f, 100 + i);
  }

  // One replay with input i % 4, built afresh and read back as an app would. Returns false when
  // the output differs from what this input gave the first time (replays must be identical).
  bool run(int i) {
    const auto& x = inputs_[i % inputs_.size()];
    executor_.set_input("x", HostTensor::from_f32({kBatch, kSeq, kDim}, x));
    executor_.run();
    std::vector<float> y = executor_.output("y").to_f32();
    auto& first = first_outputs_[i % inputs_.size()];
    if (first.empty()) first = y;
    return y == first;
  }

  ExecutorStats stats() const { return executor_.stats(); }

 private:
  static Graph build() {
    Graph g;
    Tensor x = g.input("x", {kBatch, kSeq, kDim});
    const float bound = 1.0f / std::sqrt(static_cast<float>(kDim));
    Tensor w = g.constant("w", HostTensor::from_f32({kDim, kDim}, ref::uniform_values(kDim * kDim, bound, 1)));
    Tensor b = g.constant("b", HostTensor::from_f32({kDim}, ref::uniform_values(kDim, 0.1f, 2)));
    Tensor gamma = g.constant("gamma", HostTensor::from_f32({kDim}, ref::uniform_values(kDim, 0.1f, 3)));
    Tensor beta = g.constant("beta", HostTensor::from_f32({kDim}, ref::uniform_values(kDim, 0.1f, 4)));
    g.output("y", g.add_layer_norm(g.softmax(g.linear(x, w, b)), x, gamma, beta));
    return g;
  }

  Executor executor_;
  std::vector<std::vector<float>> inputs_ = std::vector<std::vector<float>>(4);
  std::vector<std::vector<float>> first_outputs_ = std::vector<std::vector<float>>(4);
};

// The paper's seq2seq model at the size `vkformer demo` runs, with synthetic weights; every call generates
// kTokensPerCall tokens (no end token) from one of four source sentences of one length, so all
// calls replay the same compiled decoder.
class Generator {
 public:
  explicit Generator(Device& device) : model_(make(device)) {
    std::mt19937 rng(7);
    for (auto& s : sources_)
      for (auto& v : s) v = static_cast<int32_t>(3 + rng() % (config().src_vocab - 3));
  }

  // One generate() call; false when a source gave other tokens than the first time.
  bool generate(int call, size_t* tokens) {
    GenerateOptions o;
    o.max_new_tokens = kTokensPerCall;
    o.eos = -1;
    auto out = model_.generate(sources_[call % sources_.size()], o);
    *tokens += out.size();
    auto& first = first_tokens_[call % sources_.size()];
    if (first.empty()) first = out;
    return out == first;
  }

  size_t compiled_graphs() const { return model_.compiled_graphs(); }

 private:
  static ModelConfig config() { return ref::demo_seq2seq_config(); }
  static Model make(Device& device) {
    return Model::from_tensors(device, config(), ref::synthetic_weights(config()));
  }

  Model model_;
  std::vector<std::vector<int32_t>> sources_ = std::vector<std::vector<int32_t>>(4, std::vector<int32_t>(12));
  std::vector<std::vector<int32_t>> first_tokens_ = std::vector<std::vector<int32_t>>(4);
};

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string mib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f MiB", bytes / kMiB);
  return text;
}

void print_table(const std::vector<Snapshot>& rows) {
  std::printf("\n%-26s %11s %11s %12s %12s %12s %6s\n", "", "host VmRSS", "host VmHWM", "device heap",
              "device held", "handed out", "blocks");
  for (auto& r : rows)
    std::printf("%-26s %11s %11s %12s %12s %12s %6zu\n", r.when.c_str(), mib(r.host.rss_kib * 1024.0).c_str(),
                mib(r.host.hwm_kib * 1024.0).c_str(),
                r.heap_usage ? mib(static_cast<double>(*r.heap_usage)).c_str() : "n/a",
                mib(static_cast<double>(r.held)).c_str(), mib(static_cast<double>(r.in_use)).c_str(), r.blocks);
}

}  // namespace

int main() {
  try {
    auto t_start = Clock::now();
    Device device = Device::open();
    const DeviceInfo& info = device.info();
    std::printf("vkformer soak on %s (%s, %s)\n", info.name.c_str(), info.driver_name.c_str(),
                info.driver_info.c_str());
    MemoryProbe probe(device);
    Chain chain(device);
    Generator generator(device);

    // Warm-up: the first runs compile pipelines and fill staging areas and the driver's caches.
    bool same = true;
    size_t tokens = 0;
    for (int i = 0; i < kWarmupRuns; ++i) same &= chain.run(i);
    for (int call = 0; call < 4; ++call) same &= generator.generate(call, &tokens);
    std::vector<Snapshot> rows{probe.take("start (after warm-up)")};

    auto t0 = Clock::now();
    for (int i = 0; i < kReplays; ++i) {
      same &= chain.run(i);
      if (i + 1 == kReplays / 2) rows.push_back(probe.take("after 5,000 replays"));
    }
    double replay_s = seconds_since(t0);
    rows.push_back(probe.take("after 10,000 replays"));

    tokens = 0;
    auto t1 = Clock::now();
    for (int call = 0; tokens < kTokens; ++call) {
      same &= generator.generate(call, &tokens);
      if (tokens == kTokens / 2) rows.push_back(probe.take("after 1,000 tokens"));
    }
    double generate_s = seconds_since(t1);
    rows.push_back(probe.take("end (after 2,000 tokens)"));

    ExecutorStats st = chain.stats();
    std::printf("executor: %d replays of one recording (%zu dispatches; %zu recording), %.1f s, %.2f ms each\n",
                kReplays, st.dispatches, st.recordings, replay_s, 1000.0 * replay_s / kReplays);
    std::printf("generation: %zu tokens in %d-token calls, %.1f s, %.2f ms per token (%zu graphs compiled)\n",
                tokens, kTokensPerCall, generate_s, 1000.0 * generate_s / static_cast<double>(tokens),
                generator.compiled_graphs());
    print_table(rows);

    const Snapshot &start = rows.front(), &end = rows.back();
    double host_growth = (end.host.rss_kib - start.host.rss_kib) / 1024.0;
    bool host_ok = start.host.rss_kib >= 0 && end.host.rss_kib >= 0 && host_growth <= kHostToleranceMiB;
    bool heap_ok = !start.heap_usage || *end.heap_usage <= *start.heap_usage;
    bool device_ok =
        heap_ok && end.held <= start.held && end.in_use <= start.in_use && end.blocks <= start.blocks;
    std::printf("\nhost RSS growth: %+.2f MiB (tolerance %.1f MiB): %s\n", host_growth, kHostToleranceMiB,
                host_ok ? "ok" : "FAILED");
    std::printf("device memory growth (tolerance 0): heap usage %s, held %+lld bytes, handed out %+lld bytes, "
                "%+lld blocks: %s\n",
                start.heap_usage ? mib(static_cast<double>(*end.heap_usage) - static_cast<double>(*start.heap_usage)).c_str()
                                 : "n/a (no VK_EXT_memory_budget)",
                static_cast<long long>(end.held) - static_cast<long long>(start.held),
                static_cast<long long>(end.in_use) - static_cast<long long>(start.in_use),
                static_cast<long long>(end.blocks) - static_cast<long long>(start.blocks),
                device_ok ? "ok" : "FAILED");
    std::printf("every replay and generation reproduced its first result: %s\n", same ? "yes" : "NO");
    std::printf("total time %.1f s\n", seconds_since(t_start));
    return host_ok && device_ok && same ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vkformer_soak: %s\n", e.what());
    return 1;
  }
}
