#include "instance.hpp"

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "vk_check.hpp"

namespace vkformer::vk {

namespace {

constexpr const char* kValidationLayer = "VK_LAYER_KHRONOS_validation";

bool has_layer(const char* name) {
  uint32_t n = 0;
  vkEnumerateInstanceLayerProperties(&n, nullptr);
  std::vector<VkLayerProperties> layers(n);
  vkEnumerateInstanceLayerProperties(&n, layers.data());
  for (auto& l : layers)
    if (std::strcmp(l.layerName, name) == 0) return true;
  return false;
}

std::vector<std::string> instance_extensions(const char* layer) {
  uint32_t n = 0;
  vkEnumerateInstanceExtensionProperties(layer, &n, nullptr);
  std::vector<VkExtensionProperties> exts(n);
  vkEnumerateInstanceExtensionProperties(layer, &n, exts.data());
  std::vector<std::string> names;
  for (auto& e : exts) names.emplace_back(e.extensionName);
  return names;
}

// Whether the loader enables `layer` by itself: VK_INSTANCE_LAYERS (its list, ':'- or
// ';'-separated) names it, or VKFORMER_LOADER_LAYERS does. Wine hides VK_* variables from Windows
// programs while its host-side loader still reads them, so scripts/test_windows.sh sets both.
bool layer_named_by_environment(const char* layer) {
  const char* env = std::getenv("VK_INSTANCE_LAYERS");
  if (!env || !*env) env = std::getenv("VKFORMER_LOADER_LAYERS");
  if (!env) return false;
  std::string list(env);
  for (size_t start = 0; start <= list.size();) {
    size_t end = list.find_first_of(":;", start);
    if (end == std::string::npos) end = list.size();
    if (list.compare(start, end - start, layer) == 0) return true;
    start = end + 1;
  }
  return false;
}

bool contains(const std::vector<std::string>& v, const char* s) {
  for (auto& x : v)
    if (x == s) return true;
  return false;
}

}  // namespace

bool env_flag(const char* name) {
  const char* value = std::getenv(name);
  if (!value || !*value) return false;
  std::string word(value);
  for (char& c : word) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const char* off : {"0", "false", "off", "no"})
    if (word == off) return false;
  for (const char* on : {"1", "true", "on", "yes"})
    if (word == on) return true;
  // Anything else is likely a typo, and guessing either way would hide it.
  throw Error(ErrorCode::invalid_argument,
              std::string(name) + "='" + value + "': expected 1, true, on or yes to turn it on, " +
                  "or 0, false, off, no or nothing to turn it off (any case)");
}

