#pragma once
// The device every test runs on: opened once per test binary with the Khronos validation layer
// and synchronization validation on. DeviceTest fails any test during which the layer reported
// anything.
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "vkformer/vkformer.hpp"

namespace vkformer::testing {

Device& test_device();

// Another device on the same physical device, opened with the environment variables `env` set
// (tuning overrides such as VKFORMER_MATMUL_TILES) and with the same validation as test_device().
// DeviceTest::TearDown checks its validation messages too.
Device open_test_device_with_env(const std::vector<std::pair<const char*, const char*>>& env);

class DeviceTest : public ::testing::Test {
 protected:
  Device& device() { return test_device(); }
  void TearDown() override;
};

template <class Param>
class DeviceTestWithParam : public DeviceTest, public ::testing::WithParamInterface<Param> {};

}  // namespace vkformer::testing
