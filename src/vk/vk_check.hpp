#pragma once
#include "vulkan_loader.hpp"

#include <string>

#include "vkformer/error.hpp"

namespace vkformer::vk {

const char* result_name(VkResult r);

// What a person can do about a failing result, as the second half of a message: "the device is
// out of memory; try a smaller model or context, ...".
const char* remedy(VkResult r);

// Throws vkformer::Error for a failing VkResult, naming the call, the result and what to try
// (remedy): out-of-memory and device-lost results get their own error codes so callers can react
// to them.
void check(VkResult r, const char* call);

#define VKF_CHECK(expr) ::vkformer::vk::check((expr), #expr)

}  // namespace vkformer::vk
