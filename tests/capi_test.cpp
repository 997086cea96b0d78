// The C API (include/vkformer/vkformer.h) against the same golden data as the C++ API, and its
// error reporting: statuses and messages, never an exception across the boundary.
#include "vkformer/vkformer.h"

#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "capi_device.hpp"
#include "latch.hpp"
#include "test_device.hpp"
#include "test_util.hpp"

namespace vkformer::testing {
namespace {

namespace fs = std::filesystem;
// The fixtures: where the build put them, or VKFORMER_GOLDEN_DIR (binaries carried elsewhere).
const fs::path kGolden = std::getenv("VKFORMER_GOLDEN_DIR") ? std::getenv("VKFORMER_GOLDEN_DIR") : VKF_GOLDEN_DIR;

vkf_tensor view(const HostTensor& t) {
  vkf_tensor v{};
  v.data = t.data();
  v.dtype = static_cast<vkf_dtype>(t.dtype());
  v.rank = t.shape().rank();
  for (int i = 0; i < v.rank; ++i) v.shape[i] = t.shape()[i];
  return v;
}

using CApiTest = CApiDeviceTest;

TEST_F(CApiTest, EncoderWithPaddingMaskMatchesPyTorch) {
  fs::path dir = kGolden / "encoder_post_relu_b3_s7_padding";
  vkf_model* model = nullptr;
  ASSERT_EQ(vkf_model_load(dev, dir.string().c_str(), VKF_F32, &model), VKF_OK) << vkf_last_error();
  HostTensor src = read_npy(dir / "src.npy"), kpm = read_npy(dir / "src_key_padding_mask.npy");
  HostTensor expected = read_npy(dir / "expected.npy");
  vkf_tensor s = view(src), k = view(kpm);
  vkf_masks masks{};
  masks.src_key_padding_mask = &k;
  vkf_result out{};
  ASSERT_EQ(vkf_model_encode(model, &s, &masks, &out), VKF_OK) << vkf_last_error();
  ASSERT_EQ(out.rank, 3);
  EXPECT_EQ(out.shape[0], 3);
  auto want = expected.to_f32();
  double err = 0;
  for (size_t i = 0; i < want.size(); ++i) err = std::max(err, double(std::abs(out.data[i] - want[i])));
  EXPECT_LT(err, 1e-4);
  vkf_result_release(&out);
  vkf_model_release(model);
}

TEST_F(CApiTest, GenerateGivesPyTorchTokens) {
  fs::path dir = kGolden / "seq2seq_small";
  auto meta = nlohmann::json::parse(std::ifstream(dir / "case.json"));
  const auto& r = meta["decoding"]["results"][0];
  auto src = r["src"].get<std::vector<int32_t>>();
  vkf_model* model = nullptr;
  ASSERT_EQ(vkf_model_load(dev, dir.string().c_str(), VKF_F32, &model), VKF_OK) << vkf_last_error();
  vkf_generate_options o;
  vkf_generate_options_init(&o);
  o.eos = -1;
  std::vector<int32_t> tokens(64);
  size_t count = 0;
  ASSERT_EQ(vkf_model_generate(model, src.data(), src.size(), &o, tokens.data(), tokens.size(), &count), VKF_OK)
      << vkf_last_error();
  tokens.resize(count);
  EXPECT_EQ(tokens, r["greedy"].get<std::vector<int32_t>>());
  // Too little room: an error that says how much was needed.
  EXPECT_EQ(vkf_model_generate(model, src.data(), src.size(), &o, tokens.data(), 3, &count),
            VKF_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(count, 32u);

  // What the model is, from its config.json.
  auto config = nlohmann::json::parse(std::ifstream(dir / "config.json"));
  vkf_model_info info;
  ASSERT_EQ(vkf_model_get_info(model, &info), VKF_OK) << vkf_last_error();
  EXPECT_STREQ(info.arch, "seq2seq");
  EXPECT_EQ(info.d_model, config["d_model"].get<int64_t>());
  EXPECT_EQ(info.nhead, config["nhead"].get<int64_t>());
  EXPECT_EQ(info.dim_feedforward, config["dim_feedforward"].get<int64_t>());
  EXPECT_EQ(info.num_encoder_layers, config["num_encoder_layers"].get<int64_t>());
  EXPECT_EQ(info.num_decoder_layers, config["num_decoder_layers"].get<int64_t>());
  EXPECT_EQ(info.src_vocab, config["src_vocab"].get<int64_t>());
  EXPECT_EQ(info.tgt_vocab, config["tgt_vocab"].get<int64_t>());
  EXPECT_EQ(info.max_len, config.value("max_len", int64_t{5000}));
  EXPECT_EQ(info.dtype, VKF_F32);
  EXPECT_EQ(vkf_model_get_info(model, nullptr), VKF_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(vkf_last_error()).find("info must not be NULL"), std::string::npos);
  vkf_model_release(model);
}

TEST_F(CApiTest, ErrorsAreStatusesWithMessages) {
  vkf_model* model = nullptr;
  EXPECT_EQ(vkf_model_load(dev, "/nonexistent/model", VKF_F32, &model), VKF_ERROR_IO);
  EXPECT_NE(std::string(vkf_last_error()).find("/nonexistent/model"), std::string::npos);
  EXPECT_EQ(model, nullptr);
  vkf_device* none = nullptr;
  EXPECT_EQ(vkf_device_open("no-such-gpu", &none), VKF_ERROR_DEVICE_NOT_FOUND);
  EXPECT_NE(std::string(vkf_last_error()).find("no-such-gpu"), std::string::npos);

  ASSERT_EQ(vkf_model_load(dev, (kGolden / "encoder_post_relu_b1_s1").string().c_str(), VKF_F32, &model), VKF_OK);
  HostTensor wrong({1, 1, 16}, DType::f32);
  vkf_tensor w = view(wrong);
  vkf_result out{};
  EXPECT_EQ(vkf_model_encode(model, &w, nullptr, &out), VKF_ERROR_SHAPE_MISMATCH);
  EXPECT_NE(std::string(vkf_last_error()).find("[1,1,16]"), std::string::npos) << vkf_last_error();
  EXPECT_EQ(vkf_model_encode(model, nullptr, nullptr, &out), VKF_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(vkf_model_forward(model, &w, &w, nullptr, &out), VKF_ERROR_INVALID_ARGUMENT);
  vkf_model_release(model);
  EXPECT_STREQ(vkf_version(), "0.1.0");
}

// vkf_last_error is per thread: two threads that fail at the same time each read their own
// message, a thread that has only succeeded (opening a device of its own meanwhile) reads "",
// and the calling thread keeps its own.
TEST_F(CApiTest, LastErrorIsPerThread) {
  vkf_device* none = nullptr;
  ASSERT_EQ(vkf_device_open("no-such-gpu-main", &none), VKF_ERROR_DEVICE_NOT_FOUND);
  Latch failed(3);
  std::string seen[3];
  auto fail_then_read = [&](int t, const std::string& dir) {
    vkf_model* model = nullptr;
    vkf_status status = vkf_model_load(dev, dir.c_str(), VKF_F32, &model);
    failed.arrive_and_wait();  // every thread has failed (or not) before any reads
    seen[t] = status == VKF_ERROR_IO ? vkf_last_error() : "status " + std::to_string(status);
  };
  std::thread a(fail_then_read, 0, "/nonexistent/thread-a");
  std::thread b(fail_then_read, 1, "/nonexistent/thread-b");
  std::thread c([&] {
    vkf_device* own = nullptr;
    vkf_status status = vkf_device_open(nullptr, &own);
    vkf_device_release(own);
    failed.arrive_and_wait();
    seen[2] = status == VKF_OK ? vkf_last_error() : "status " + std::to_string(status);
  });
  a.join();
  b.join();
  c.join();
  EXPECT_NE(seen[0].find("/nonexistent/thread-a"), std::string::npos) << seen[0];
  EXPECT_NE(seen[1].find("/nonexistent/thread-b"), std::string::npos) << seen[1];
  EXPECT_EQ(seen[2], "");
  EXPECT_NE(std::string(vkf_last_error()).find("no-such-gpu-main"), std::string::npos)
      << vkf_last_error();
}

// Values a C caller can pass that C++ types cannot hold: each is checked and named before use.
TEST_F(CApiTest, OutOfRangeFieldsAreNamedBeforeUse) {
  auto expect_error = [](vkf_status got, vkf_status want, const std::string& needle) {
    EXPECT_EQ(got, want) << vkf_last_error();
    EXPECT_NE(std::string(vkf_last_error()).find(needle), std::string::npos) << vkf_last_error();
  };
  vkf_model* model = nullptr;
  int32_t bad_dtype = 77;  // not a vkf_dtype: copied in as a C caller's integer would be
  vkf_dtype dtype;
  std::memcpy(&dtype, &bad_dtype, sizeof dtype);
  fs::path dir = kGolden / "seq2seq_small";
  expect_error(vkf_model_load(dev, dir.string().c_str(), dtype, &model), VKF_ERROR_INVALID_ARGUMENT,
               "dtype is 77");
  ASSERT_EQ(vkf_model_load(dev, dir.string().c_str(), VKF_F32, &model), VKF_OK) << vkf_last_error();

  HostTensor ids({1, 3}, DType::i32);
  vkf_tensor src = view(ids);
  std::memcpy(&src.dtype, &bad_dtype, sizeof src.dtype);
  vkf_result out{};
  expect_error(vkf_model_encode(model, &src, nullptr, &out), VKF_ERROR_INVALID_ARGUMENT,
               "src: dtype is 77");
  src = view(ids);
  src.shape[1] = -3;
  expect_error(vkf_model_encode(model, &src, nullptr, &out), VKF_ERROR_INVALID_ARGUMENT,
               "src: shape has a negative dimension -3");

  // A wrong length is rejected before the source is copied.
  int32_t tokens[4] = {3, 4, 5, 6};
  size_t count = 0;
  expect_error(vkf_model_generate(model, tokens, size_t{1} << 40, nullptr, tokens, 4, &count),
               VKF_ERROR_INVALID_ARGUMENT, "src_length 1099511627776 is more than max_len");
  vkf_model_release(model);
}

}  // namespace
}  // namespace vkformer::testing
