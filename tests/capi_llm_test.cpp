// The C API for GGUF language models (vkf_llm_* in vkformer.h) against the C++ API on the tiny
// llama (tests/golden_llama/tiny): the same ids, text, tokens and stats, conversations that keep
// the cache, and every failure as a status with a message.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "capi_device.hpp"
#include "test_device.hpp"
#include "test_util.hpp"
#include "vkformer/gguf_tokenizer.hpp"
#include "vkformer/generate.hpp"
#include "vkformer/llm.hpp"
#include "vkformer/vkformer.h"

namespace vkformer::testing {
namespace {

const std::string kTiny = std::string(VKF_LLAMA_GOLDEN_DIR) + "/tiny/tiny_llama_untied.gguf";

struct Collected {
  std::string text;
  std::vector<int32_t> tokens;
  int stop_after = -1;
};

int32_t collect(const char* text, size_t length, int32_t token, void* user) {
  auto* c = static_cast<Collected*>(user);
  c->text.append(text, length);
  if (token >= 0) c->tokens.push_back(token);
  return c->stop_after < 0 || static_cast<int>(c->tokens.size()) < c->stop_after;
}

class CapiLlm : public CApiDeviceTest {
 protected:
  void SetUp() override {
    CApiDeviceTest::SetUp();
    if (HasFatalFailure()) return;
    ASSERT_EQ(vkf_llm_load(dev, kTiny.c_str(), 128, &llm_), VKF_OK) << vkf_last_error();
  }
  void TearDown() override {
    vkf_llm_release(llm_);
    CApiDeviceTest::TearDown();
  }
  vkf_llm* llm_ = nullptr;
};

TEST_F(CapiLlm, TokenizeAndDetokenizeAsTheCppTokenizer) {
  const auto tok = GgufTokenizer::load(kTiny);
  const char* text = "<|im_start|>user\nhello there<|im_end|>\n";
  const auto want = tok.encode(text);
  std::vector<int32_t> ids(want.size());
  size_t count = 0;
  ASSERT_EQ(vkf_llm_tokenize(llm_, text, 1, ids.data(), ids.size(), &count), VKF_OK) << vkf_last_error();
  EXPECT_EQ(count, want.size());
  EXPECT_EQ(ids, want);
  // Too small: the status, and how many are needed.
  EXPECT_EQ(vkf_llm_tokenize(llm_, text, 1, ids.data(), 2, &count), VKF_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(count, want.size());
  EXPECT_NE(std::string(vkf_last_error()).find("capacity is 2"), std::string::npos) << vkf_last_error();
  std::vector<char> buf(256);
  size_t length = 0;
  ASSERT_EQ(vkf_llm_detokenize(llm_, ids.data(), ids.size(), buf.data(), buf.size(), &length), VKF_OK);
  EXPECT_EQ(std::string(buf.data(), length), text);
  EXPECT_EQ(buf[length], '\0');
  EXPECT_EQ(vkf_llm_detokenize(llm_, ids.data(), ids.size(), buf.data(), length, &length), VKF_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(vkf_llm_vocab_size(llm_), 384);
  EXPECT_EQ(vkf_llm_context(llm_), 128);
}

TEST_F(CapiLlm, GenerateStreamsWhatTheCppApiGenerates) {
  LanguageModel lm = LanguageModel::load(device(), kTiny, {.context = 128});
  const auto want = generate(lm, lm.tokenizer().encode("hello"), {.max_tokens = 12});

  Collected got;
  vkf_generation_stats stats{};
  ASSERT_EQ(vkf_llm_generate(llm_, "hello", 12, nullptr, collect, &got, &stats), VKF_OK) << vkf_last_error();
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_EQ(got.text, want.text);
  EXPECT_EQ(stats.generated_tokens, static_cast<int64_t>(want.tokens.size()));
  EXPECT_EQ(stats.prompt_tokens, want.stats.prompt_tokens);
  EXPECT_EQ(stats.stop_reason, static_cast<int32_t>(want.stats.stop));
  EXPECT_EQ(vkf_llm_position(llm_), lm.position());

  // Seeded sampling through the options struct; a callback that stops after 3 tokens.
  vkf_sampling_options s;
  vkf_sampling_options_default(&s);
  EXPECT_EQ(s.temperature, 0.0f);
  EXPECT_EQ(s.top_p, 1.0f);
  s.temperature = 1.0f;
  s.seed = 5;
  lm.reset();
  const auto sampled = generate(lm, lm.tokenizer().encode("hello"), {.max_tokens = 10, .sampling = {.temperature = 1.0f, .seed = 5}});
  ASSERT_EQ(vkf_llm_reset(llm_, nullptr), VKF_OK);
  Collected c2;
  ASSERT_EQ(vkf_llm_generate(llm_, "hello", 10, &s, collect, &c2, nullptr), VKF_OK) << vkf_last_error();
  EXPECT_EQ(c2.tokens, sampled.tokens);
  ASSERT_EQ(vkf_llm_reset(llm_, nullptr), VKF_OK);
  Collected c3;
  c3.stop_after = 3;
  ASSERT_EQ(vkf_llm_generate(llm_, "hello", 10, nullptr, collect, &c3, &stats), VKF_OK);
  EXPECT_EQ(c3.tokens.size(), 3u);
  EXPECT_EQ(stats.stop_reason, VKF_STOP_CALLBACK);
}

TEST_F(CapiLlm, ChatKeepsTheConversation) {
  LanguageModel lm = LanguageModel::load(device(), kTiny, {.context = 128});
  Conversation want(lm, ChatTemplate::load(kTiny), "Be brief.");
  const auto w1 = want.reply("hi", {.max_tokens = 5});
  const auto w2 = want.reply("again", {.max_tokens = 5});

  ASSERT_EQ(vkf_llm_reset(llm_, "Be brief."), VKF_OK);
  Collected a, b;
  ASSERT_EQ(vkf_llm_chat(llm_, "hi", 5, nullptr, collect, &a, nullptr), VKF_OK) << vkf_last_error();
  ASSERT_EQ(vkf_llm_chat(llm_, "again", 5, nullptr, collect, &b, nullptr), VKF_OK) << vkf_last_error();
  EXPECT_EQ(a.tokens, w1.tokens);
  EXPECT_EQ(b.tokens, w2.tokens);
  EXPECT_EQ(vkf_llm_position(llm_), lm.position());
  ASSERT_EQ(vkf_llm_reset(llm_, nullptr), VKF_OK);
  EXPECT_EQ(vkf_llm_position(llm_), 0);
}

// The KV cache's types (issue 37): the bytes a token takes, from the allocations (the k-quant
// tiny llama: 2 layers, 2 KV heads of 64: q8_0 keys 2 x 34 bytes, q4_0 values 2 x 18), a
// generation with those types, and bad names naming the argument.
TEST_F(CapiLlm, CacheTypesTakeTheirBytesAndNameBadInput) {
  const std::string kquant = std::string(VKF_LLAMA_GOLDEN_DIR) + "/tiny/tiny_llama_kquant.gguf";
  vkf_llm* llm = nullptr;
  ASSERT_EQ(vkf_llm_load_with_cache_types(dev, kquant.c_str(), 64, "q8_0", "q4_0", &llm), VKF_OK) << vkf_last_error();
  EXPECT_EQ(vkf_llm_kv_bytes_per_token(llm), 2 * 2 * (68 + 36));
  EXPECT_EQ(vkf_llm_kv_bytes_per_token(llm_), 2 * 2 * 2 * 16 * 4);  // the untied tiny llama: f32, 2 heads of 16
  Collected got;
  ASSERT_EQ(vkf_llm_generate(llm, "hello", 6, nullptr, collect, &got, nullptr), VKF_OK) << vkf_last_error();
  EXPECT_EQ(got.tokens.size(), 6u);  // the tokens themselves: kv_quant_test's kernels, python's greedy text
  vkf_llm_release(llm);
  vkf_llm* none = nullptr;
  EXPECT_EQ(vkf_llm_load_with_cache_types(dev, kquant.c_str(), 64, "q8", nullptr, &none), VKF_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(vkf_last_error()).find("cache_type_k: unknown cache type 'q8': expected f32, f16, q8_0 or q4_0"),
            std::string::npos) << vkf_last_error();
  EXPECT_EQ(vkf_llm_load_with_cache_types(dev, kTiny.c_str(), 64, nullptr, "q4_0", &none), VKF_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(vkf_last_error()).find("cache_type_v q4_0 (not the activations' type) is read in whole blocks of 32 values a row, and this model's head dim is 16"),
            std::string::npos) << vkf_last_error();
  EXPECT_EQ(none, nullptr);
  EXPECT_EQ(vkf_llm_kv_bytes_per_token(nullptr), 0);
}

TEST_F(CapiLlm, FailuresAreStatusesWithMessages) {
  auto message = [] { return std::string(vkf_last_error()); };
  vkf_llm* none = nullptr;
  EXPECT_EQ(vkf_llm_load(dev, "/no/such/model.gguf", 0, &none), VKF_ERROR_IO);
  EXPECT_NE(message().find("/no/such/model.gguf"), std::string::npos) << message();
  EXPECT_EQ(none, nullptr);
  EXPECT_EQ(vkf_llm_load(dev, kTiny.c_str(), -1, &none), VKF_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(vkf_llm_load(nullptr, kTiny.c_str(), 0, &none), VKF_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(vkf_llm_generate(llm_, "hello", 0, nullptr, nullptr, nullptr, nullptr), VKF_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(message().find("max_tokens must be > 0, got 0"), std::string::npos) << message();
  vkf_sampling_options s;
  vkf_sampling_options_default(&s);
  s.top_p = 0.0f;
  EXPECT_EQ(vkf_llm_generate(llm_, "hello", 4, &s, nullptr, nullptr, nullptr), VKF_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(message().find("top_p must be in (0, 1]"), std::string::npos) << message();
  EXPECT_EQ(vkf_llm_generate(nullptr, "hello", 4, nullptr, nullptr, nullptr, nullptr), VKF_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(vkf_llm_chat(llm_, nullptr, 4, nullptr, nullptr, nullptr, nullptr), VKF_ERROR_INVALID_ARGUMENT);
  // A prompt longer than the 128-token cache.
  std::string long_prompt;
  for (int i = 0; i < 200; ++i) long_prompt += "hello ";
  EXPECT_EQ(vkf_llm_generate(llm_, long_prompt.c_str(), 4, nullptr, nullptr, nullptr, nullptr), VKF_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(message().find("128"), std::string::npos) << message();
  EXPECT_EQ(vkf_llm_vocab_size(nullptr), 0);
  vkf_llm_release(nullptr);
}

// What a token callback that calls back into its own vkf_llm saw.
struct Reentry {
  vkf_llm* llm = nullptr;
  enum Call { generate, chat, reset, release } call = generate;
  int calls = 0;
  std::vector<vkf_status> statuses;
  std::vector<std::string> messages;
  std::vector<int64_t> positions;
};

int32_t call_back_in(const char*, size_t, int32_t, void* user) {
  auto* r = static_cast<Reentry*>(user);
  r->positions.push_back(vkf_llm_position(r->llm));  // reading is allowed
  if (r->calls++ >= 2) return 1;
  vkf_status s = VKF_OK;
  switch (r->call) {
    case Reentry::generate: s = vkf_llm_generate(r->llm, "nested", 4, nullptr, nullptr, nullptr, nullptr); break;
    case Reentry::chat: s = vkf_llm_chat(r->llm, "nested", 4, nullptr, nullptr, nullptr, nullptr); break;
    case Reentry::reset: s = vkf_llm_reset(r->llm, nullptr); break;
    case Reentry::release: vkf_llm_release(r->llm); return 1;
  }
  r->statuses.push_back(s);
  r->messages.push_back(vkf_last_error());
  return 1;
}

// Calls from inside a token callback that would change the same vkf_llm are refused with
// VKF_ERROR_BUSY, and the outer call generates exactly what it generates alone: nested
// generate's tokens once landed in the outer cache (position 15 instead of 11) and a nested
// reset emptied it mid-reply, while the outer call returned VKF_OK.
TEST_F(CapiLlm, CallsFromInsideATokenCallbackOnTheSameModelAreRefused) {
  Collected alone;
  ASSERT_EQ(vkf_llm_generate(llm_, "hello", 6, nullptr, collect, &alone, nullptr), VKF_OK) << vkf_last_error();
  const int64_t want_position = vkf_llm_position(llm_);
  ASSERT_EQ(alone.tokens.size(), 6u);

  const char* outer[] = {"vkf_llm_generate", "vkf_llm_generate", "vkf_llm_generate"};
  const char* inner[] = {"vkf_llm_generate", "vkf_llm_chat", "vkf_llm_reset"};
  for (Reentry::Call call : {Reentry::generate, Reentry::chat, Reentry::reset}) {
    SCOPED_TRACE(inner[call]);
    ASSERT_EQ(vkf_llm_reset(llm_, nullptr), VKF_OK);
    Reentry r{llm_, call};
    vkf_generation_stats stats{};
    ASSERT_EQ(vkf_llm_generate(llm_, "hello", 6, nullptr, call_back_in, &r, &stats), VKF_OK) << vkf_last_error();
    EXPECT_EQ(stats.generated_tokens, 6);
    EXPECT_EQ(vkf_llm_position(llm_), want_position);
    ASSERT_EQ(r.statuses.size(), 2u);
    for (size_t i = 0; i < r.statuses.size(); ++i) {
      EXPECT_EQ(r.statuses[i], VKF_ERROR_BUSY);
      EXPECT_EQ(r.messages[i], std::string(inner[call]) + ": called from inside a token callback of " +
                                   outer[call] + " on the same vkf_llm; it would change the cache that call is "
                                   "generating into. Call it after " + outer[call] +
                                   " returns (or return 0 from the callback to stop it)");
    }
    // The cache grew by one token per callback, as without the nested calls.
    ASSERT_EQ(r.positions.size(), 6u);
    for (size_t i = 1; i < r.positions.size(); ++i) EXPECT_EQ(r.positions[i], r.positions[i - 1] + 1);
  }
  // Inside a chat turn too.
  ASSERT_EQ(vkf_llm_reset(llm_, nullptr), VKF_OK);
  Reentry r{llm_, Reentry::reset};
  ASSERT_EQ(vkf_llm_chat(llm_, "hi", 4, nullptr, call_back_in, &r, nullptr), VKF_OK) << vkf_last_error();
  ASSERT_FALSE(r.statuses.empty());
  EXPECT_EQ(r.statuses[0], VKF_ERROR_BUSY);
  EXPECT_NE(r.messages[0].find("vkf_llm_reset: called from inside a token callback of vkf_llm_chat"),
            std::string::npos) << r.messages[0];
  // After the call returns, the same calls work.
  EXPECT_EQ(vkf_llm_reset(llm_, nullptr), VKF_OK);
  EXPECT_EQ(vkf_llm_position(llm_), 0);
}

// vkf_llm_release from inside a callback is carried out when the running call returns, which
// still returns its status (ASan would report a use after free).
TEST_F(CapiLlm, ReleaseFromInsideATokenCallbackWaitsForTheCall) {
  vkf_llm* other = nullptr;
  ASSERT_EQ(vkf_llm_load(dev, kTiny.c_str(), 64, &other), VKF_OK) << vkf_last_error();
  Reentry r{other, Reentry::release};
  vkf_generation_stats stats{};
  EXPECT_EQ(vkf_llm_generate(other, "hello", 5, nullptr, call_back_in, &r, &stats), VKF_OK) << vkf_last_error();
  EXPECT_EQ(stats.generated_tokens, 5);
}

}  // namespace
}  // namespace vkformer::testing
