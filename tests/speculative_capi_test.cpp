// Speculative decoding through the C API (vkf_llm_set_speculative, vkf_llm_speculative_stats):
// greedy text with prompt lookup and with a draft vkf_llm equals plain decoding's, on the llama3
// family's tiny model (tests/golden_families) with its Q8_0 file as the draft; bad options, the
// target as its own draft and a draft of another vocabulary are VKF_ERROR_INVALID_ARGUMENT
// naming the problem, and leave the setting as it was.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "capi_device.hpp"
#include "test_device.hpp"
#include "vkformer/vkformer.h"

namespace vkformer::testing {
namespace {

const std::string kDir = VKF_FAMILIES_GOLDEN_DIR;

int32_t append_text(const char* text, size_t length, int32_t, void* user) {
  static_cast<std::string*>(user)->append(text, length);
  return 1;
}

class SpeculativeCapi : public CApiDeviceTest {
 protected:
  void SetUp() override {
    CApiDeviceTest::SetUp();
    if (HasFatalFailure()) return;
    ASSERT_EQ(vkf_llm_load(dev, (kDir + "/llama3.f32.gguf").c_str(), 128, &llm_), VKF_OK) << vkf_last_error();
    ASSERT_EQ(vkf_llm_load(dev, (kDir + "/llama3.q8_0.gguf").c_str(), 128, &draft_), VKF_OK) << vkf_last_error();
  }
  void TearDown() override {
    vkf_llm_release(draft_);
    vkf_llm_release(llm_);
    CApiDeviceTest::TearDown();
  }
  std::string greedy(const char* prompt) {
    std::string text;
    EXPECT_EQ(vkf_llm_reset(llm_, nullptr), VKF_OK) << vkf_last_error();
    EXPECT_EQ(vkf_llm_generate(llm_, prompt, 24, nullptr, append_text, &text, nullptr), VKF_OK) << vkf_last_error();
    return text;
  }
  vkf_llm *llm_ = nullptr, *draft_ = nullptr;
};

TEST_F(SpeculativeCapi, GreedyTextIsPlainDecodingsWithBothProposers) {
  const char* prompts[] = {"ab ab ab ab", "the cat the cat the", "xyz"};
  for (const char* p : prompts) {
    ASSERT_EQ(vkf_llm_set_speculative(llm_, nullptr), VKF_OK) << vkf_last_error();
    const std::string plain = greedy(p);
    for (int32_t mode : {VKF_SPECULATIVE_NGRAM, VKF_SPECULATIVE_DRAFT}) {
      vkf_speculative_options o;
      vkf_speculative_options_default(&o);
      o.mode = mode;
      o.draft = draft_;
      o.draft_max = 6;
      o.draft_p_min = 0.0f;
      ASSERT_EQ(vkf_llm_set_speculative(llm_, &o), VKF_OK) << vkf_last_error();
      EXPECT_EQ(greedy(p), plain) << "mode " << mode << " prompt " << p;
      int64_t drafted = -1, accepted = -1, passes = -1;
      ASSERT_EQ(vkf_llm_speculative_stats(llm_, &drafted, &accepted, &passes), VKF_OK);
      EXPECT_GE(drafted, accepted);
      EXPECT_GT(passes, 0);
      if (mode == VKF_SPECULATIVE_DRAFT) EXPECT_GT(drafted, 0) << p;
    }
  }
}

TEST_F(SpeculativeCapi, BadOptionsAreRefusedByNameAndKeepTheSetting) {
  vkf_speculative_options o;
  vkf_speculative_options_default(&o);
  EXPECT_EQ(o.mode, VKF_SPECULATIVE_OFF);
  EXPECT_EQ(o.draft_max, 16);
  auto refused = [&](const vkf_speculative_options& bad, const std::string& says) {
    EXPECT_EQ(vkf_llm_set_speculative(llm_, &bad), VKF_ERROR_INVALID_ARGUMENT);
    const std::string e = vkf_last_error();
    EXPECT_NE(e.find(says), std::string::npos) << e;
  };
  vkf_speculative_options zero = o;
  zero.mode = VKF_SPECULATIVE_NGRAM;
  zero.draft_max = 0;
  refused(zero, "draft_max must be in 1..63");
  vkf_speculative_options self = o;
  self.mode = VKF_SPECULATIVE_DRAFT;
  self.draft = llm_;
  refused(self, "another vkf_llm than the target");
  vkf_speculative_options none = self;
  none.draft = nullptr;
  refused(none, "needs a draft");
  vkf_llm* other = nullptr;
  ASSERT_EQ(vkf_llm_load(dev, (std::string(VKF_LLAMA_GOLDEN_DIR) + "/tiny/tiny_llama_tied.gguf").c_str(), 128, &other),
            VKF_OK);
  vkf_speculative_options foreign = self;
  foreign.draft = other;
  refused(foreign, "its vocabulary is not the target's: 384 tokens, the target has 320");
  vkf_llm_release(other);
  // Still off: a generation drafts nothing.
  std::string text;
  ASSERT_EQ(vkf_llm_generate(llm_, "ab ab ab", 8, nullptr, append_text, &text, nullptr), VKF_OK);
  int64_t drafted = -1;
  ASSERT_EQ(vkf_llm_speculative_stats(llm_, &drafted, nullptr, nullptr), VKF_OK);
  EXPECT_EQ(drafted, 0);
}

}  // namespace
}  // namespace vkformer::testing
