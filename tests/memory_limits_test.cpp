// Device memory limits: an executor whose arena or constants exceed the device's largest single
// allocation spreads them over several (VKFORMER_MAX_ALLOCATION_BYTES lowers that limit here),
// and a device that runs out of memory (VKFORMER_DEVICE_MEMORY_BUDGET makes lavapipe run out)
// gives a clear error and stays usable.
#include <string>
#include <vector>

#include "device_impl.hpp"
#include "reference.hpp"
#include "test_device.hpp"
#include "test_util.hpp"

namespace vkformer::testing {
namespace {

constexpr int64_t kTokens = 400, kIn = 256, kHidden = 520;

// y = relu(x·w1ᵀ)·w2ᵀ: x (400 KB) and h (832 KB) are alive together, and the weights take
// 532 KB each, so neither the activations nor the constants fit one allocation of 1 MiB.
Graph two_layers(const std::vector<float>& w1, const std::vector<float>& w2) {
  Graph g;
  Tensor x = g.input("x", {kTokens, kIn});
  Tensor h = g.linear(x, g.constant("w1", make_tensor({kHidden, kIn}, w1, DType::f32)), {},
                      Activation::relu);
  g.output("y", g.linear(h, g.constant("w2", make_tensor({kIn, kHidden}, w2, DType::f32))));
  return g;
}

std::vector<double> two_layers_reference(const std::vector<float>& x, const std::vector<float>& w1,
                                         const std::vector<float>& w2) {
  auto h = ref::matmul(stored(x, DType::f32), stored(w1, DType::f32), 1, 1, kTokens, kHidden, kIn,
                       true, nullptr, 1.0);
  for (double& v : h) v = ref::relu(v);
  return ref::matmul(h, stored(w2, DType::f32), 1, 1, kTokens, kIn, kHidden, true, nullptr, 1.0);
}

TEST_F(DeviceTest, ArenaAndConstantsSpreadOverSeveralAllocations) {
  Device dev = open_test_device_with_env({{"VKFORMER_MAX_ALLOCATION_BYTES", "1048576"}});
  ASSERT_EQ(dev.impl().allocator().max_allocation(), 1u << 20);
  const auto x = random_values(kTokens * kIn, 1), w1 = random_values(kHidden * kIn, 2),
             w2 = random_values(kIn * kHidden, 3);
  Executor ex(dev, two_layers(w1, w2));
  EXPECT_GT(ex.stats().activation_bytes, 1u << 20);
  EXPECT_GT(ex.stats().constant_bytes, 1u << 20);
  auto out = ex.run({{"x", make_tensor({kTokens, kIn}, x, DType::f32)}});
  Tolerance tol = default_tolerance(DType::f32);
  tol.atol *= 32;  // sums of 256 and 520 products
  EXPECT_TRUE(all_close(out["y"], two_layers_reference(x, w1, w2), tol));
}

TEST_F(DeviceTest, OneTensorBeyondTheLargestAllocationIsAClearError) {
  Device dev = open_test_device_with_env({{"VKFORMER_MAX_ALLOCATION_BYTES", "1048576"}});
  Graph g;
  g.output("y", g.scale(g.input("x", {300000}), 2.0f));  // 1.2 MB
  EXPECT_TRUE(fails_with([&] { Executor ex(dev, g); }, ErrorCode::unsupported,
                         "activation arena needs 1.1 MiB in one allocation"));
  EXPECT_TRUE(fails_with([&] { dev.allocate({300000}, DType::f32); }, ErrorCode::unsupported,
                         "maxMemoryAllocationSize"));
}

// With a 48 MiB budget: tensors of 16 MiB until the device refuses, an executor that needs more
// than is left (none); each refusal names the size, the heap and the budget, and afterwards the device
// still allocates and runs.
TEST_F(DeviceTest, OutOfDeviceMemoryIsAClearErrorAndTheDeviceStaysUsable) {
  Device dev = open_test_device_with_env({{"VKFORMER_DEVICE_MEMORY_BUDGET", "50331648"}});
  const Shape sixteen_mib{4 << 20};
  std::vector<DeviceTensor> held;
  std::string message;
  try {
    for (int i = 0; i < 8; ++i) held.push_back(dev.allocate(sixteen_mib, DType::f32));
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::out_of_memory) << e.what();
    message = e.what();
  }
  EXPECT_EQ(held.size(), 3u) << "the budget's 48 MiB hold 3 tensors of 16 MiB";
  for (const char* part : {"Device::allocate", "16.0 MiB", "heap 0", "device-local",
                           "VK_ERROR_OUT_OF_DEVICE_MEMORY", "VKFORMER_DEVICE_MEMORY_BUDGET"})
    EXPECT_NE(message.find(part), std::string::npos) << "missing '" << part << "' in: " << message;

  const auto x = random_values(kTokens * kIn, 4), w1 = random_values(kHidden * kIn, 5),
             w2 = random_values(kIn * kHidden, 6);
  Graph big;
  big.output("y", big.scale(big.input("x", {6 << 20}), 2.0f));  // 24 MiB of input and output
  EXPECT_TRUE(fails_with([&] { Executor ex(dev, big); }, ErrorCode::out_of_memory,
                         "activation arena"));

  // Still usable: what is held reads back, freed memory is allocated again, and an executor
  // runs in what is left.
  HostTensor zeros = dev.download(held[0]);
  EXPECT_EQ(zeros.shape(), sixteen_mib);
  held.resize(1);
  held.push_back(dev.allocate(sixteen_mib, DType::f32));
  Executor ex(dev, two_layers(w1, w2));
  auto out = ex.run({{"x", make_tensor({kTokens, kIn}, x, DType::f32)}});
  Tolerance tol = default_tolerance(DType::f32);
  tol.atol *= 32;
  EXPECT_TRUE(all_close(out["y"], two_layers_reference(x, w1, w2), tol));
}

}  // namespace
}  // namespace vkformer::testing
