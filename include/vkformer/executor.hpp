#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "vkformer/device.hpp"
#include "vkformer/graph.hpp"

namespace vkformer {

struct CompileOptions {
  // Let activations whose lifetimes do not overlap share memory.
  bool reuse_memory = true;
  // Record GPU timestamps around every op (serializes the ops so each time is its own).
  bool profile = false;
  // Record two GPU timestamps around the whole recording (input uploads, every dispatch, output
  // downloads) without serializing anything; read with Executor::last_gpu_microseconds().
  bool timestamps = false;
};

struct OpTime {
  std::string op;  // the op's label
  double microseconds = 0;
  // What the op ran: its kernels' names in order ("matmul_wq_rows_q4_k_f32"; a kernel run twice
  // in a row named once, joined by '+'), its dispatches and the weight bytes they read (as
  // ExecutorStats::weight_bytes_read counts them), so a profile can be read per kernel and
  // weight type and as GB/s.
  std::string kernels;
  size_t dispatches = 0;
  uint64_t weight_bytes_read = 0;
};

// What one run() executes, counted from the recording (every run replays it). dispatches,
// pipeline_barriers and pipeline_binds are the vkCmdDispatch, vkCmdPipelineBarrier and
// vkCmdBindPipeline calls in the command buffer, so a Vulkan layer counting commands (such as
// ../shared/tools/vkcount) sees the same numbers per run.
struct ExecutorStats {
  size_t dispatches = 0;
  size_t barriers = 0;             // pipeline barriers between commands (more when profiling)
  size_t pipeline_barriers = 0;    // all of them: barriers + the one after earlier submissions
                                   // + the one before the host reads the outputs
  size_t pipeline_binds = 0;       // a pipeline is bound only where it changes
  // Bytes of tensors that no op of the graph writes (weights, tables, constants) that the
  // dispatches read: each dispatch counts its read-only bindings of them, with gathers (an
  // embedding's rows) counted by the rows they fetch. Weights that several dispatches bind count
  // once per dispatch.
  uint64_t weight_bytes_read = 0;
  size_t recordings = 0;           // how many times the command buffer was recorded
  size_t runs = 0;
  uint64_t activation_bytes = 0;   // size of the planned activation arena
  uint64_t unplanned_bytes = 0;    // what the activations would take without reuse
  uint64_t constant_bytes = 0;
  uint64_t staging_bytes = 0;
};

class ExecutorImpl;

// A graph compiled for one device: pipelines, memory plan and descriptor sets are created once
// and every dispatch is recorded once; run() replays the recording.
// Use one executor from one thread at a time; distinct executors may run at once, also on one
// device (README, "Threads"). set_input, run or output called while another thread is inside
// one of them throws Error(invalid_argument) instead of racing.
class Executor {
 public:
  Executor(Device device, const Graph& graph, const CompileOptions& options = {});
  ~Executor();
  Executor(Executor&&) noexcept;
  Executor& operator=(Executor&&) noexcept;

  // Copies into the input's staging area. Float inputs accept f32 or f16 data (converted).
  void set_input(const std::string& name, const HostTensor& value);
  void run();
  HostTensor output(const std::string& name) const;

  // set_input for each entry, run(), and every output by name.
  std::map<std::string, HostTensor> run(const std::map<std::string, HostTensor>& inputs);

  std::vector<OpTime> profile() const;  // from the last run; needs CompileOptions::profile
  // GPU time of the last run() from its two timestamps; needs CompileOptions::timestamps.
  // Negative before the first run.
  double last_gpu_microseconds() const;
  ExecutorStats stats() const;
  std::vector<std::string> input_names() const;
  std::vector<std::string> output_names() const;

 private:
  ExecutorImpl& impl() const;  // throws on a moved-from Executor
  std::unique_ptr<ExecutorImpl> impl_;
};

}  // namespace vkformer
