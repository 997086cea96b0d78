#include "device_core.hpp"

#include <vector>

#include "coopmat_khr.hpp"
#include "vk_check.hpp"

namespace vkformer::vk {

DeviceCore::DeviceCore(std::shared_ptr<Instance> instance, PhysicalDevice physical,
                       uint64_t timeout_ms)
    : instance_(std::move(instance)), physical_(std::move(physical)), timeout_ms_(timeout_ms) {
  const DeviceInfo& info = physical_.info;
  if (physical_.api_version < VK_API_VERSION_1_1)
    throw Error(ErrorCode::unsupported, "device '" + info.name + "' supports Vulkan " +
                                            info.api_version + "; vkformer needs 1.1 or newer");
  if (physical_.compute_queue_family == UINT32_MAX)
    throw Error(ErrorCode::unsupported, "device '" + info.name + "' has no compute queue");

  float priority = 1.0f;
  VkDeviceQueueCreateInfo qci{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qci.queueFamilyIndex = physical_.compute_queue_family;
  qci.queueCount = 1;
  qci.pQueuePriorities = &priority;

  std::vector<const char*> extensions;
  bool v12 = physical_.api_version >= VK_API_VERSION_1_2;
  // Portability drivers (MoltenVK) require this extension to be enabled when they expose it.
  if (physical_.has_extension("VK_KHR_portability_subset"))
    extensions.push_back("VK_KHR_portability_subset");

  VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  VkPhysicalDevice16BitStorageFeatures storage16{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
  VkPhysicalDeviceShaderFloat16Int8Features f16{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES};
  void** tail = &features.pNext;
  if (info.storage_16bit) {
    storage16.storageBuffer16BitAccess = VK_TRUE;
    *tail = &storage16;
    tail = &storage16.pNext;
    storage_16bit = true;
  }
  if (info.fp16_arithmetic) {
    if (!v12) extensions.push_back(VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME);
    f16.shaderFloat16 = VK_TRUE;
    *tail = &f16;
    tail = &f16.pNext;
    float16 = true;
  }
  // Integer dot products (1.3 or KHR): kernels that REQUIRE integer_dot run only where enabled.
  VkPhysicalDeviceShaderIntegerDotProductFeatures integer_dot_features{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES};
  if (info.integer_dot_product) {
    if (physical_.api_version < VK_API_VERSION_1_3)
      extensions.push_back(VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME);
    integer_dot_features.shaderIntegerDotProduct = VK_TRUE;
    *tail = &integer_dot_features;
    tail = &integer_dot_features.pNext;
    integer_dot = true;
  }
  // Cooperative matrices: VK_KHR_cooperative_matrix where the device has it, NV only where KHR
  // is absent (the kernels ask src/vk/coopmat.cpp which one is on). GLSL's cooperative-matrix
  // loads and stores use the Vulkan memory model (glslang declares the VulkanMemoryModel
  // capability for both), so each needs that feature too.
  VkPhysicalDeviceCooperativeMatrixFeaturesKHR coop_khr{};
  coop_khr.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR;
  VkPhysicalDeviceCooperativeMatrixFeaturesNV coop_nv{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV};
  VkPhysicalDeviceVulkanMemoryModelFeatures memory_model{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES};
  const bool has_memory_model =
      v12 || physical_.has_extension(VK_KHR_VULKAN_MEMORY_MODEL_EXTENSION_NAME);
  if ((info.cooperative_matrix_khr || info.cooperative_matrix_nv) && has_memory_model) {
    VkPhysicalDeviceFeatures2 probe{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    VkPhysicalDeviceCooperativeMatrixFeaturesKHR qk{};
    qk.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR;
    VkPhysicalDeviceCooperativeMatrixFeaturesNV qn{
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV};
    VkPhysicalDeviceVulkanMemoryModelFeatures qm{
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES};
    // Only the structures of extensions the device exposes may be chained.
    void** q_tail = &probe.pNext;
    *q_tail = &qm;
    q_tail = &qm.pNext;
    if (info.cooperative_matrix_khr) {
      *q_tail = &qk;
      q_tail = &qk.pNext;
    }
    if (info.cooperative_matrix_nv) {
      *q_tail = &qn;
      q_tail = &qn.pNext;
    }
    vkGetPhysicalDeviceFeatures2(physical_.handle, &probe);
    if (qm.vulkanMemoryModel) {
      if (info.cooperative_matrix_khr && qk.cooperativeMatrix &&
          !info.cooperative_matrix_khr_shapes.empty()) {
        extensions.push_back(VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME);
        coop_khr.cooperativeMatrix = VK_TRUE;
        *tail = &coop_khr;
        tail = &coop_khr.pNext;
        coopmat_khr = true;
      } else if (info.cooperative_matrix_nv && qn.cooperativeMatrix) {
        extensions.push_back("VK_NV_cooperative_matrix");
        coop_nv.cooperativeMatrix = VK_TRUE;
        *tail = &coop_nv;
        tail = &coop_nv.pNext;
        coopmat_nv = true;
      }
    }
    if (coopmat_khr || coopmat_nv) {
      if (!v12) extensions.push_back(VK_KHR_VULKAN_MEMORY_MODEL_EXTENSION_NAME);
      memory_model.vulkanMemoryModel = VK_TRUE;
      *tail = &memory_model;
      tail = &memory_model.pNext;
    }
  }
  // Shapes are only usable where their extension is enabled.
  if (!coopmat_khr) physical_.info.cooperative_matrix_khr_shapes.clear();
  if (!coopmat_nv) physical_.info.cooperative_matrix_nv_shapes.clear();

  VkDeviceCreateInfo dci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  dci.pNext = &features;
  dci.queueCreateInfoCount = 1;
  dci.pQueueCreateInfos = &qci;
  dci.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
  dci.ppEnabledExtensionNames = extensions.data();
  VKF_CHECK(vkCreateDevice(physical_.handle, &dci, nullptr, &device_));
  vkGetDeviceQueue(device_, physical_.compute_queue_family, 0, &queue_);
}

DeviceCore::~DeviceCore() {
  if (device_) {
    vkDeviceWaitIdle(device_);
    vkDestroyDevice(device_, nullptr);
  }
}

void DeviceCore::check(VkResult r, const char* call) {
  if (r == VK_ERROR_DEVICE_LOST) lost_ = true;
  vk::check(r, call);
}

void DeviceCore::throw_if_lost() const {
  if (lost_)
    throw Error(ErrorCode::device_lost,
                "device '" + info().name +
                    "' was lost earlier, so nothing made on it can be used; open the device "
                    "again (and if it recurs, try updating the driver or another device)");
}

void DeviceCore::settle_if_lost() const {
  if (!lost_) return;
  // vkDeviceWaitIdle uses the queue, which another thread may be submitting to right now.
  std::lock_guard lock(queue_mutex_);
  vkDeviceWaitIdle(device_);
}

void DeviceCore::submit_and_wait(VkCommandBuffer cmd, VkFence fence) {
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = 1;
  si.pCommandBuffers = &cmd;
  throw_if_lost();  // without the lock: a thread settling a hung device holds it for long
  {
    std::lock_guard lock(queue_mutex_);
    // Checked under the lock: another thread may have just found the device lost, and it waits
    // for the device under this lock (settle_if_lost) before freeing what the work uses.
    throw_if_lost();
    check(vkQueueSubmit(queue_, 1, &si, fence), "vkQueueSubmit");
  }
  VkResult r = vkWaitForFences(device_, 1, &fence, VK_TRUE, timeout_ms_ * 1'000'000ull);
  if (r == VK_TIMEOUT) {
    // The work may still be running; nothing that it uses can safely be freed or reused.
    lost_ = true;
    throw Error(ErrorCode::device_lost,
                "device '" + info().name + "' did not finish a submission within " +
                    std::to_string(timeout_ms_) +
                    " ms (vkWaitForFences: VK_TIMEOUT); treating the device as lost, so nothing "
                    "made on it can be used again; try again with the device opened anew, a "
                    "longer timeout or another device");
  }
  check(r, "vkWaitForFences");
  check(vkResetFences(device_, 1, &fence), "vkResetFences");
}

}  // namespace vkformer::vk
