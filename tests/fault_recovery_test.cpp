// What the library does when the device fails under it, with the failures made by the vkfault
// layer (tests/fault_layer/README.md) at chosen calls: a lost device makes every object on it
// fail with device_lost and a message (never stale numbers, never a crash), running out of
// device memory is an out_of_memory error after which the device still works, a load that runs
// out says what it needed and what would fit, and in every case nothing is left alive (the
// layer's object count) and the validation layer reports nothing. The C API returns the same as
// statuses with messages. A new device afterwards gives the answers a device without faults gave.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "device_impl.hpp"
#include "fault_injection.hpp"
#include "llm/load_memory.hpp"
#include "llm/loaded_model.hpp"
#include "test_util.hpp"
#include "vkformer/llm.hpp"
#include "vkformer/vkformer.h"
#include "vkformer/vkformer.hpp"

namespace vkformer::testing {
namespace {

const std::string kTiny = std::string(VKF_TINY_LLAMA_DIR) + "/tiny_llama_tied.gguf";
constexpr int64_t kM = 8, kK = 16, kN = 8;

FaultLayer& layer() { return FaultLayer::get(VKF_FAULT_LAYER_DIR); }

// Validation is on for the whole binary (VKFORMER_VALIDATION=1 in its ctest environment).
Device open_device() { return Device::open(DeviceOptions{}); }

Graph matmul_graph() {
  Graph g;
  g.output("y", g.matmul(g.input("a", {kM, kK}), g.input("b", {kK, kN})));
  return g;
}

const std::vector<float> kA = random_values(kM * kK, 11), kB = random_values(kK * kN, 12);

std::vector<double> matmul_reference() {
  std::vector<double> y(kM * kN, 0.0);
  for (int64_t i = 0; i < kM; ++i)
    for (int64_t j = 0; j < kN; ++j)
      for (int64_t k = 0; k < kK; ++k) y[i * kN + j] += double(kA[i * kK + k]) * kB[k * kN + j];
  return y;
}

void set_inputs(Executor& ex) {
  ex.set_input("a", make_tensor({kM, kK}, kA, DType::f32));
  ex.set_input("b", make_tensor({kK, kN}, kB, DType::f32));
}

::testing::AssertionResult runs_correctly(Device& dev) {
  Executor ex(dev, matmul_graph());
  set_inputs(ex);
  ex.run();
  return all_close(ex.output("y"), matmul_reference(), default_tolerance(DType::f32));
}

void expect_no_validation_messages(Device& dev) {
  for (const auto& m : dev.take_validation_messages())
    ADD_FAILURE() << "Vulkan validation " << m.severity << ": " << m.text;
}

// Every test starts without faults, on a process where the layer is in the Vulkan chain, and
// ends with as many live Vulkan objects as it started with.
class FaultRecovery : public ::testing::Test {
 protected:
  void SetUp() override {
    layer().disarm();
    live_before_ = layer().live_objects();
  }
  void TearDown() override {
    layer().disarm();
    EXPECT_EQ(layer().live_objects(), live_before_) << "Vulkan objects left alive by the test";
  }
  // A run whose wait for its fence fails as `fault` arms the layer: device_lost naming `first`,
  // then every later run and output "was lost earlier".
  void expect_the_wait_loses_the_device(const char* fault, const char* first) {
    Device dev = open_device();
    Executor ex(dev, matmul_graph());
    set_inputs(ex);
    layer().arm(fault);
    EXPECT_TRUE(fails_with([&] { ex.run(); }, ErrorCode::device_lost, first));
    EXPECT_TRUE(fails_with([&] { ex.run(); }, ErrorCode::device_lost, "was lost earlier"));
    EXPECT_TRUE(fails_with([&] { ex.output("y"); }, ErrorCode::device_lost, "was lost earlier"));
    expect_no_validation_messages(dev);
  }
  int64_t live_before_ = 0;
};

TEST_F(FaultRecovery, TheLayerSeesTheLibrarysCalls) {
  Device dev = open_device();
  ASSERT_TRUE(runs_correctly(dev));
  // The layer is in the chain (not merely loaded by this test), counting what the library does.
  EXPECT_GE(layer().calls("vkQueueSubmit"), 1u);
  EXPECT_GE(layer().calls("vkCreateComputePipelines"), 1u);
  EXPECT_GT(layer().live_objects(), live_before_);
  EXPECT_EQ(layer().injected(), 0u);
  expect_no_validation_messages(dev);
}

// A submission that loses the device: that run and every later use of anything made on the
// device fail with device_lost, and a new device computes the same as before.
TEST_F(FaultRecovery, ALostDeviceMakesEveryObjectOnItFailClearly) {
  {
    Device dev = open_device();
    Executor ex(dev, matmul_graph());
    set_inputs(ex);
    ex.run();
    ASSERT_TRUE(all_close(ex.output("y"), matmul_reference(), default_tolerance(DType::f32)));
    DeviceTensor t = dev.upload(make_tensor({kK, kN}, kB, DType::f32));

    EXPECT_FALSE(dev.lost());
    layer().arm("vkQueueSubmit:1");
    EXPECT_TRUE(fails_with([&] { ex.run(); }, ErrorCode::device_lost,
                           "vkQueueSubmit failed: VK_ERROR_DEVICE_LOST"));
    EXPECT_EQ(layer().injected(), 1u);
    EXPECT_TRUE(dev.lost());
    const std::string lost = "was lost earlier";
    EXPECT_TRUE(fails_with([&] { ex.run(); }, ErrorCode::device_lost, lost));
    // Never the numbers of the run before the loss.
    EXPECT_TRUE(fails_with([&] { ex.output("y"); }, ErrorCode::device_lost, lost));
    EXPECT_TRUE(fails_with([&] { dev.download(t); }, ErrorCode::device_lost, lost));
    EXPECT_TRUE(fails_with([&] { dev.upload(make_tensor({kK, kN}, kB, DType::f32)); },
                           ErrorCode::device_lost, lost));
    EXPECT_TRUE(fails_with([&] { dev.allocate({4}, DType::f32); }, ErrorCode::device_lost, lost));
    EXPECT_TRUE(fails_with([&] { Executor again(dev, matmul_graph()); }, ErrorCode::device_lost, lost));
    EXPECT_EQ(layer().injected(), 1u) << "the later failures come from the library, not the layer";
    expect_no_validation_messages(dev);
  }
  EXPECT_EQ(layer().live_objects(), live_before_);
  layer().disarm();
  Device fresh = open_device();
  EXPECT_TRUE(runs_correctly(fresh));
  expect_no_validation_messages(fresh);
}

TEST_F(FaultRecovery, ALossFoundWhileWaitingIsTheSame) {
  expect_the_wait_loses_the_device("vkWaitForFences:1", "vkWaitForFences failed: VK_ERROR_DEVICE_LOST");
}

// A fence that never signals (the layer's VK_TIMEOUT) is a hung device: treated as lost.
TEST_F(FaultRecovery, AFenceThatNeverSignalsIsTreatedAsALostDevice) {
  expect_the_wait_loses_the_device("vkWaitForFences:1=VK_TIMEOUT", "(vkWaitForFences: VK_TIMEOUT)");
}

// Out of device memory while compiling: an error naming vkAllocateMemory and what to try, and
// afterwards the same device compiles and runs the graph correctly.
TEST_F(FaultRecovery, OutOfDeviceMemoryLeavesTheDeviceUsable) {
  Device dev = open_device();  // no memory blocks yet: the executor's arena needs a new one
  layer().arm("vkAllocateMemory:1+");
  EXPECT_TRUE(fails_with([&] { Executor ex(dev, matmul_graph()); }, ErrorCode::out_of_memory,
                         "(vkAllocateMemory: VK_ERROR_OUT_OF_DEVICE_MEMORY"));
  EXPECT_GE(layer().injected(), 1u);
  layer().disarm();
  EXPECT_TRUE(runs_correctly(dev));
  expect_no_validation_messages(dev);
}

// Each of the other calls that can run out while compiling, failing once: an error naming it and
// what to try, and nothing of the half-made executor left alive: the failed compile and a good
// one leave a device with as many objects (its cached pipelines and memory blocks) as a good one
// alone leaves another device with.
TEST_F(FaultRecovery, EveryFailedCreationFreesWhatWasMadeBeforeIt) {
  auto good_compile = [](Device& dev) { EXPECT_TRUE(runs_correctly(dev)); };
  for (const char* fn : {"vkCreateShaderModule", "vkCreateDescriptorSetLayout", "vkCreatePipelineLayout",
                         "vkCreateComputePipelines", "vkCreateDescriptorPool", "vkAllocateDescriptorSets",
                         "vkCreateBufferView", "vkCreateCommandPool", "vkAllocateCommandBuffers",
                         "vkCreateFence", "vkBeginCommandBuffer", "vkEndCommandBuffer", "vkMapMemory",
                         "vkCreateBuffer", "vkBindBufferMemory"}) {
    SCOPED_TRACE(fn);
    int64_t control = 0, faulted = 0;
    {
      const int64_t before = layer().live_objects();
      Device dev = open_device();
      good_compile(dev);
      control = layer().live_objects() - before;
      expect_no_validation_messages(dev);
    }
    {
      const int64_t before = layer().live_objects();
      Device dev = open_device();  // nothing cached: every call is made
      layer().arm(std::string(fn) + ":1+");
      try {
        Executor ex(dev, matmul_graph());
        ADD_FAILURE() << "no error";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(fn), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("try"), std::string::npos) << e.what();
      }
      EXPECT_GE(layer().injected(), 1u);
      layer().disarm();
      good_compile(dev);
      faulted = layer().live_objects() - before;
      expect_no_validation_messages(dev);
    }
    EXPECT_EQ(faulted, control) << "objects the failed compile left behind";
  }
}

// ------------------------------------------------------------------------- language models

std::vector<int32_t> prompt_ids(const LanguageModel& lm) { return lm.tokenizer().encode("hello there"); }

// Loss in the middle of a conversation: append fails and keeps failing, position() stays where
// the failed call found it, and a model loaded on a new device gives the logits of before.
TEST_F(FaultRecovery, ALanguageModelOnALostDeviceFailsAndANewOneAnswersAsBefore) {
  std::vector<float> want;
  {
    Device dev = open_device();
    LanguageModel lm = LanguageModel::load(dev, kTiny);
    const std::vector<int32_t> ids = prompt_ids(lm);
    want = lm.append(ids);
    lm.reset();
    layer().arm("vkQueueSubmit:1");
    EXPECT_TRUE(fails_with([&] { lm.append(ids); }, ErrorCode::device_lost, "vkQueueSubmit"));
    EXPECT_EQ(lm.position(), 0);
    EXPECT_TRUE(fails_with([&] { lm.append(ids); }, ErrorCode::device_lost, "was lost earlier"));
    EXPECT_TRUE(fails_with([&] { LanguageModel::load(dev, kTiny); }, ErrorCode::device_lost,
                           "was lost earlier"));
    expect_no_validation_messages(dev);
  }
  layer().disarm();
  Device dev = open_device();
  LanguageModel lm = LanguageModel::load(dev, kTiny);
  EXPECT_EQ(lm.append(prompt_ids(lm)), want) << "the same model on a new device computes the same";
  expect_no_validation_messages(dev);
}

// A recoverable failure in the middle of a long prompt (the second chunk's submission runs out
// of memory): the call fails, position() is unchanged, and the same call then succeeds with the
// logits a model without faults gives.
TEST_F(FaultRecovery, AFailedAppendLeavesThePositionAndTheNextAppendIsRight) {
  Device dev = open_device();
  LanguageModel lm = LanguageModel::load(dev, kTiny);
  std::vector<int32_t> ids(100);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 37 + 5) % lm.config().vocab_size);
  const std::vector<float> want = lm.append(ids);
  lm.reset();
  ASSERT_EQ(lm.append(std::vector<int32_t>(ids.begin(), ids.begin() + 3)).size(), want.size());
  const int64_t before = lm.position();
  lm.truncate(0);
  layer().arm("vkQueueSubmit:2=VK_ERROR_OUT_OF_DEVICE_MEMORY");  // the prompt's second chunk
  EXPECT_TRUE(fails_with([&] { lm.append(ids); }, ErrorCode::out_of_memory, "vkQueueSubmit"));
  EXPECT_EQ(layer().injected(), 1u);
  EXPECT_EQ(lm.position(), 0);
  layer().disarm();
  EXPECT_EQ(lm.append(ids), want);
  EXPECT_EQ(lm.position(), static_cast<int64_t>(ids.size()));
  EXPECT_EQ(before, 3);
  expect_no_validation_messages(dev);
}

