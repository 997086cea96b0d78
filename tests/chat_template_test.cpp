// Chat templates (vkformer/chat.hpp): SmolLM2's ChatML template against the exact strings its
// Jinja source yields (written out by hand from the template; jinja2 3.1 renders the same, see
// tests/fixtures/render_chat_template.py), its spelling variants, the real GGUF, templates that are
// refused, formats by name, and every recognized template of llama.cpp's collection against
// jinja2's renderings (tests/golden_chat, tests/fixtures/make_chat_golden.py).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "fetched_models.hpp"
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
                         "chat template: not a known template, and no ChatML markers (<|im_start|>) in "
                         "'{% for message in messages %}"));
  EXPECT_TRUE(fails_with([&] { ChatTemplate::from_text(llama2); }, ErrorCode::unsupported,
                         "...' (" + std::to_string(llama2.size()) + " characters); supported: the known templates"));
  EXPECT_TRUE(fails_with([&] { ChatTemplate::from_text(llama2); }, ErrorCode::unsupported,
                         "--chat-template NAME): chatml, llama3, llama3.1"));
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

// What a loaded model carries (LanguageModel::chat_templates()): the file's template, or the
// error from_gguf gives kept for later, and formats by name.
TEST(ChatTemplate, ModelChatTemplatesKeepTheFileTemplateOrWhyNot) {
  const ModelChatTemplates with = ModelChatTemplates::from_gguf(gguf_with({{"tokenizer.chat_template", kSmolLM2}}));
  ASSERT_TRUE(with.has_file_template());
  EXPECT_EQ(with.problem(), "");
  const std::string hi = kSystem + "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n";
  EXPECT_EQ(with.file_template().apply({{"user", "Hi"}}), hi);
  EXPECT_EQ(with.choose("").apply({{"user", "Hi"}}), hi);
  EXPECT_EQ(with.choose("llama3").name(), "llama3");
  EXPECT_TRUE(fails_with([&] { with.choose("llama9"); }, ErrorCode::invalid_argument,
                         "chat template: no format named 'llama9'"));

  const ModelChatTemplates without = ModelChatTemplates::from_gguf(gguf_with({{"general.name", "x"}}));
  EXPECT_FALSE(without.has_file_template());
  EXPECT_NE(without.problem().find("chat.gguf: no tokenizer.chat_template"), std::string::npos) << without.problem();
  EXPECT_TRUE(fails_with([&] { without.file_template(); }, ErrorCode::format, "chat.gguf: no tokenizer.chat_template"));
  EXPECT_TRUE(fails_with([&] { without.choose(""); }, ErrorCode::format, "chat.gguf: no tokenizer.chat_template"));
  EXPECT_EQ(without.choose("chatml").apply({{"user", "Hi"}}),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");

  const ModelChatTemplates unknown = ModelChatTemplates::from_gguf(gguf_with({{"tokenizer.chat_template", "{{ x }}"}}));
  EXPECT_FALSE(unknown.has_file_template());
  EXPECT_TRUE(fails_with([&] { unknown.file_template(); }, ErrorCode::unsupported, "{{ x }}"));
}

TEST(ChatTemplate, FormatsByName) {
  const auto t = ChatTemplate::named("llama3", "<|begin_of_text|>");
  EXPECT_EQ(t.name(), "llama3");
  EXPECT_TRUE(t.writes_bos());
  EXPECT_EQ(t.apply({{"user", " Hi "}}),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_FALSE(ChatTemplate::chatml().writes_bos());
  EXPECT_TRUE(fails_with([&] { ChatTemplate::named("llama9"); }, ErrorCode::invalid_argument,
                         "chat template: no format named 'llama9'; the formats: chatml, llama3"));
  EXPECT_TRUE(fails_with([&] { ChatTemplate::named("gemma").apply({{"system", "x"}, {"user", "y"}}); },
                         ErrorCode::invalid_argument, "chat template gemma: the template has no system role"));
  EXPECT_TRUE(fails_with([&] { ChatTemplate::named("gemma").apply({{"user", "x"}, {"user", "y"}}); },
                         ErrorCode::invalid_argument, "roles must alternate"));
}

// Every template of llama.cpp's collection (its models/templates, the templates of its
// test-chat-template.cpp and of its vocabulary files) that vkformer recognizes renders exactly as
// jinja2 renders it the way Hugging Face's apply_chat_template does (tests/fixtures/make_chat_golden.py),
// for every conversation; where jinja2 raised an error (a system role Gemma has not, roles that
// do not alternate), apply() refuses too. The others are refused with the unsupported message.
TEST(ChatTemplate, RecognizedTemplatesRenderAsHuggingFaceDoes) {
  const FetchedModel& dir = llama_vocabs_dir();
  ASSERT_TRUE(dir.error.empty()) << dir.error;
  std::ifstream in(std::string(VKF_SOURCE_DIR) + "/tests/golden_chat/renderings.json", std::ios::binary);
  const auto golden = nlohmann::json::parse(in);
  std::vector<std::vector<ChatMessage>> conversations;
  std::vector<bool> prompts;
  for (const auto& c : golden.at("conversations")) {
    std::vector<ChatMessage> m;
    for (const auto& x : c.at("messages")) m.push_back({x.at("role"), x.at("content")});
    conversations.push_back(std::move(m));
    prompts.push_back(c.at("add_generation_prompt"));
  }
  std::vector<std::string> recognized;
  size_t compared = 0, refused = 0;
  for (const auto& e : golden.at("templates")) {
    const std::string source = e.at("source");
    std::string text;
    if (source.starts_with("templates/")) {
      std::ifstream t(dir.path / source, std::ios::binary);
      text.assign(std::istreambuf_iterator<char>(t), {});
    } else if (source.starts_with("gguf:")) {
      text = GgufFile(dir.path / source.substr(5)).get_string("tokenizer.chat_template");
    } else {
      text = e.at("template");
    }
    ASSERT_FALSE(text.empty()) << source;
    std::optional<ChatTemplate> t;
    try {
      t = ChatTemplate::from_text(text, e.at("bos_token").get<std::string>(), e.at("eos_token").get<std::string>());
    } catch (const Error& err) {
      EXPECT_EQ(err.code(), ErrorCode::unsupported) << source << ": " << err.what();
      ++refused;
      continue;
    }
    recognized.push_back(source + " -> " + std::string(t->name()));
    ASSERT_TRUE(e.contains("renderings")) << source << " is recognized but jinja2 could not compile it";
    for (size_t i = 0; i < conversations.size(); ++i) {
      const auto& want = e.at("renderings")[i];
      if (want.contains("error")) {
        EXPECT_TRUE(fails_with([&] { t->apply(conversations[i], prompts[i]); }, ErrorCode::invalid_argument, ""))
            << source << " conversation " << i << ": jinja2 raised " << want.at("error");
      } else {
        EXPECT_EQ(t->apply(conversations[i], prompts[i]), want.at("text").get<std::string>())
            << source << " conversation " << i;
      }
      ++compared;
    }
  }
  // Which templates are recognized, and as what.
  EXPECT_EQ(recognized, (std::vector<std::string>{
      "templates/Qwen-Qwen2.5-7B-Instruct.jinja -> chatml",
      "templates/google-gemma-2-2b-it.jinja -> gemma",
      "templates/meta-llama-Llama-3.1-8B-Instruct.jinja -> llama3.1",
      "templates/meta-llama-Llama-3.3-70B-Instruct.jinja -> llama3.1",
      "templates/microsoft-Phi-3.5-mini-instruct.jinja -> phi3.5",
      "templates/mistralai-Mistral-Nemo-Instruct-2407.jinja -> mistral-v3-tekken",
      "test-chat-template:teknium/OpenHermes-2.5-Mistral-7B -> chatml",
      "test-chat-template:mistralai/Mistral-7B-Instruct-v0.2 (NOTE: Old pre-v1 without a system prompt) -> mistral-v0",
      "test-chat-template:google/gemma-7b-it -> gemma",
      "test-chat-template:Llama-3 -> llama3-always-prompt",
      "test-chat-template:Phi-3-mini -> phi3-mini",
      "test-chat-template:Phi-3-small -> phi3-bos",
      "test-chat-template:Phi-3-medium -> phi3-medium",
      "test-chat-template:Phi-3-vision -> phi3",
      "test-chat-template:mistralai/Mistral-7B-Instruct-v0.2 (mistralai 'v1' template with a system prompt) -> mistral-v1",
      "test-chat-template:Mistral-Large-Instruct-2407 (mistralai 'v3' template; modified to have system prompt at start) -> mistral-v3",
      "test-chat-template:Mistral-Nemo-Instruct-2407 (mistralai 'v3-tekken' template; modified to have system prompt at start) -> mistral-v3-tekken",
      "test-chat-template:mistralai/Mistral-Large-Instruct-2411 (mistralai 'v7' template) -> mistral-v7",
      "gguf:ggml-vocab-phi-3.gguf -> phi3-mini",
      "gguf:ggml-vocab-qwen2.gguf -> chatml",
      "gguf:ggml-vocab-qwen35.gguf -> chatml"}));
  RecordProperty("renderings_compared", static_cast<int>(compared));
  RecordProperty("templates_refused", static_cast<int>(refused));
}

TEST(ChatTemplate, SmolLM2GgufCarriesThisTemplate) {
  const FetchedModel& m = smollm2_gguf();
  ASSERT_TRUE(m.error.empty()) << m.error;
  const std::filesystem::path& path = m.path;
  GgufFile f(path);
  EXPECT_EQ(f.get_string("tokenizer.chat_template"), kSmolLM2);
  EXPECT_EQ(ChatTemplate::from_gguf(f).apply({{"user", "Hi"}}),
            kSystem + "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  // A format by name writes the file's own BOS and EOS strings, as named(name, file) does.
  const ModelChatTemplates carried = ModelChatTemplates::from_gguf(f);
  const std::vector<ChatMessage> turns = {{"user", "Hi"}, {"assistant", "Hello"}, {"user", "Again"}};
  for (const char* name : {"llama3", "mistral-v0", "mistral-v7"}) {
    SCOPED_TRACE(name);
    const std::string want = ChatTemplate::named(name, f).apply(turns);
    EXPECT_EQ(carried.choose(name).apply(turns), want);
    EXPECT_NE(want, ChatTemplate::named(name).apply(turns));  // the tokens' strings show in the text
  }
}

}  // namespace
}  // namespace vkformer::testing
