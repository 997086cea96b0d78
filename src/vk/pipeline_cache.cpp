#include "pipeline_cache.hpp"

#include <string>

#include "spirv_reflect.hpp"
#include "vkformer/error.hpp"

namespace vkformer::vk {

VkDescriptorType descriptor_type(BindingKind kind) {
  return is_texel_buffer(kind) ? VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER
                               : VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
}

PipelineCache::PipelineCache(std::shared_ptr<DeviceCore> core) : core_(std::move(core)) {}

PipelineCache::~PipelineCache() {
  VkDevice dev = core_->device();
  for (auto& [key, p] : pipelines_) vkDestroyPipeline(dev, p.pipeline, nullptr);
  for (auto& [key, m] : modules_) {
    vkDestroyPipelineLayout(dev, m.layout, nullptr);
    vkDestroyDescriptorSetLayout(dev, m.set_layout, nullptr);
    vkDestroyShaderModule(dev, m.module, nullptr);
  }
}

static std::string missing_features(const kernels::VariantEntry& v, const DeviceCore& core) {
  using namespace kernels;
  std::string s;
  auto need = [&](uint32_t bit, bool have, const char* what) {
    if ((v.features & bit) && !have) s += s.empty() ? what : std::string(", ") + what;
  };
  need(Feature::storage_16bit, core.storage_16bit, "16-bit storage buffers");
  need(Feature::fp16_arith, core.float16, "float16 arithmetic");
  need(Feature::subgroup_arith, core.info().subgroup_arithmetic, "subgroup arithmetic");
  need(Feature::subgroup_shuffle, core.info().subgroup_shuffle, "subgroup shuffles");
  need(Feature::coopmat_nv, core.coopmat_nv, "VK_NV_cooperative_matrix");
  need(Feature::coopmat_khr, core.coopmat_khr, "VK_KHR_cooperative_matrix");
  need(Feature::integer_dot, core.integer_dot, "VK_KHR_shader_integer_dot_product");
  return s;
}

bool PipelineCache::supported(const kernels::VariantEntry& v) const {
  return v.spirv && missing_features(v, *core_).empty();
}

void PipelineCache::check_supported(const kernels::VariantEntry& v) const {
  if (!v.spirv)
    throw Error(ErrorCode::unsupported,
                std::string("kernel ") + v.name + " was not built: " + v.missing);
  std::string missing = missing_features(v, *core_);
  if (!missing.empty())
    throw Error(ErrorCode::unsupported, std::string("kernel ") + v.name + " needs " + missing +
                                            ", which device '" + core_->info().name + "' lacks");
}

const PipelineCache::Module& PipelineCache::module_for(const kernels::VariantEntry& v) {
  auto it = modules_.find(&v);
  if (it != modules_.end()) return it->second;
  check_supported(v);
  VkDevice dev = core_->device();
  Module m;
  SpirvLayout layout = reflect_spirv(v.spirv, v.words);
  if (!layout.valid)
    throw Error(ErrorCode::vulkan, std::string("kernel ") + v.name + ": embedded SPIR-V is invalid");
  m.binding_count = layout.binding_count;
  m.binding_kinds = layout.kinds;

  // Until the module is in modules_ (where the destructor finds it), a failure frees its parts.
  struct Partial {
    VkDevice dev;
    Module* m;
    ~Partial() {
      if (!m) return;
      vkDestroyPipelineLayout(dev, m->layout, nullptr);
      vkDestroyDescriptorSetLayout(dev, m->set_layout, nullptr);
      vkDestroyShaderModule(dev, m->module, nullptr);
    }
  } partial{dev, &m};

  VkShaderModuleCreateInfo smci{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  smci.codeSize = v.words * 4;
  smci.pCode = v.spirv;
  core_->check(vkCreateShaderModule(dev, &smci, nullptr, &m.module), "vkCreateShaderModule");

  std::vector<VkDescriptorSetLayoutBinding> bindings(m.binding_count);
  for (uint32_t i = 0; i < m.binding_count; ++i) {
    bindings[i].binding = i;
    bindings[i].descriptorType = descriptor_type(m.binding_kinds[i]);
    bindings[i].descriptorCount = 1;
    bindings[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  VkDescriptorSetLayoutCreateInfo dslci{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  dslci.bindingCount = m.binding_count;
  dslci.pBindings = bindings.data();
  core_->check(vkCreateDescriptorSetLayout(dev, &dslci, nullptr, &m.set_layout),
               "vkCreateDescriptorSetLayout");

  VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, kMaxPushConstantBytes};
  VkPipelineLayoutCreateInfo plci{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  plci.setLayoutCount = 1;
  plci.pSetLayouts = &m.set_layout;
  plci.pushConstantRangeCount = 1;
  plci.pPushConstantRanges = &range;
  core_->check(vkCreatePipelineLayout(dev, &plci, nullptr, &m.layout), "vkCreatePipelineLayout");
  const Module& stored = modules_.emplace(&v, m).first->second;
  partial.m = nullptr;
  return stored;
}

std::vector<PipelineCache::Created> PipelineCache::created() {
  std::lock_guard lock(mutex_);
  std::vector<Created> out;
  for (const auto& [key, pipeline] : pipelines_) out.push_back({key.first->name, key.second});
  return out;
}

const Pipeline& PipelineCache::get(const kernels::VariantEntry& v,
                                   std::span<const uint32_t> spec) {
  std::lock_guard lock(mutex_);
  std::vector<uint32_t> spec_values(spec.begin(), spec.end());
  auto key = std::make_pair(&v, spec_values);
  auto it = pipelines_.find(key);
  if (it != pipelines_.end()) return it->second;
  const Module& m = module_for(v);

  std::vector<VkSpecializationMapEntry> entries(spec_values.size());
  for (uint32_t i = 0; i < entries.size(); ++i) entries[i] = {i, i * 4, 4};
  VkSpecializationInfo si{};
  si.mapEntryCount = static_cast<uint32_t>(entries.size());
  si.pMapEntries = entries.data();
  si.dataSize = spec_values.size() * 4;
  si.pData = spec_values.data();

  VkComputePipelineCreateInfo cpci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  cpci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  cpci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  cpci.stage.module = m.module;
  cpci.stage.pName = "main";
  cpci.stage.pSpecializationInfo = spec_values.empty() ? nullptr : &si;
  cpci.layout = m.layout;
  Pipeline p;
  p.layout = m.layout;
  p.set_layout = m.set_layout;
  p.binding_count = m.binding_count;
  p.binding_kinds = m.binding_kinds;
  core_->check(vkCreateComputePipelines(core_->device(), VK_NULL_HANDLE, 1, &cpci, nullptr,
                                        &p.pipeline),
               "vkCreateComputePipelines");
  return pipelines_.emplace(std::move(key), p).first->second;
}

}  // namespace vkformer::vk