std::shared_ptr<Instance> Instance::create(const InstanceOptions& options) {
  load_vulkan();  // throws device_not_found when the machine has no Vulkan loader
  std::shared_ptr<Instance> inst(new Instance());
  bool validation = options.validation || env_flag("VKFORMER_VALIDATION");
  bool sync_validation = options.sync_validation || env_flag("VKFORMER_SYNC_VALIDATION");

  uint32_t loader_version = VK_API_VERSION_1_0;
  auto enumerate_version = reinterpret_cast<PFN_vkEnumerateInstanceVersion>(
      vkGetInstanceProcAddr(nullptr, "vkEnumerateInstanceVersion"));
  if (enumerate_version) {
    const VkResult result = enumerate_version(&loader_version);
    if (result != VK_SUCCESS)
      throw Error(ErrorCode::device_not_found,
                  std::string("the Vulkan loader could not tell its version: "
                              "vkEnumerateInstanceVersion returned ") +
                      result_name(result));
  }
  // Wine's vulkan-1.dll also reports 1.0 when Wine's graphics driver did not load (no display, or
  // a desktop that was closing as the program started): then nothing is behind it.
  if (loader_version < VK_API_VERSION_1_1)
    throw Error(ErrorCode::device_not_found,
                "the Vulkan loader supports only Vulkan 1.0; vkformer needs 1.1 or newer (update "
                "the Vulkan loader or the GPU driver; under Wine, its graphics driver did not load)");
  inst->api_version_ = loader_version >= VK_API_VERSION_1_3 ? VK_API_VERSION_1_3 : loader_version;

  std::vector<const char*> layers;
  std::vector<const char*> extensions;
  auto exts = instance_extensions(nullptr);
  VkInstanceCreateFlags flags = 0;
  // Lets MoltenVK and other portability drivers be enumerated.
  if (contains(exts, VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME)) {
    extensions.push_back(VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME);
    flags |= VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR;
  }
  if (validation) {
    // Wine's vulkan-1.dll lists no layers, but the host loader behind it enables the layers that
    // VK_INSTANCE_LAYERS names; such a layer reports through the messenger below as usual.
    const bool listed = has_layer(kValidationLayer);
    if (!listed && !layer_named_by_environment(kValidationLayer))
      throw Error(ErrorCode::unsupported,
                  "validation was requested but VK_LAYER_KHRONOS_validation is not installed "
                  "(Debian: apt-get install vulkan-validationlayers)");
    if (listed) layers.push_back(kValidationLayer);
    auto layer_exts = instance_extensions(kValidationLayer);
    if (!contains(exts, VK_EXT_DEBUG_UTILS_EXTENSION_NAME) &&
        !contains(layer_exts, VK_EXT_DEBUG_UTILS_EXTENSION_NAME))
      throw Error(ErrorCode::unsupported, "validation needs VK_EXT_debug_utils, not available");
    extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
  }

  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "vkformer";
  app.pEngineName = "vkformer";
  app.apiVersion = inst->api_version_;

  VkInstanceCreateInfo ci{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  ci.flags = flags;
  ci.pApplicationInfo = &app;
  ci.enabledLayerCount = static_cast<uint32_t>(layers.size());
  ci.ppEnabledLayerNames = layers.data();
  ci.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
  ci.ppEnabledExtensionNames = extensions.data();

  VkValidationFeatureEnableEXT sync_feature =
      VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT;
  VkValidationFeaturesEXT features{VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT};
  features.enabledValidationFeatureCount = 1;
  features.pEnabledValidationFeatures = &sync_feature;

  VkDebugUtilsMessengerCreateInfoEXT mci{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
  mci.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                        VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  mci.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                    VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                    VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  mci.pfnUserCallback = &Instance::on_message;
  mci.pUserData = inst.get();
  if (validation) {
    // Chained so that messages from vkCreateInstance itself are caught too.
    mci.pNext = sync_validation ? &features : nullptr;
    ci.pNext = &mci;
  }

  VkResult created = vkCreateInstance(&ci, nullptr, &inst->instance_);
  if (created == VK_ERROR_INCOMPATIBLE_DRIVER)
    throw Error(ErrorCode::device_not_found,
                "no Vulkan driver found (vkCreateInstance: VK_ERROR_INCOMPATIBLE_DRIVER): install "
                "your GPU's Vulkan driver, or Mesa's lavapipe for the CPU (Debian: apt-get install "
                "mesa-vulkan-drivers)");
  check(created, "vkCreateInstance");

  if (validation) {
    auto create = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(inst->instance_, "vkCreateDebugUtilsMessengerEXT"));
    mci.pNext = nullptr;
    VKF_CHECK(create(inst->instance_, &mci, nullptr, &inst->messenger_));
  }
  return inst;
}

Instance::~Instance() {
  if (messenger_) {
    auto destroy = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance_, "vkDestroyDebugUtilsMessengerEXT"));
    if (destroy) destroy(instance_, messenger_, nullptr);
  }
  if (instance_) vkDestroyInstance(instance_, nullptr);
}

std::vector<VkPhysicalDevice> Instance::physical_devices() const {
  uint32_t n = 0;
  VKF_CHECK(vkEnumeratePhysicalDevices(instance_, &n, nullptr));
  std::vector<VkPhysicalDevice> devices(n);
  if (n) VKF_CHECK(vkEnumeratePhysicalDevices(instance_, &n, devices.data()));
  devices.resize(n);
  return devices;
}

VKAPI_ATTR VkBool32 VKAPI_CALL Instance::on_message(
    VkDebugUtilsMessageSeverityFlagBitsEXT severity, VkDebugUtilsMessageTypeFlagsEXT type,
    const VkDebugUtilsMessengerCallbackDataEXT* data, void* user) {
  // The loader reports its own layer and driver discovery as "general" messages, some as
  // warnings: "env var 'VK_INSTANCE_LAYERS' defined and adding layers ..." whenever a user enables
  // the layer from the environment. Those say nothing about vkformer's use of Vulkan.
  const bool from_loader = data && data->pMessageIdName &&
                           std::strcmp(data->pMessageIdName, "Loader Message") == 0;
  if (from_loader && type == VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT) return VK_FALSE;
  auto* self = static_cast<Instance*>(user);
  ValidationMessage m;
  m.severity = (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) ? "error" : "warning";
  m.text = data && data->pMessage ? data->pMessage : "(no text)";
  std::lock_guard lock(self->mutex_);
  // Keep a bounded number: a broken loop could otherwise fill memory with the same message.
  if (self->messages_.size() < 1000) self->messages_.push_back(std::move(m));
  ++self->total_messages_;
  return VK_FALSE;
}

std::vector<ValidationMessage> Instance::take_messages() {
  std::lock_guard lock(mutex_);
  return std::exchange(messages_, {});
}

size_t Instance::message_count() const {
  std::lock_guard lock(mutex_);
  return total_messages_;
}

}  // namespace vkformer::vk
