#include "vulkan_loader.hpp"

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "dynamic_library.hpp"
#include "vkformer/error.hpp"

namespace vkformer {

#define VKF_DEFINE_COMMAND(name) PFN_##name name = nullptr;
VKF_VULKAN_COMMANDS(VKF_DEFINE_COMMAND)
#undef VKF_DEFINE_COMMAND

namespace vk {

namespace {

// What each platform calls its Vulkan loader, in the order tried.
std::vector<std::string> default_library_names() {
#if defined(_WIN32)
  return {"vulkan-1.dll"};
#elif defined(__APPLE__)
  // The loader from the Vulkan SDK (or bundled with the app), else MoltenVK itself, which
  // exports the same commands.
  return {"libvulkan.1.dylib", "libvulkan.dylib", "libMoltenVK.dylib"};
#elif defined(__ANDROID__)
  return {"libvulkan.so"};
#else
  return {"libvulkan.so.1", "libvulkan.so"};
#endif
}

std::mutex load_mutex;
std::atomic<bool> loaded{false};
platform::DynamicLibrary library;  // kept open for the life of the process
std::string library_name;

}  // namespace

void load_vulkan() {
  if (loaded.load(std::memory_order_acquire)) return;
  std::lock_guard lock(load_mutex);
  if (loaded.load(std::memory_order_relaxed)) return;

  std::vector<std::string> names = default_library_names();
  std::string origin = "the Vulkan loader";
  if (const char* env = std::getenv("VKFORMER_VULKAN_LIBRARY"); env && *env) {
    names = {env};
    origin = "the Vulkan loader named by VKFORMER_VULKAN_LIBRARY";
  }
  std::string tried;
  for (const std::string& name : names) {
    std::string why;
    platform::DynamicLibrary lib = platform::DynamicLibrary::open(name, &why);
    if (!lib.is_open()) {
      tried += (tried.empty() ? "" : "; ") + name + ": " + why;
      continue;
    }
    // Resolve into locals first: a library that lacks a command leaves nothing half-set.
#define VKF_RESOLVE(fn)                                                                    \
  auto resolved_##fn = reinterpret_cast<PFN_##fn>(lib.symbol(#fn));                        \
  if (!resolved_##fn) {                                                                    \
    tried += (tried.empty() ? "" : "; ") + name + ": opened, but it does not export " #fn \
             " (not a Vulkan 1.1 loader)";                                                 \
    continue;                                                                              \
  }
    VKF_VULKAN_COMMANDS(VKF_RESOLVE)
#undef VKF_RESOLVE
#define VKF_ASSIGN(fn) fn = resolved_##fn;
    VKF_VULKAN_COMMANDS(VKF_ASSIGN)
#undef VKF_ASSIGN
    library = std::move(lib);
    library_name = name;
    loaded.store(true, std::memory_order_release);
    return;
  }
  throw Error(ErrorCode::device_not_found,
              "no Vulkan loader could be loaded, so no Vulkan device can be used (looked for " +
                  origin + ": " + tried +
                  "). Install a Vulkan driver and its loader (Debian: apt-get install "
                  "libvulkan1 mesa-vulkan-drivers; Windows: the GPU driver installs "
                  "vulkan-1.dll; macOS: the Vulkan SDK or MoltenVK)");
}

std::string vulkan_library_name() {
  std::lock_guard lock(load_mutex);
  return library_name;
}

}  // namespace vk
}  // namespace vkformer
