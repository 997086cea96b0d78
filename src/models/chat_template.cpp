// Recognizing a Jinja chat template: known templates by their exact text, ChatML ones by their
// distinctive parts; the formatting itself is chat_formats.cpp's.
#include <algorithm>
#include <array>
#include <cstdint>
#include <string>

#include "chat_formats.hpp"

#include "vkformer/chat.hpp"
#include "vkformer/error.hpp"
#include "vkformer/gguf.hpp"

namespace vkformer {

namespace {

constexpr std::string_view kKey = "tokenizer.chat_template";

// Jinja string literals write a newline as "\n"; some GGUF files hold it escaped, some raw.
std::string unescape_newlines(std::string_view t) {
  std::string out;
  out.reserve(t.size());
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == '\\' && i + 1 < t.size() && t[i + 1] == 'n') {
      out += '\n';
      ++i;
    } else {
      out += t[i];
    }
  }
  return out;
}

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}

// The structure without spaces, one quote style and one spelling of attribute access, so
// formatting differences between otherwise equal templates do not matter.
std::string compact(const std::string& unescaped) {
  std::string c;
  for (char ch : unescaped)
    if (ch != ' ' && ch != '\t') c += ch == '"' ? '\'' : ch;
  replace_all(c, "message.role", "message['role']");
  replace_all(c, "message.content", "message['content']");
  replace_all(c, "messages[0].role", "messages[0]['role']");
  return c;
}

// For messages: the start of the template on one line, cut short.
std::string describe(std::string_view t) {
  std::string s;
  for (char ch : t.substr(0, 80)) {
    if (ch == '\n') s += "\\n";
    else s += ch;
  }
  return "'" + s + (t.size() > 80 ? "...' (" + std::to_string(t.size()) + " characters)" : "'");
}

[[noreturn]] void unsupported(std::string_view jinja, const std::string& why) {
  throw Error(ErrorCode::unsupported,
              "chat template: " + why + " in " + describe(jinja) +
                  "; supported: the known templates of Llama 3, Qwen2, Gemma, Phi-3, Mistral and "
                  "others, and ChatML ('<|im_start|>' + message['role'] + '\\n' + "
                  "message['content'] + '<|im_end|>' + '\\n' per message, '<|im_start|>assistant\\n' "
                  "as the generation prompt, optionally a default system message); choose a format "
                  "by name instead (--chat-template NAME): " + chat::format_names());
}

// FNV-1a: a stable fingerprint of a template's exact text.
uint64_t fingerprint(std::string_view text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

struct KnownTemplate {
  uint64_t fingerprint;
  std::string_view format;
  std::string_view default_system;  // empty: none
  std::string_view source;          // where the template comes from, for readers
};

// Templates recognized by their exact text (as the models' tokenizer_config.json has them, and
// so their GGUF files), each rendered as jinja2 renders it (tests/golden_chat).
constexpr std::array kKnown = {
    KnownTemplate{0x60848a05837ce656ull, "llama3.1", "", "meta-llama Llama-3.1-8B / 3.3-70B-Instruct"},
    KnownTemplate{0x74891e390e614ae2ull, "llama3-always-prompt", "", "llama.cpp test-chat-template Llama-3"},
    KnownTemplate{0xc2b27ee60f1b8775ull, "chatml", "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.", "Qwen2.5-7B-Instruct"},
    KnownTemplate{0xc867da37c989d41full, "chatml", "You are a helpful assistant", "Qwen2 (llama.cpp's ggml-vocab-qwen2)"},
    KnownTemplate{0xa41d6bae9b9141bcull, "chatml", "", "OpenHermes-2.5-Mistral-7B"},
    KnownTemplate{0x5c10ee65212d93b3ull, "gemma", "", "google gemma-2-2b-it"},
    KnownTemplate{0x690954969ec87269ull, "gemma", "", "google gemma-7b-it"},
    KnownTemplate{0xcf278cde387a54c8ull, "phi3.5", "", "microsoft Phi-3.5-mini-instruct"},
    KnownTemplate{0x4ebae769b67b72f1ull, "phi3-mini", "", "microsoft Phi-3-mini"},
    KnownTemplate{0x6057775af4d6feb9ull, "phi3-medium", "", "microsoft Phi-3-medium"},
    KnownTemplate{0x475fd3e16d05c1afull, "phi3-bos", "", "microsoft Phi-3-small"},
    KnownTemplate{0x3878e3fa2ade824aull, "phi3", "", "microsoft Phi-3-vision"},
    KnownTemplate{0x8c734b90b4f8d84dull, "mistral-v0", "", "mistralai Mistral-7B-Instruct-v0.2 (old)"},
    KnownTemplate{0xf741d22a1d1ed6d7ull, "mistral-v1", "", "mistralai 'v1' with a system prompt"},
    KnownTemplate{0x763320906faf8dbfull, "mistral-v3", "", "mistralai Mistral-Large-Instruct-2407"},
    KnownTemplate{0x42d49ec2a23f46dbull, "mistral-v3-tekken", "", "mistralai Mistral-Nemo-Instruct-2407"},
    KnownTemplate{0xe4a9cc594604808aull, "mistral-v7", "", "mistralai Mistral-Large-Instruct-2411"},
};

}  // namespace

ChatTemplate ChatTemplate::chatml() { return ChatTemplate(chat::find_format("chatml"), "", ""); }

