#pragma once
// Chat templates: a list of messages turned into the prompt text a chat model was trained on.
//
// GGUF files carry the template as Jinja source (tokenizer.chat_template). vkformer runs no Jinja
// engine: it recognizes the templates it knows and formats messages with its own code (one table
// of formats, src/models/chat_formats.cpp), giving the same text as Hugging Face's
// apply_chat_template renders from the template (checked for every recognized template in
// tests/golden_chat). Recognized:
//   - by their exact text, the templates of Llama 3 / 3.1 / 3.3, Qwen2 / Qwen2.5, Gemma / Gemma 2,
//     Phi-3 / Phi-3.5, Mistral v0.2 / v1 / v3 / v3-tekken (Nemo) / v7 and others of llama.cpp's
//     collection (models/templates, tests/test-chat-template.cpp);
//   - by their parts, ChatML templates: "<|im_start|>" + role + "\n" + content + "<|im_end|>\n"
//     per message and "<|im_start|>assistant\n" as the generation prompt (SmolLM2 and others),
//     with the default system message the template inserts before a first message that is not a
//     system one (SmolLM2: "You are a helpful AI assistant named SmolLM, trained by Hugging
//     Face") taken from the template.
// Any other template is ErrorCode::unsupported, naming what was found and the format names
// that named() takes (the CLI's --chat-template NAME) to choose one by hand.
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "vkformer/error.hpp"

namespace vkformer {

class GgufFile;
namespace chat {
struct ChatFormat;
}

struct ChatMessage {
  std::string role;     // "system", "user", "assistant"
  std::string content;
};

class ChatTemplate {
 public:
  // Recognizes Jinja source such as a GGUF's tokenizer.chat_template; bos_token / eos_token are
  // the strings the template writes for {{ bos_token }} / {{ eos_token }}.
  static ChatTemplate from_text(std::string_view jinja, std::string_view bos_token = "",
                                std::string_view eos_token = "");
  // The GGUF's tokenizer.chat_template, with its BOS and EOS tokens' strings; a file without a
  // template is ErrorCode::format naming the key.
  static ChatTemplate from_gguf(const GgufFile& file);
  static ChatTemplate load(const std::filesystem::path& gguf);  // from_gguf(GgufFile(gguf))
  // A format by name (names()): for a template vkformer does not recognize, or to override it.
  // An unknown name is invalid_argument listing the names.
  static ChatTemplate named(std::string_view name, std::string_view bos_token = "",
                            std::string_view eos_token = "");
  static ChatTemplate named(std::string_view name, const GgufFile& file);  // the file's tokens
  static std::string names();  // comma-separated
  // Plain ChatML without a default system message.
  static ChatTemplate chatml();

  // The prompt text for these messages; with add_generation_prompt, the text that opens the
  // assistant's reply follows. An empty role, a system message the template refuses (Gemma) or
  // roles that do not alternate where the template requires it are invalid_argument.
  std::string apply(std::span<const ChatMessage> messages, bool add_generation_prompt = true) const;
  std::string apply(const std::vector<ChatMessage>& messages, bool add_generation_prompt = true) const {
    return apply(std::span<const ChatMessage>(messages), add_generation_prompt);
  }

  std::string_view name() const;
  // The system message inserted when the first message is not a system one, if the template has one.
  const std::optional<std::string>& default_system_prompt() const { return default_system_; }
  // Whether apply()'s text starts with the BOS token's string (Llama 3, Gemma, ...): then it is
  // tokenized without adding another BOS.
  bool writes_bos() const;

 private:
  ChatTemplate(const chat::ChatFormat* format, std::string_view bos, std::string_view eos)
      : format_(format), bos_(bos), eos_(eos) {}
  const chat::ChatFormat* format_;
  std::string bos_, eos_;
  std::optional<std::string> default_system_;
};

// The chat templates of one model file, read once when the model loads and carried by it
// (LanguageModel::chat_templates(), BatchedLanguageModel::chat_templates()), so that the front
// doors (server, C API, Python, CLI) never reopen the file for them: the file's own template or
// the error that says why it cannot be used, and the BOS/EOS tokens' strings that a format
// chosen by name writes.
class ModelChatTemplates {
 public:
  ModelChatTemplates();  // a file without a template, as from_gguf gives for one
  // Never throws for a missing or unrecognized template: file() throws that error later.
  static ModelChatTemplates from_gguf(const GgufFile& file);

  bool has_file_template() const { return file_.has_value(); }
  // The file's tokenizer.chat_template (ChatTemplate::from_gguf); where it has none or vkformer
  // does not recognize it, the Error from_gguf gave (ErrorCode::format / unsupported).
  const ChatTemplate& file_template() const;
  // Why the file has no usable template (that error's text); empty where it has one.
  const std::string& problem() const { return problem_; }
  // `name` empty: file_template(); otherwise ChatTemplate::named(name) with the file's BOS and
  // EOS tokens' strings (an unknown name is invalid_argument listing the names).
  ChatTemplate choose(std::string_view name) const;

 private:
  std::optional<ChatTemplate> file_;
  ErrorCode problem_code_;
  std::string problem_;
  std::string bos_, eos_;
};

}  // namespace vkformer
