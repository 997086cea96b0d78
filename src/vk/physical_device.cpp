#include "physical_device.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "coopmat_khr.hpp"

namespace vkformer::vk {

bool PhysicalDevice::has_extension(const char* name) const {
  return std::find(extensions.begin(), extensions.end(), name) != extensions.end();
}

std::string vendor_name(uint32_t id) {
  switch (id) {
    case 0x10DE: return "NVIDIA";
    case 0x1002: return "AMD";
    case 0x1022: return "AMD";
    case 0x8086: return "Intel";
    case 0x13B5: return "ARM";
    case 0x5143: return "Qualcomm";
    case 0x1010: return "ImgTec";
    case 0x106B: return "Apple";
    case 0x10005: return "Mesa";
    default: {
      char buf[16];
      std::snprintf(buf, sizeof buf, "0x%04X", id);
      return buf;
    }
  }
}

std::string format_api_version(uint32_t v) {
  return std::to_string(VK_API_VERSION_MAJOR(v)) + "." + std::to_string(VK_API_VERSION_MINOR(v)) +
         "." + std::to_string(VK_API_VERSION_PATCH(v));
}

// Vendors pack driverVersion differently; these are the conventions vulkaninfo uses.
std::string format_driver_version(uint32_t vendor_id, uint32_t v) {
  char buf[48];
  if (vendor_id == 0x10DE) {
    std::snprintf(buf, sizeof buf, "%u.%u.%u.%u", (v >> 22) & 0x3ff, (v >> 14) & 0xff,
                  (v >> 6) & 0xff, v & 0x3f);
  } else if (vendor_id == 0x8086) {
    std::snprintf(buf, sizeof buf, "%u.%u", v >> 14, v & 0x3fff);
  } else {
    return format_api_version(v);
  }
  return buf;
}

namespace {

const char* component_type_name(VkComponentTypeNV t) {
  switch (t) {
    case VK_COMPONENT_TYPE_FLOAT16_NV: return "f16";
    case VK_COMPONENT_TYPE_FLOAT32_NV: return "f32";
    case VK_COMPONENT_TYPE_FLOAT64_NV: return "f64";
    case VK_COMPONENT_TYPE_SINT8_NV: return "i8";
    case VK_COMPONENT_TYPE_SINT16_NV: return "i16";
    case VK_COMPONENT_TYPE_SINT32_NV: return "i32";
    case VK_COMPONENT_TYPE_SINT64_NV: return "i64";
    case VK_COMPONENT_TYPE_UINT8_NV: return "u8";
    case VK_COMPONENT_TYPE_UINT16_NV: return "u16";
    case VK_COMPONENT_TYPE_UINT32_NV: return "u32";
    case VK_COMPONENT_TYPE_UINT64_NV: return "u64";
    default: return "other";
  }
}

// What vkGetPhysicalDeviceCooperativeMatrixProperties{NV,KHR} (the entry point `name`, an
// instance-level query) reports, each element starting as `blank` (its sType set); none when the
// driver lacks the function or the query fails.
template <class Query, class Props>
std::vector<Props> cooperative_matrix_properties(VkInstance instance, VkPhysicalDevice physical,
                                                 const char* name, const Props& blank) {
  auto query = reinterpret_cast<Query>(vkGetInstanceProcAddr(instance, name));
  if (!query) return {};
  uint32_t n = 0;
  if (query(physical, &n, nullptr) != VK_SUCCESS || n == 0) return {};
  std::vector<Props> props(n, blank);
  if (query(physical, &n, props.data()) != VK_SUCCESS) return {};
  props.resize(n);
  return props;
}

// The subgroup-scope shapes of VK_NV_cooperative_matrix.
std::vector<CooperativeMatrixShape> cooperative_matrix_nv_shapes(VkInstance instance,
                                                                 VkPhysicalDevice physical) {
  VkCooperativeMatrixPropertiesNV blank{};
  blank.sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV;
  std::vector<CooperativeMatrixShape> shapes;
  for (const auto& p : cooperative_matrix_properties<PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV>(
           instance, physical, "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV", blank))
    if (p.scope == VK_SCOPE_SUBGROUP_NV)
      shapes.push_back({p.MSize, p.NSize, p.KSize, component_type_name(p.AType), component_type_name(p.BType),
                        component_type_name(p.CType), component_type_name(p.DType)});
  return shapes;
}

// The subgroup-scope shapes of VK_KHR_cooperative_matrix (same component type numbers as NV).
std::vector<CooperativeMatrixShape> cooperative_matrix_khr_shapes(VkInstance instance,
                                                                  VkPhysicalDevice physical) {
  VkCooperativeMatrixPropertiesKHR blank{};
  blank.sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR;
  auto type = [](VkComponentTypeKHR t) { return component_type_name(static_cast<VkComponentTypeNV>(t)); };
  std::vector<CooperativeMatrixShape> shapes;
  for (const auto& p : cooperative_matrix_properties<PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR>(
           instance, physical, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR", blank))
    if (p.scope == VK_SCOPE_SUBGROUP_KHR)
      shapes.push_back({p.MSize, p.NSize, p.KSize, type(p.AType), type(p.BType), type(p.CType),
                        type(p.ResultType), p.saturatingAccumulation == VK_TRUE});
  return shapes;
}

}  // namespace

static std::string device_type_name(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "cpu";
    default: return "other";
  }
}

PhysicalDevice query_physical_device(VkInstance instance, VkPhysicalDevice handle, uint32_t index,
                                     uint32_t instance_api_version) {
  PhysicalDevice pd;
  pd.handle = handle;

  uint32_t n = 0;
  vkEnumerateDeviceExtensionProperties(handle, nullptr, &n, nullptr);
  std::vector<VkExtensionProperties> exts(n);
  vkEnumerateDeviceExtensionProperties(handle, nullptr, &n, exts.data());
  for (auto& e : exts) pd.extensions.emplace_back(e.extensionName);

  VkPhysicalDeviceProperties base{};
  vkGetPhysicalDeviceProperties(handle, &base);
  pd.api_version = std::min(base.apiVersion, instance_api_version);
  bool v12 = pd.api_version >= VK_API_VERSION_1_2;
  bool v13 = pd.api_version >= VK_API_VERSION_1_3;

  // Properties chain: subgroups (1.1), subgroup size control (1.3 or EXT), driver (1.2 or KHR).
  VkPhysicalDeviceProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  VkPhysicalDeviceSubgroupProperties subgroup{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceSubgroupSizeControlProperties size_control{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES};
  VkPhysicalDeviceDriverProperties driver{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
  VkPhysicalDeviceIDProperties ids{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES};
  props.pNext = &subgroup;
  subgroup.pNext = &ids;
  void** tail = &ids.pNext;
  bool has_size_control = v13 || pd.has_extension(VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME);
  bool has_driver = v12 || pd.has_extension(VK_KHR_DRIVER_PROPERTIES_EXTENSION_NAME);
  if (has_size_control) {
    *tail = &size_control;
    tail = &size_control.pNext;
  }
  if (has_driver) {
    *tail = &driver;
    tail = &driver.pNext;
  }
  // Compute unit counts, where a vendor extension reports them (split-K decisions use them).
  VkPhysicalDeviceShaderSMBuiltinsPropertiesNV sm{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV};
  VkPhysicalDeviceShaderCorePropertiesAMD amd_core{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CORE_PROPERTIES_AMD};
  bool has_sm = pd.has_extension(VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME);
  bool has_amd_core = pd.has_extension(VK_AMD_SHADER_CORE_PROPERTIES_EXTENSION_NAME);
  if (has_sm) {
    *tail = &sm;
    tail = &sm.pNext;
  }
  if (has_amd_core) {
    *tail = &amd_core;
    tail = &amd_core.pNext;
  }
  // Integer dot products (1.3 or KHR): which packed 8-bit forms run accelerated.
  const bool has_integer_dot =
      v13 || pd.has_extension(VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME);
  VkPhysicalDeviceShaderIntegerDotProductProperties dot_props{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES};
  if (has_integer_dot) {
    *tail = &dot_props;
    tail = &dot_props.pNext;
  }
  vkGetPhysicalDeviceProperties2(handle, &props);

  // Features chain: 16-bit storage (1.1), float16 (1.2 or KHR).
  VkPhysicalDeviceFeatures2 feats{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  VkPhysicalDevice16BitStorageFeatures storage16{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
  VkPhysicalDeviceShaderFloat16Int8Features f16{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES};
  VkPhysicalDeviceShaderIntegerDotProductFeatures dot_feats{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES};
  feats.pNext = &storage16;
  void** feats_tail = &storage16.pNext;
  bool has_f16 = v12 || pd.has_extension(VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME);
  if (has_f16) {
    *feats_tail = &f16;
    feats_tail = &f16.pNext;
  }
  if (has_integer_dot) *feats_tail = &dot_feats;
  vkGetPhysicalDeviceFeatures2(handle, &feats);

  VkPhysicalDeviceMemoryProperties mem{};
  vkGetPhysicalDeviceMemoryProperties(handle, &mem);

  uint32_t qn = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(handle, &qn, nullptr);
  std::vector<VkQueueFamilyProperties> queues(qn);
  vkGetPhysicalDeviceQueueFamilyProperties(handle, &qn, queues.data());
  // Prefer a compute queue family without graphics (async compute), else any with compute.
  for (uint32_t pass = 0; pass < 2 && pd.compute_queue_family == UINT32_MAX; ++pass)
    for (uint32_t i = 0; i < qn; ++i) {
      bool compute = queues[i].queueFlags & VK_QUEUE_COMPUTE_BIT;
      bool graphics = queues[i].queueFlags & VK_QUEUE_GRAPHICS_BIT;
      if (compute && (pass == 1 || !graphics)) {
        pd.compute_queue_family = i;
        pd.queue_timestamp_bits = queues[i].timestampValidBits;
        break;
      }
    }

  DeviceInfo& d = pd.info;
  const auto& p = props.properties;
  d.index = index;
  d.name = p.deviceName;
  d.vendor_id = p.vendorID;
  d.device_id = p.deviceID;
  d.vendor = vendor_name(p.vendorID);
  d.type = device_type_name(p.deviceType);
  char uuid[33];
  for (int i = 0; i < 16; ++i) std::snprintf(uuid + 2 * i, 3, "%02x", ids.deviceUUID[i]);
  d.uuid = uuid;
  if (has_driver) {
    d.driver_name = driver.driverName;
    d.driver_info = driver.driverInfo;
  }
  d.driver_version = format_driver_version(p.vendorID, p.driverVersion);
  d.api_version = format_api_version(p.apiVersion);
  d.subgroup_size = subgroup.subgroupSize;
  d.min_subgroup_size = has_size_control ? size_control.minSubgroupSize : subgroup.subgroupSize;
  d.max_subgroup_size = has_size_control ? size_control.maxSubgroupSize : subgroup.subgroupSize;
  d.subgroup_arithmetic = (subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                          (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT);
  d.subgroup_shuffle = (subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                       (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_SHUFFLE_BIT);
  d.fp16_arithmetic = has_f16 && f16.shaderFloat16;
  d.storage_16bit = storage16.storageBuffer16BitAccess;
  d.integer_dot_product = has_integer_dot && dot_feats.shaderIntegerDotProduct;
  d.integer_dot_4x8_packed_signed_accelerated =
      d.integer_dot_product && dot_props.integerDotProduct4x8BitPackedSignedAccelerated;
  d.integer_dot_4x8_packed_unsigned_accelerated =
      d.integer_dot_product && dot_props.integerDotProduct4x8BitPackedUnsignedAccelerated;
  d.integer_dot_4x8_packed_mixed_accelerated =
      d.integer_dot_product && dot_props.integerDotProduct4x8BitPackedMixedSignednessAccelerated;
  d.shared_memory_bytes = p.limits.maxComputeSharedMemorySize;
  d.max_storage_buffer_range = p.limits.maxStorageBufferRange;
  d.min_storage_buffer_offset_alignment =
      static_cast<uint32_t>(p.limits.minStorageBufferOffsetAlignment);
  d.max_push_constants_size = p.limits.maxPushConstantsSize;
  d.max_texel_buffer_elements = p.limits.maxTexelBufferElements;
  d.min_texel_buffer_offset_alignment =
      static_cast<uint32_t>(p.limits.minTexelBufferOffsetAlignment);
  if (has_sm)
    d.compute_units = sm.shaderSMCount;
  else if (has_amd_core)
    d.compute_units = amd_core.shaderEngineCount * amd_core.shaderArraysPerEngineCount *
                      amd_core.computeUnitsPerShaderArray;
  for (int i = 0; i < 3; ++i) {
    d.max_workgroup_count[i] = p.limits.maxComputeWorkGroupCount[i];
    d.max_workgroup_size[i] = p.limits.maxComputeWorkGroupSize[i];
  }
  d.max_workgroup_invocations = p.limits.maxComputeWorkGroupInvocations;
  // timestampValidBits of the queue we use is what decides; 0 means no timestamps there.
  d.timestamps = pd.queue_timestamp_bits > 0;
  d.timestamp_period_ns = p.limits.timestampPeriod;
  d.cooperative_matrix_nv = pd.has_extension("VK_NV_cooperative_matrix");
  d.cooperative_matrix_khr = pd.has_extension("VK_KHR_cooperative_matrix");
  if (d.cooperative_matrix_nv) d.cooperative_matrix_nv_shapes = cooperative_matrix_nv_shapes(instance, handle);
  if (d.cooperative_matrix_khr)
    d.cooperative_matrix_khr_shapes = cooperative_matrix_khr_shapes(instance, handle);

  // maxMemoryAllocationSize lives in VkPhysicalDeviceMaintenance3Properties (core 1.1).
  VkPhysicalDeviceProperties2 props2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  VkPhysicalDeviceMaintenance3Properties m3{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
  props2.pNext = &m3;
  vkGetPhysicalDeviceProperties2(handle, &props2);
  d.max_memory_allocation_size = m3.maxMemoryAllocationSize;

  for (uint32_t i = 0; i < mem.memoryHeapCount; ++i)
    if (mem.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
      d.device_local_memory_bytes = std::max<uint64_t>(d.device_local_memory_bytes,
                                                       mem.memoryHeaps[i].size);
  return pd;
}

}  // namespace vkformer::vk