ChatTemplate ChatTemplate::named(std::string_view name, std::string_view bos_token,
                                 std::string_view eos_token) {
  const chat::ChatFormat* f = chat::find_format(name);
  if (!f)
    throw Error(ErrorCode::invalid_argument, "chat template: no format named '" + std::string(name) +
                                                 "'; the formats: " + chat::format_names());
  return ChatTemplate(f, bos_token, eos_token);
}

std::string ChatTemplate::names() { return chat::format_names(); }

ChatTemplate ChatTemplate::from_text(std::string_view jinja, std::string_view bos_token,
                                     std::string_view eos_token) {
  const uint64_t fp = fingerprint(jinja);
  for (const KnownTemplate& k : kKnown) {
    if (k.fingerprint != fp) continue;
    ChatTemplate t(chat::find_format(k.format), bos_token, eos_token);
    if (!k.default_system.empty()) t.default_system_ = std::string(k.default_system);
    return t;
  }

  const std::string text = unescape_newlines(jinja);
  const std::string c = compact(text);
  const bool message = c.find("'<|im_start|>'+message['role']+'\n'+message['content']+'<|im_end|>") != std::string::npos;
  if (!message) {
    if (c.find("<|im_start|>") == std::string::npos)
      unsupported(jinja, "not a known template, and no ChatML markers (<|im_start|>)");
    unsupported(jinja, "<|im_start|> appears but not as role + '\\n' + content + '<|im_end|>'");
  }
  if (c.find("<|im_end|>'+'\n'") == std::string::npos && c.find("<|im_end|>\n'") == std::string::npos)
    unsupported(jinja, "a message's '<|im_end|>' is not followed by '\\n'");
  if (c.find("add_generation_prompt") == std::string::npos || c.find("'<|im_start|>assistant\n'") == std::string::npos)
    unsupported(jinja, "no generation prompt '<|im_start|>assistant\\n' under add_generation_prompt");
  // Tools, reasoning blocks and other branches the plain ChatML format does not have.
  for (std::string_view part : {"tools", "<think>", "bos_token", "eos_token", "messages[0]['role']=='system'"})
    if (c.find(part) != std::string::npos)
      unsupported(jinja, "ChatML with more than plain turns (it uses " + std::string(part) + ")");

  ChatTemplate t = chatml();
  t.bos_ = bos_token;
  t.eos_ = eos_token;
  if (c.find("messages[0]['role']!='system'") != std::string::npos) {
    // {% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n...<|im_end|>\n' }}
    const std::string open = "'<|im_start|>system\n";
    const size_t start = text.find(open);
    const size_t end = start == std::string::npos ? start : text.find("<|im_end|>", start);
    if (end == std::string::npos)
      unsupported(jinja, "a default system message is inserted but its text was not found");
    std::string system = text.substr(start + open.size(), end - start - open.size());
    if (system.find('\'') != std::string::npos || system.find("{{") != std::string::npos)
      unsupported(jinja, "the default system message is not one literal string");
    t.default_system_ = std::move(system);
  }
  return t;
}

namespace {
// The string of tokenizer.ggml.<role>_token_id, or "" when the file has none.
std::string token_string(const GgufFile& file, const std::string& role) {
  const std::string key = "tokenizer.ggml." + role + "_token_id";
  if (!file.has(key) || !file.has("tokenizer.ggml.tokens")) return "";
  const auto& tokens = file.get_strings("tokenizer.ggml.tokens");
  const uint64_t id = file.get_uint(key);
  return id < tokens.size() ? std::string(tokens[id]) : "";
}
}  // namespace

ChatTemplate ChatTemplate::from_gguf(const GgufFile& file) {
  if (!file.has(kKey))
    throw Error(ErrorCode::format, file.label() + ": no " + std::string(kKey) +
                                       ": the model does not say how to format a chat; choose a "
                                       "format by name (--chat-template NAME): " + chat::format_names());
  return from_text(file.get_string(kKey), token_string(file, "bos"), token_string(file, "eos"));
}

ChatTemplate ChatTemplate::named(std::string_view name, const GgufFile& file) {
  return named(name, token_string(file, "bos"), token_string(file, "eos"));
}

ChatTemplate ChatTemplate::load(const std::filesystem::path& gguf) { return from_gguf(GgufFile(gguf)); }

ModelChatTemplates::ModelChatTemplates()
    : problem_code_(ErrorCode::format),
      problem_("no " + std::string(kKey) + ": the model does not say how to format a chat") {}

ModelChatTemplates ModelChatTemplates::from_gguf(const GgufFile& file) {
  ModelChatTemplates t;
  t.bos_ = token_string(file, "bos");
  t.eos_ = token_string(file, "eos");
  try {
    t.file_.emplace(ChatTemplate::from_gguf(file));
    t.problem_.clear();
  } catch (const Error& e) {
    t.problem_code_ = e.code();
    t.problem_ = e.what();
  }
  return t;
}

const ChatTemplate& ModelChatTemplates::file_template() const {
  if (!file_) throw Error(problem_code_, problem_);
  return *file_;
}

ChatTemplate ModelChatTemplates::choose(std::string_view name) const {
  return name.empty() ? file_template() : ChatTemplate::named(name, bos_, eos_);
}

std::string_view ChatTemplate::name() const { return format_->name; }

bool ChatTemplate::writes_bos() const {
  return !bos_.empty() && format_->begin.find("{bos}") != std::string_view::npos;
}

std::string ChatTemplate::apply(std::span<const ChatMessage> messages, bool add_generation_prompt) const {
  return chat::render(*format_, messages, add_generation_prompt, default_system_, bos_, eos_);
}

}  // namespace vkformer
