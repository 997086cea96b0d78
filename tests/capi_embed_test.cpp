// The C API's sentence embeddings (vkf_embedder_*) with all-MiniLM-L6-v2 (fetched by
// scripts/fetch_minilm.sh, or $VKFORMER_MINILM_DIR) against sentence-transformers' embeddings in
// tests/golden_embeddings, and its errors. ctest runs it with VKFORMER_VALIDATION=1, so the C
// API's own device is validated too.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "capi_device.hpp"
#include "fetched_models.hpp"
#include "test_device.hpp"
#include "test_util.hpp"
#include "vkformer/vkformer.h"
#include "vkformer/vkformer.hpp"

namespace vkformer::testing {
namespace {

namespace fs = std::filesystem;

using CApiEmbedTest = CApiDeviceTest;

TEST_F(CApiEmbedTest, EmbedsLikeSentenceTransformers) {
  const FetchedModel& minilm = minilm_dir();
  ASSERT_TRUE(minilm.error.empty()) << minilm.error;
  const std::string dir = minilm.path.string();
  vkf_embedder* e = nullptr;
  ASSERT_EQ(vkf_embedder_load(dev, dir.c_str(), VKF_F32, &e), VKF_OK) << vkf_last_error();
  EXPECT_EQ(vkf_embedder_dimension(e), 384);

  // The golden texts of up to 64 tokens (34 of 37): what the C API passes and returns, in order;
  // bert_test runs the 140- and 256-token ones (a run padded to 256 tokens, slow under the
  // synchronization validation this suite has on).
  std::ifstream in(std::string(VKF_GOLDEN_DIR) + "/texts.json");
  const nlohmann::json golden = nlohmann::json::parse(in);
  const auto all_texts = golden["texts"].get<std::vector<std::string>>();
  const auto tokens = golden["tokens"].get<std::vector<int>>();
  const std::vector<float> all_want = read_npy(std::string(VKF_GOLDEN_DIR) + "/embeddings_f32.npy").to_f32();
  std::vector<std::string> texts;
  std::vector<float> w;
  for (size_t i = 0; i < all_texts.size(); ++i)
    if (tokens[i] <= 64) {
      texts.push_back(all_texts[i]);
      w.insert(w.end(), all_want.begin() + static_cast<std::ptrdiff_t>(i * 384),
               all_want.begin() + static_cast<std::ptrdiff_t>((i + 1) * 384));
    }
  ASSERT_EQ(texts.size(), 34u);
  std::vector<const char*> ptrs;
  for (auto& t : texts) ptrs.push_back(t.c_str());
  vkf_result r{};
  ASSERT_EQ(vkf_embedder_embed(e, ptrs.data(), ptrs.size(), &r), VKF_OK) << vkf_last_error();
  ASSERT_EQ(r.rank, 2);
  ASSERT_EQ(r.shape[0], static_cast<int64_t>(texts.size()));
  ASSERT_EQ(r.shape[1], 384);
  double max_diff = 0;
  for (size_t i = 0; i < w.size(); ++i) max_diff = std::max(max_diff, std::abs(double(r.data[i]) - w[i]));
  std::printf("C API, %zu texts: max |diff| to sentence-transformers %.3g\n", texts.size(), max_diff);
  EXPECT_LE(max_diff, 1e-5);
  vkf_result_release(&r);
  EXPECT_EQ(r.data, nullptr);

  // Errors: a status and a message naming the problem; the embedder stays usable.
  EXPECT_EQ(vkf_embedder_embed(e, ptrs.data(), 0, &r), VKF_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(vkf_last_error()).find("no texts"), std::string::npos) << vkf_last_error();
  const char* bad[] = {"fine", "bad \xff byte"};
  EXPECT_EQ(vkf_embedder_embed(e, bad, 2, &r), VKF_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(vkf_last_error()).find("text 1"), std::string::npos) << vkf_last_error();
  const char* null_text[] = {"fine", nullptr};
  EXPECT_EQ(vkf_embedder_embed(e, null_text, 2, &r), VKF_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(vkf_last_error()).find("texts[1] is NULL"), std::string::npos);
  EXPECT_EQ(vkf_embedder_embed(e, nullptr, 1, &r), VKF_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(vkf_embedder_embed(e, bad, 1, &r), VKF_OK) << vkf_last_error();
  EXPECT_EQ(r.shape[0], 1);
  vkf_result_release(&r);
  vkf_embedder_release(e);
}

TEST_F(CApiEmbedTest, LoadErrors) {
  vkf_embedder* e = reinterpret_cast<vkf_embedder*>(1);
  EXPECT_EQ(vkf_embedder_load(dev, "/nonexistent/model", VKF_F32, &e), VKF_ERROR_IO);
  EXPECT_EQ(e, nullptr);
  EXPECT_NE(std::string(vkf_last_error()).find("does not exist"), std::string::npos) << vkf_last_error();
  // A torch.nn.Transformer fixture is no BERT directory: its config.json says so.
  const std::string golden = std::string(VKF_SOURCE_DIR) + "/tests/golden/encoder_post_relu_b1_s1";
  EXPECT_EQ(vkf_embedder_load(dev, golden.c_str(), VKF_F32, &e), VKF_ERROR_UNSUPPORTED);
  EXPECT_NE(std::string(vkf_last_error()).find("model_type"), std::string::npos) << vkf_last_error();
  EXPECT_EQ(vkf_embedder_load(dev, golden.c_str(), VKF_I32, &e), VKF_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(vkf_embedder_load(nullptr, golden.c_str(), VKF_F32, &e), VKF_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(vkf_embedder_dimension(nullptr), 0);
  vkf_embedder_release(nullptr);
}

}  // namespace
}  // namespace vkformer::testing
