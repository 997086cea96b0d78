#pragma once
// The fixture of the C API's suites: the C API opens its own device (validation follows
// VKFORMER_VALIDATION, as for any program; ctest turns it on) before each test and releases it
// after, and a validation message on it fails the test.
#include <gtest/gtest.h>

#include "test_device.hpp"
#include "vkformer/vkformer.h"

namespace vkformer::testing {

class CApiDeviceTest : public DeviceTest {
 protected:
  void SetUp() override { ASSERT_EQ(vkf_device_open(nullptr, &dev), VKF_OK) << vkf_last_error(); }
  void TearDown() override {
    EXPECT_EQ(vkf_device_validation_message_count(dev), 0);
    vkf_device_release(dev);
    DeviceTest::TearDown();
  }
  vkf_device* dev = nullptr;
};

}  // namespace vkformer::testing
