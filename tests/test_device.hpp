#pragma once
// The device every test runs on: opened once per test binary with the Khronos validation layer
// and synchronization validation on. DeviceTest fails any test during which the layer reported
// anything.
#include <gtest/gtest.h>

#include "vkformer/vkformer.hpp"

namespace vkformer::testing {

Device& test_device();

class DeviceTest : public ::testing::Test {
 protected:
  Device& device() { return test_device(); }
  void TearDown() override;
};

template <class Param>
class DeviceTestWithParam : public DeviceTest, public ::testing::WithParamInterface<Param> {};

}  // namespace vkformer::testing
