#pragma once
// The compiled form of a Graph (vkformer::Executor's implementation), in three files:
//   executor_build.cpp   lowering the graph to dispatches and planning memory;
//   executor_record.cpp  descriptor sets and the one recorded command buffer;
//   executor.cpp         inputs, outputs and run(), and the public Executor.
#include <memory>
#include <string>
#include <vector>

#include "device_impl.hpp"
#include "exclusive_use.hpp"
#include "graph_impl.hpp"
#include "program.hpp"
#include "vkformer/executor.hpp"

namespace vkformer {

// What the executor's barriers order: every command it records is a compute dispatch or a copy.
inline constexpr VkPipelineStageFlags kComputeTransfer =
    VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
inline constexpr VkAccessFlags kComputeTransferAccess =
    VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
    VK_ACCESS_TRANSFER_WRITE_BIT;

class ExecutorImpl {
 public:
  ExecutorImpl(Device device, const Graph& graph, const CompileOptions& options);
  ~ExecutorImpl();

  ExclusiveUse in_use{"Executor"};  // held by the Executor calls that touch staging or the queue

  void set_input(const std::string& name, const HostTensor& value);
  void run();
  HostTensor output(const std::string& name) const;
  std::vector<OpTime> profile() const { return profile_; }
  double last_gpu_microseconds() const;
  ExecutorStats stats() const { return stats_; }
  const Program& program() const { return program_; }  // what was lowered (tests: which kernels)
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
  VkBufferView texel_view(const Dispatch& d, uint32_t binding, const Location& loc,
                          vk::BindingKind kind);
  void record();
  // The Vulkan objects made here (not the memory, which frees itself): by the destructor, and by
  // a constructor that fails part-way.
  void release_vulkan_objects();
  Location locate(uint32_t value) const;
  Location locate(const Binding& binding) const;  // the binding's window of its value
  const IoSlot& find_slot(const std::vector<IoSlot>& slots, const std::string& name,
                          const char* what) const;

  std::shared_ptr<DeviceImpl> dev_;
  CompileOptions options_;
  Program program_;
  std::vector<uint64_t> offsets_;  // per root value: offset in its arena or constant block
  std::vector<uint32_t> arena_of_;  // per root value: index into arenas_ or constants_
  // Activations and constants each in as few allocations as the device's largest allows.
  std::vector<std::shared_ptr<Allocation>> arenas_, constants_;
  std::shared_ptr<Allocation> staging_;
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
  std::vector<OpTime> profiled_ops_;      // per pair: the op's kernels, dispatches, weight bytes
  std::vector<OpTime> profile_;
  VkQueryPool run_timestamps_ = VK_NULL_HANDLE;  // CompileOptions::timestamps: [begin, end]
  double last_gpu_us_ = -1;
  ExecutorStats stats_;
  bool has_run_ = false;
};

}  // namespace vkformer
