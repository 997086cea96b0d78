// Chat templates (vkformer/chat.hpp): SmolLM2's ChatML template against the exact strings its
// Jinja source yields (written out by hand from the template; jinja2 3.1 renders the same, see
// tools/render_chat_template.py), its spelling variants, the real GGUF, and templates that are
// refused.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "test_util.hpp"
#include "vkformer/chat.hpp"
#include "vkformer/gguf.hpp"

namespace vkformer::testing {
namespace {

// SmolLM2-135M-Instruct's tokenizer.chat_template, as stored in its GGUF (the newlines inside the
// string literals are real newline characters there).
const std::string kSmolLM2 =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}";

const std::string kSystem =
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n";

TEST(ChatTemplate, SmolLM2InsertsItsDefaultSystemMessage) {
  const auto t = ChatTemplate::from_text(kSmolLM2);
  EXPECT_EQ(t.name(), "chatml");
  ASSERT_TRUE(t.default_system_prompt());
  EXPECT_EQ(*t.default_system_prompt(), "You are a helpful AI assistant named SmolLM, trained by Hugging Face");
  EXPECT_EQ(t.apply({{"user", "Hi"}}),
            kSystem + "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  // The first message is the system one: no default.
  EXPECT_EQ(t.apply({{"system", "Be brief."}, {"user", "Hi"}}),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  // Several turns; newlines in the content stay.
  EXPECT_EQ(t.apply({{"user", "What is 2+2?"}, {"assistant", "4"}, {"user", "And 3+3?\nThanks"}}),
            kSystem +
                "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n4<|im_end|>\n"
                "<|im_start|>user\nAnd 3+3?\nThanks<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(t.apply({{"user", "Hi"}, {"assistant", "Hello!"}}, false),
            kSystem + "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n");
  // No messages: the loop inserting the default never runs.
  EXPECT_EQ(t.apply(std::vector<ChatMessage>{}), "<|im_start|>assistant\n");
  EXPECT_EQ(t.apply({{"assistant", "ok"}}, false), kSystem + "<|im_start|>assistant\nok<|im_end|>\n");
}

TEST(ChatTemplate, EarlierTurnsAreAPrefixOfLaterOnes) {
  // What a conversation that keeps its KV cache relies on: the text of turn n (closed by
  // <|im_end|>) is where the text of turn n + 1 starts.
  const auto t = ChatTemplate::from_text(kSmolLM2);
  std::vector<ChatMessage> m = {{"user", "a"}, {"assistant", "b"}};
  const std::string before = t.apply(m, false);
  m.push_back({"user", "c"});
  EXPECT_EQ(t.apply(m).substr(0, before.size()), before);
}

TEST(ChatTemplate, SpellingVariantsOfChatMLAreRecognized) {
  // Escaped newlines, double quotes, attribute access and other spacing (as other GGUF files
  // write it); no default system message.
  const std::string plain =
      "{% for message in messages %}{{\"<|im_start|>\" + message.role + \"\\n\" + message.content + "
      "\"<|im_end|>\" + \"\\n\"}}{% endfor %}{% if add_generation_prompt %}{{ \"<|im_start|>assistant\\n\" }}"
      "{% endif %}";
  const auto t = ChatTemplate::from_text(plain);
  EXPECT_FALSE(t.default_system_prompt());
  EXPECT_EQ(t.apply({{"user", "Hi"}}), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  // SmolLM2's template with its newlines escaped reads the same.
  std::string escaped;
  for (char c : kSmolLM2) escaped += c == '\n' ? std::string("\\n") : std::string(1, c);
  EXPECT_EQ(ChatTemplate::from_text(escaped).apply({{"user", "Hi"}}), ChatTemplate::from_text(kSmolLM2).apply({{"user", "Hi"}}));
  EXPECT_EQ(ChatTemplate::chatml().apply({{"user", "Hi"}}, false), "<|im_start|>user\nHi<|im_end|>\n");
}

TEST(ChatTemplate, OtherTemplatesAreRefusedNamingWhatWasFound) {
  // Llama 2's [INST] template.
  const std::string llama2 =
      "{% for message in messages %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + "
      "message['content'] + ' [/INST]' }}{% endif %}{% endfor %}";
  EXPECT_TRUE(fails_with([&] { ChatTemplate::from_text(llama2); }, ErrorCode::unsupported,
                         "chat template: no ChatML markers (<|im_start|>) in '{% for message in messages %}"));
  EXPECT_TRUE(fails_with([&] { ChatTemplate::from_text(llama2); }, ErrorCode::unsupported,
                         "...' (" + std::to_string(llama2.size()) + " characters); supported: ChatML"));
  // ChatML markers, but laid out differently.
  EXPECT_TRUE(fails_with(
      [&] { ChatTemplate::from_text("{{ '<|im_start|>' + message['content'] + '<|im_end|>' }}"); },
      ErrorCode::unsupported, "<|im_start|> appears but not as role"));
  // No generation prompt.
  EXPECT_TRUE(fails_with(
      [&] {
        ChatTemplate::from_text("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + "
                                "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}");
      },
      ErrorCode::unsupported, "no generation prompt"));
  EXPECT_TRUE(fails_with([&] { ChatTemplate::from_text(""); }, ErrorCode::unsupported, "in ''; supported"));
  EXPECT_TRUE(fails_with([&] { ChatTemplate::from_text(kSmolLM2).apply({{"", "x"}}); },
                         ErrorCode::invalid_argument, "message 0 has an empty role"));
}

// A GGUF with no tensors and the given string keys.
GgufFile gguf_with(const std::vector<std::pair<std::string, std::string>>& kvs) {
  std::vector<uint8_t> b = {'G', 'G', 'U', 'F'};
  auto put = [&](uint64_t v, int n) {
    for (int i = 0; i < n; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
  };
  auto str = [&](const std::string& s) {
    put(s.size(), 8);
    b.insert(b.end(), s.begin(), s.end());
  };
  put(3, 4);
  put(0, 8);
  put(kvs.size(), 8);
  for (const auto& [k, v] : kvs) {
    str(k);
    put(8, 4);  // string
    str(v);
  }
  b.resize((b.size() + 31) / 32 * 32, 0);
  std::vector<std::byte> bytes(b.size());
  std::memcpy(bytes.data(), b.data(), b.size());
  return GgufFile::from_bytes(std::move(bytes), "chat.gguf");
}

TEST(ChatTemplate, FromGguf) {
  const auto t = ChatTemplate::from_gguf(gguf_with({{"tokenizer.chat_template", kSmolLM2}}));
  EXPECT_EQ(t.apply({{"user", "Hi"}}), kSystem + "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_TRUE(fails_with([&] { ChatTemplate::from_gguf(gguf_with({{"general.name", "x"}})); },
                         ErrorCode::format, "chat.gguf: no tokenizer.chat_template"));
}

TEST(ChatTemplate, SmolLM2GgufCarriesThisTemplate) {
  std::filesystem::path path;
  if (const char* env = std::getenv("VKFORMER_SMOLLM2_GGUF"); env && *env) {
    path = env;
  } else {
    const auto m = run_fetch_script(std::string(VKF_SOURCE_DIR) + "/scripts/fetch_smollm2.sh",
                                    "set VKFORMER_SMOLLM2_GGUF to the file to use one you have");
    ASSERT_TRUE(m.error.empty()) << m.error;
    path = m.path;
  }
  GgufFile f(path);
  EXPECT_EQ(f.get_string("tokenizer.chat_template"), kSmolLM2);
  EXPECT_EQ(ChatTemplate::from_gguf(f).apply({{"user", "Hi"}}),
            kSystem + "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

}  // namespace
}  // namespace vkformer::testing
