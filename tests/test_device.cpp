#include "test_device.hpp"

#include <cstdlib>
#include <string>

namespace vkformer::testing {

static bool validation_wanted() {
  const char* v = std::getenv("VKFORMER_TEST_VALIDATION");
  return !(v && std::string(v) == "0");
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

void DeviceTest::TearDown() {
  auto messages = test_device().take_validation_messages();
  for (const auto& m : messages) ADD_FAILURE() << "Vulkan validation " << m.severity << ": " << m.text;
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
