#include "vk_check.hpp"

namespace vkformer::vk {

const char* result_name(VkResult r) {
  switch (r) {
#define VKF_RESULT(x) \
  case x: return #x;
    VKF_RESULT(VK_SUCCESS)
    VKF_RESULT(VK_NOT_READY)
    VKF_RESULT(VK_TIMEOUT)
    VKF_RESULT(VK_INCOMPLETE)
    VKF_RESULT(VK_ERROR_OUT_OF_HOST_MEMORY)
    VKF_RESULT(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    VKF_RESULT(VK_ERROR_INITIALIZATION_FAILED)
    VKF_RESULT(VK_ERROR_DEVICE_LOST)
    VKF_RESULT(VK_ERROR_MEMORY_MAP_FAILED)
    VKF_RESULT(VK_ERROR_LAYER_NOT_PRESENT)
    VKF_RESULT(VK_ERROR_EXTENSION_NOT_PRESENT)
    VKF_RESULT(VK_ERROR_FEATURE_NOT_PRESENT)
    VKF_RESULT(VK_ERROR_INCOMPATIBLE_DRIVER)
    VKF_RESULT(VK_ERROR_TOO_MANY_OBJECTS)
    VKF_RESULT(VK_ERROR_FORMAT_NOT_SUPPORTED)
    VKF_RESULT(VK_ERROR_FRAGMENTED_POOL)
    VKF_RESULT(VK_ERROR_OUT_OF_POOL_MEMORY)
    VKF_RESULT(VK_ERROR_INVALID_EXTERNAL_HANDLE)
    VKF_RESULT(VK_ERROR_FRAGMENTATION)
    VKF_RESULT(VK_ERROR_UNKNOWN)
#undef VKF_RESULT
    default: return "VkResult(?)";
  }
}

const char* remedy(VkResult r) {
  switch (r) {
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
      return "the device is out of memory; try a smaller model or context, fewer models at once, "
             "or closing other programs that use the device";
    case VK_ERROR_OUT_OF_HOST_MEMORY:
      return "the driver is out of host memory; try a smaller model or context, or closing other "
             "programs";
    case VK_ERROR_OUT_OF_POOL_MEMORY:
    case VK_ERROR_FRAGMENTED_POOL:
    case VK_ERROR_FRAGMENTATION:
      return "the driver's descriptor memory is exhausted; try a smaller model or fewer models at "
             "once";
    case VK_ERROR_MEMORY_MAP_FAILED:
      return "the driver could not map memory for the host; try a smaller model or closing other "
             "programs that use the device";
    case VK_ERROR_DEVICE_LOST:
      return "the device was lost (a driver timeout, reset or crash) and nothing made on it can be "
             "used again; try again with the device opened anew, and if it recurs, update the "
             "driver or try another device";
    default:
      return "try updating the Vulkan driver, or another device";
  }
}

void check(VkResult r, const char* call) {
  if (r == VK_SUCCESS) return;
  std::string msg = std::string(call) + " failed: " + result_name(r) + " (" + std::to_string(r) +
                    "): " + remedy(r);
  switch (r) {
    case VK_ERROR_OUT_OF_HOST_MEMORY:
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
    case VK_ERROR_OUT_OF_POOL_MEMORY:
    case VK_ERROR_FRAGMENTED_POOL:
      throw Error(ErrorCode::out_of_memory, msg);
    case VK_ERROR_DEVICE_LOST: throw Error(ErrorCode::device_lost, msg);
    case VK_ERROR_INCOMPATIBLE_DRIVER:
    case VK_ERROR_INITIALIZATION_FAILED:
      throw Error(ErrorCode::device_not_found, msg);
    case VK_ERROR_EXTENSION_NOT_PRESENT:
    case VK_ERROR_FEATURE_NOT_PRESENT:
    case VK_ERROR_LAYER_NOT_PRESENT:
      throw Error(ErrorCode::unsupported, msg);
    default: throw Error(ErrorCode::vulkan, msg);
  }
}

}  // namespace vkformer::vk
