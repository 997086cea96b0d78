// The Vulkan loader is opened at run time (src/vk/vulkan_loader.cpp): a machine without one gets
// a device_not_found error naming what was looked for, from Device::open and the C API, instead
// of a program that cannot start. The tests run in order in one process: the loader is pointed at
// an empty folder and at a library that is not a loader first, then found the normal way.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "device_impl.hpp"
#include "test_util.hpp"
#include "vkformer/vkformer.h"
#include "vkformer/vkformer.hpp"

#ifdef _WIN32
#include <windows.h>
#endif

namespace vkformer::testing {
namespace {

namespace fs = std::filesystem;

#ifdef _WIN32
constexpr const char* kLoaderFile = "vulkan-1.dll";
constexpr const char* kNotALoader = "kernel32.dll";  // always there, exports no Vulkan
#else
constexpr const char* kLoaderFile = "libvulkan.so.1";
constexpr const char* kNotALoader = "libc.so.6";
#endif

// Whether the process has the Vulkan loader mapped.
bool loader_in_process() {
#ifdef _WIN32
  return GetModuleHandleW(L"vulkan-1.dll") != nullptr;
#else
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find("libvulkan") != std::string::npos) return true;
  return false;
#endif
}

TEST(VulkanLoader, TheProgramStartsWithoutTheLoader) {
  // Linked at build time, the loader would be mapped before main().
  EXPECT_FALSE(loader_in_process());
}

TEST(VulkanLoader, AMissingLoaderIsDeviceNotFoundNamingThePath) {
  const fs::path empty = scratch_dir("vulkan_loader") / "empty";
  fs::create_directories(empty);
  const std::string path = (empty / kLoaderFile).string();
  ScopedEnv env("VKFORMER_VULKAN_LIBRARY", path.c_str());
  EXPECT_TRUE(fails_with([] { Device::open(); }, ErrorCode::device_not_found, path));
  EXPECT_TRUE(fails_with([] { Device::open(); }, ErrorCode::device_not_found,
                         "no Vulkan loader could be loaded"));
  EXPECT_TRUE(fails_with([] { Device::enumerate(); }, ErrorCode::device_not_found,
                         "VKFORMER_VULKAN_LIBRARY"));

  vkf_device* device = nullptr;
  EXPECT_EQ(vkf_device_open(nullptr, &device), VKF_ERROR_DEVICE_NOT_FOUND);
  EXPECT_EQ(device, nullptr);
  EXPECT_NE(std::string(vkf_last_error()).find(path), std::string::npos) << vkf_last_error();
  EXPECT_FALSE(loader_in_process());
}

TEST(VulkanLoader, ALibraryThatIsNotALoaderIsRefusedByTheCommandItLacks) {
  ScopedEnv env("VKFORMER_VULKAN_LIBRARY", kNotALoader);
  // Appended, not std::string(kNotALoader) + "...": GCC 12 warns falsely (-Wstringop-overflow)
  // on that form.
  std::string want = kNotALoader;
  want.append(": opened, but it does not export vkGetInstanceProcAddr");
  EXPECT_TRUE(fails_with([] { Device::open(); }, ErrorCode::device_not_found, want));
}

TEST(VulkanLoader, TheInstalledLoaderIsFoundAfterAFailure) {
  // A failure is not remembered: with the variable gone the platform's loader is found.
  ASSERT_EQ(std::getenv("VKFORMER_VULKAN_LIBRARY"), nullptr);
  Device device = Device::open();
  EXPECT_FALSE(device.info().name.empty());
  EXPECT_TRUE(loader_in_process());
  // Once loaded, the loader stays: the variable no longer matters.
  ScopedEnv env("VKFORMER_VULKAN_LIBRARY", "no-such-library");
  EXPECT_FALSE(Device::enumerate().empty());
}

TEST(VulkanLoader, ValidationReportsThroughTheLoadedLoader) {
  // The validation layer, found through the loader vkformer opened (under Wine: enabled by the
  // host's loader from VK_INSTANCE_LAYERS), reports to vkformer: a buffer of size 0 is invalid.
  DeviceOptions options;
  options.validation = true;
  Device device = Device::open(options);
  VkBufferCreateInfo info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  info.size = 0;
  info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VkBuffer buffer = VK_NULL_HANDLE;
  const VkDevice handle = device.impl().core().device();
  if (vkCreateBuffer(handle, &info, nullptr, &buffer) == VK_SUCCESS && buffer)
    vkDestroyBuffer(handle, buffer, nullptr);
  bool reported = false;
  for (const auto& m : device.take_validation_messages())
    reported = reported || m.text.find("VUID-VkBufferCreateInfo-size") != std::string::npos;
  EXPECT_TRUE(reported) << "the validation layer did not report a buffer of size 0";
}

}  // namespace
}  // namespace vkformer::testing
