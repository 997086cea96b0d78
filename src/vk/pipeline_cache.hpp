#pragma once
#include "vulkan_loader.hpp"

#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "device_core.hpp"
#include "kernel_table.hpp"
#include "spirv_reflect.hpp"

namespace vkformer::vk {

constexpr uint32_t kMaxPushConstantBytes = 128;  // the minimum every Vulkan device guarantees

struct Pipeline {
  VkPipeline pipeline = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  uint32_t binding_count = 0;
  std::vector<BindingKind> binding_kinds;  // per binding, reflected from the SPIR-V
};

VkDescriptorType descriptor_type(BindingKind kind);

// Compute pipelines per (kernel variant, specialization constants), created on first use.
// Specialization constant i gets constant_id i; values are 32-bit words.
class PipelineCache {
 public:
  explicit PipelineCache(std::shared_ptr<DeviceCore> core);
  ~PipelineCache();
  PipelineCache(const PipelineCache&) = delete;
  PipelineCache& operator=(const PipelineCache&) = delete;

  const Pipeline& get(const kernels::VariantEntry& variant, std::span<const uint32_t> spec);
  // Throws unsupported if the device or the shader compiler cannot run this variant.
  void check_supported(const kernels::VariantEntry& variant) const;
  bool supported(const kernels::VariantEntry& variant) const;

  // Every pipeline created so far: its variant's name ("attention_flash_emu_f16") and its
  // specialization constants. Tests read which configuration an executor took from these.
  struct Created {
    std::string variant;
    std::vector<uint32_t> spec;
  };
  std::vector<Created> created();

 private:
  struct Module {
    VkShaderModule module = VK_NULL_HANDLE;
    VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
    VkPipelineLayout layout = VK_NULL_HANDLE;
    uint32_t binding_count = 0;
    std::vector<BindingKind> binding_kinds;
  };
  const Module& module_for(const kernels::VariantEntry& variant);

  std::shared_ptr<DeviceCore> core_;
  std::mutex mutex_;
  std::map<const kernels::VariantEntry*, Module> modules_;
  std::map<std::pair<const kernels::VariantEntry*, std::vector<uint32_t>>, Pipeline> pipelines_;
};

}  // namespace vkformer::vk