// Out of device memory while loading: what the model needs (weights, KV cache at its context)
// and what to try, nothing of it left on the device, and the next load works.
TEST_F(FaultRecovery, ALoadThatRunsOutOfMemorySaysWhatItNeeded) {
  Device dev = open_device();
  layer().arm("vkAllocateMemory:1+");
  try {
    LanguageModel::load(dev, kTiny);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::out_of_memory);
    const std::string m = e.what();
    for (const char* part : {"LanguageModel::load: out of device memory", "for its weights",
                             "for its KV cache (a context of 128 tokens, K in f32, V in f32)", "device-local memory",
                             "try", "vkAllocateMemory"})
      EXPECT_NE(m.find(part), std::string::npos) << "'" << part << "' missing in: " << m;
  }
  EXPECT_EQ(dev.impl().allocator().device_bytes_in_use(), 0u) << "the failed load holds nothing";
  layer().disarm();
  LanguageModel lm = LanguageModel::load(dev, kTiny);
  EXPECT_EQ(lm.context(), 128);
  expect_no_validation_messages(dev);
}

// The advice itself, on a device with a 64 MiB budget (VKFORMER_DEVICE_MEMORY_BUDGET): what
// fits is computed from the numbers below, independently of load_memory.cpp.
TEST_F(FaultRecovery, TheAdviceOfAFailedLoadSaysWhatWouldFit) {
  const char* saved = std::getenv("VKFORMER_DEVICE_MEMORY_BUDGET");
  setenv("VKFORMER_DEVICE_MEMORY_BUDGET", "67108864", 1);
  Device dev = open_device();
  if (saved) setenv("VKFORMER_DEVICE_MEMORY_BUDGET", saved, 1);
  else unsetenv("VKFORMER_DEVICE_MEMORY_BUDGET");
  using models::llm::LoadMemory;
  using models::llm::LoadOptions;
  const Error cause(ErrorCode::out_of_memory, "the device's own message");
  auto advice = [&](const LoadMemory& need, DType activations) {
    LoadOptions o;
    o.activations = activations;
    try {
      models::llm::rethrow_out_of_memory(dev, need, o, "LanguageModel::load", cause);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::out_of_memory);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  constexpr uint64_t MiB = 1 << 20;
  // 40 MiB of weights leave 24 MiB: 1536 rows of 16 KiB, less the 64 of a prompt chunk, is
  // 1472 tokens (1280, in whole 256s); in f16 a row takes 8 KiB: 3008 (2816); in q8_0 (34 bytes
  // per 32 values) 4352 bytes: 5718, so the whole 4096. Head dim 64, 8 bytes per K and V value.
  const LoadMemory tight{40 * MiB, 16 * 1024, 4096, 64, 64, 8.0};
  const std::string m = advice(tight, DType::f32);
  for (const char* part : {"needs 40.0 MiB for its weights and 65.0 MiB for its KV cache (a context of 4096 tokens, K in f32, V in f32)",
                           "has 64.0 MiB (VKFORMER_DEVICE_MEMORY_BUDGET) of device-local memory",
                           "Try a context of 1280 tokens or less, f16 KV caches (--cache-type-k f16 --cache-type-v f16: 2816 tokens), "
                           "q8_0 KV caches (--cache-type-k q8_0 --cache-type-v q8_0: 4096 tokens), or another device",
                           "(the device's own message)"})
    EXPECT_NE(m.find(part), std::string::npos) << "'" << part << "' missing in: " << m;
  // Already in f16: q8_0 offered, f16 not.
  const std::string f16 = advice(LoadMemory{40 * MiB, 8 * 1024, 4096, 64, 64, 4.0}, DType::f16);
  EXPECT_NE(f16.find("Try a context of 2816 tokens or less, q8_0 KV caches (--cache-type-k q8_0 --cache-type-v "
                     "q8_0: 4096 tokens), or another device"), std::string::npos) << f16;
  // A head dim that is not whole 32-value blocks: no q8_0 offered.
  const std::string odd = advice(LoadMemory{40 * MiB, 8 * 1024, 4096, 64, 48, 4.0}, DType::f16);
  EXPECT_NE(odd.find("Try a context of 2816 tokens or less, or another device"), std::string::npos) << odd;
  const std::string weights = advice(LoadMemory{80 * MiB, 16 * 1024, 4096, 64}, DType::f32);
  EXPECT_NE(weights.find("The weights alone do not fit: try a more quantized file"), std::string::npos) << weights;
  const std::string fits = advice(LoadMemory{8 * MiB, 1024, 4096, 64}, DType::f32);
  EXPECT_NE(fits.find("That would fit, so other programs hold the memory: try again"), std::string::npos) << fits;
  expect_no_validation_messages(dev);
}

// ------------------------------------------------------------------------------------ C API

TEST_F(FaultRecovery, TheCApiReturnsDeviceLostAndOutOfMemoryWithMessages) {
  vkf_device* dev = nullptr;
  ASSERT_EQ(vkf_device_open(nullptr, &dev), VKF_OK) << vkf_last_error();
  vkf_llm* llm = nullptr;
  layer().arm("vkAllocateMemory:1+");
  EXPECT_EQ(vkf_llm_load(dev, kTiny.c_str(), 0, &llm), VKF_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(llm, nullptr);
  EXPECT_NE(std::string(vkf_last_error()).find("out of device memory: the model needs"), std::string::npos)
      << vkf_last_error();
  layer().disarm();
  ASSERT_EQ(vkf_llm_load(dev, kTiny.c_str(), 0, &llm), VKF_OK) << vkf_last_error();
  vkf_generation_stats stats{};
  layer().arm("vkQueueSubmit:1");
  EXPECT_EQ(vkf_llm_generate(llm, "hello", 4, nullptr, nullptr, nullptr, &stats), VKF_ERROR_DEVICE_LOST);
  EXPECT_NE(std::string(vkf_last_error()).find("vkQueueSubmit failed: VK_ERROR_DEVICE_LOST"), std::string::npos)
      << vkf_last_error();
  EXPECT_EQ(vkf_llm_generate(llm, "hello", 4, nullptr, nullptr, nullptr, &stats), VKF_ERROR_DEVICE_LOST);
  EXPECT_NE(std::string(vkf_last_error()).find("was lost earlier"), std::string::npos) << vkf_last_error();
  EXPECT_EQ(vkf_device_validation_message_count(dev), 0);
  vkf_llm_release(llm);
  vkf_device_release(dev);
}

}  // namespace
}  // namespace vkformer::testing
