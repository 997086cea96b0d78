#pragma once
// Chat templates: a list of messages turned into the prompt text a chat model was trained on.
//
// GGUF files carry the template as Jinja source (tokenizer.chat_template). vkformer runs no Jinja
// engine: it recognizes the templates it knows by their distinctive parts and formats messages
// with its own code, giving the same text as the Jinja template. Known today:
//
//   ChatML  "<|im_start|>" + role + "\n" + content + "<|im_end|>\n" per message, and
//           "<|im_start|>assistant\n" as the generation prompt (SmolLM2, Qwen2 and others).
//           When the template inserts a default system message before a first message that is
//           not a system one (SmolLM2: "You are a helpful AI assistant named SmolLM, trained by
//           Hugging Face"), that text is taken from the template and inserted the same way.
//
// Any other template is ErrorCode::unsupported, naming what was found and what is supported.
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace vkformer {

class GgufFile;

struct ChatMessage {
  std::string role;     // "system", "user", "assistant"
  std::string content;
};

class ChatTemplate {
 public:
  // Recognizes Jinja source such as a GGUF's tokenizer.chat_template.
  static ChatTemplate from_text(std::string_view jinja);
  // The GGUF's tokenizer.chat_template; a file without one is ErrorCode::format naming the key.
  static ChatTemplate from_gguf(const GgufFile& file);
  static ChatTemplate load(const std::filesystem::path& gguf);  // from_gguf(GgufFile(gguf))
  // Plain ChatML without a default system message.
  static ChatTemplate chatml();

  // The prompt text for these messages; with add_generation_prompt, the text that opens the
  // assistant's reply follows. An empty role is invalid_argument.
  std::string apply(std::span<const ChatMessage> messages, bool add_generation_prompt = true) const;
  std::string apply(const std::vector<ChatMessage>& messages, bool add_generation_prompt = true) const {
    return apply(std::span<const ChatMessage>(messages), add_generation_prompt);
  }

  std::string_view name() const { return "chatml"; }
  // The system message inserted when the first message is not a system one, if the template has one.
  const std::optional<std::string>& default_system_prompt() const { return default_system_; }

 private:
  std::optional<std::string> default_system_;
};

}  // namespace vkformer
