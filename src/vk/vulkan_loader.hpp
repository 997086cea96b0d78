#pragma once
// Vulkan through a loader opened at run time instead of linked at build time, so that a program
// built with vkformer starts on a machine without Vulkan and gets a device_not_found error from
// Device::open naming what was looked for. Every file that calls Vulkan includes this header, not
// <vulkan/vulkan.h>: it declares one function pointer per Vulkan command vkformer uses, named like
// the command, in namespace vkformer (so the code inside it calls them as it would the
// prototypes, and no symbol clashes with a loader that some other part of the program links).
#ifndef VK_NO_PROTOTYPES
#define VK_NO_PROTOTYPES
#endif
#include <vulkan/vulkan.h>

#include <string>

// X(name) for each command: the loader exports every one (core 1.0 and 1.1), so the pointers
// work for every instance and device, as linked functions would.
#define VKF_VULKAN_COMMANDS(X)               \
  X(vkGetInstanceProcAddr)                   \
  X(vkGetDeviceProcAddr)                     \
  X(vkCreateInstance)                        \
  X(vkDestroyInstance)                       \
  X(vkEnumerateInstanceExtensionProperties)  \
  X(vkEnumerateInstanceLayerProperties)      \
  X(vkEnumeratePhysicalDevices)              \
  X(vkEnumerateDeviceExtensionProperties)    \
  X(vkGetPhysicalDeviceProperties)           \
  X(vkGetPhysicalDeviceProperties2)          \
  X(vkGetPhysicalDeviceFeatures2)            \
  X(vkGetPhysicalDeviceMemoryProperties)     \
  X(vkGetPhysicalDeviceMemoryProperties2)    \
  X(vkGetPhysicalDeviceQueueFamilyProperties) \
  X(vkCreateDevice)                          \
  X(vkDestroyDevice)                         \
  X(vkDeviceWaitIdle)                        \
  X(vkGetDeviceQueue)                        \
  X(vkQueueSubmit)                           \
  X(vkCreateFence)                           \
  X(vkDestroyFence)                          \
  X(vkResetFences)                           \
  X(vkWaitForFences)                         \
  X(vkAllocateMemory)                        \
  X(vkFreeMemory)                            \
  X(vkMapMemory)                             \
  X(vkUnmapMemory)                           \
  X(vkFlushMappedMemoryRanges)               \
  X(vkInvalidateMappedMemoryRanges)          \
  X(vkCreateBuffer)                          \
  X(vkDestroyBuffer)                         \
  X(vkGetBufferMemoryRequirements)           \
  X(vkBindBufferMemory)                      \
  X(vkCreateBufferView)                      \
  X(vkDestroyBufferView)                     \
  X(vkCreateShaderModule)                    \
  X(vkDestroyShaderModule)                   \
  X(vkCreateComputePipelines)                \
  X(vkDestroyPipeline)                       \
  X(vkCreatePipelineLayout)                  \
  X(vkDestroyPipelineLayout)                 \
  X(vkCreateDescriptorSetLayout)             \
  X(vkDestroyDescriptorSetLayout)            \
  X(vkCreateDescriptorPool)                  \
  X(vkDestroyDescriptorPool)                 \
  X(vkAllocateDescriptorSets)                \
  X(vkUpdateDescriptorSets)                  \
  X(vkCreateCommandPool)                     \
  X(vkDestroyCommandPool)                    \
  X(vkAllocateCommandBuffers)                \
  X(vkFreeCommandBuffers)                    \
  X(vkBeginCommandBuffer)                    \
  X(vkEndCommandBuffer)                      \
  X(vkCreateQueryPool)                       \
  X(vkDestroyQueryPool)                      \
  X(vkGetQueryPoolResults)                   \
  X(vkCmdBindPipeline)                       \
  X(vkCmdBindDescriptorSets)                 \
  X(vkCmdPushConstants)                      \
  X(vkCmdDispatch)                           \
  X(vkCmdPipelineBarrier)                    \
  X(vkCmdCopyBuffer)                         \
  X(vkCmdFillBuffer)                         \
  X(vkCmdResetQueryPool)                     \
  X(vkCmdWriteTimestamp)

namespace vkformer {

#define VKF_DECLARE_COMMAND(name) extern PFN_##name name;
VKF_VULKAN_COMMANDS(VKF_DECLARE_COMMAND)
#undef VKF_DECLARE_COMMAND

namespace vk {

// Opens the Vulkan loader once per process and resolves the commands above; later calls return
// at once. VKFORMER_VULKAN_LIBRARY (a file name or path) replaces the platform's list of names.
// Throws device_not_found naming every library tried and why each failed, or the command the
// library lacks. A failure is not remembered: the next call tries again.
void load_vulkan();

// The library load_vulkan() opened, as it was named ("libvulkan.so.1"); empty before.
std::string vulkan_library_name();

}  // namespace vk
}  // namespace vkformer
