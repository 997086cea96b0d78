#include "test_device.hpp"

#include <cctype>
#include <cstdlib>
#include <memory>
#include <string>

#include "test_util.hpp"

namespace vkformer::testing {

// On unless VKFORMER_TEST_VALIDATION is one of the library's off words (0, false, off, no; any case).
static bool validation_wanted() {
  const char* v = std::getenv("VKFORMER_TEST_VALIDATION");
  if (!v) return true;
  std::string s(v);
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return !(s == "0" || s == "false" || s == "off" || s == "no");
}

Device& test_device() {
  static Device device = [] {
    DeviceOptions options;
    options.validation = validation_wanted();
    options.sync_validation = options.validation;
    return Device::open(options);
  }();
  return device;
}

namespace {
// Devices a test opened besides test_device(): their messages are checked at its end.
std::vector<Device>& extra_devices() {
  static std::vector<Device> devices;
  return devices;
}
}  // namespace

Device open_test_device_with_env(const std::vector<std::pair<const char*, const char*>>& env) {
  std::vector<std::unique_ptr<ScopedEnv>> scoped;
  for (auto [name, value] : env) scoped.push_back(std::make_unique<ScopedEnv>(name, value));
  DeviceOptions options;
  options.validation = validation_wanted();
  options.sync_validation = options.validation;
  options.selector = std::to_string(test_device().info().index);
  Device d = Device::open(options);
  extra_devices().push_back(d);
  return d;
}

void DeviceTest::TearDown() {
  auto report = [](Device& d) {
    for (const auto& m : d.take_validation_messages())
      ADD_FAILURE() << "Vulkan validation " << m.severity << ": " << m.text;
  };
  report(test_device());
  for (Device& d : extra_devices()) report(d);
  extra_devices().clear();
}

namespace {
// Prints which device and whether validation is on, once per binary.
class DeviceBanner : public ::testing::Environment {
 public:
  void SetUp() override {
    const DeviceInfo& info = test_device().info();
    std::printf("[ vkformer ] device: %s (%s, %s %s), validation %s\n", info.name.c_str(),
                info.type.c_str(), info.driver_name.c_str(), info.driver_info.c_str(),
                validation_wanted() ? "on (with synchronization validation)" : "OFF");
  }
  void TearDown() override {
    // Messages from outside any DeviceTest (global teardown) still fail the binary.
    auto messages = test_device().take_validation_messages();
    for (const auto& m : messages)
      std::fprintf(stderr, "Vulkan validation %s outside a test: %s\n", m.severity.c_str(),
                   m.text.c_str());
    if (!messages.empty()) std::exit(1);
  }
};
const auto* banner = ::testing::AddGlobalTestEnvironment(new DeviceBanner);
}  // namespace

}  // namespace vkformer::testing
