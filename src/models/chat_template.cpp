// Recognizing a Jinja chat template by its distinctive parts, and formatting ChatML ourselves.
#include <algorithm>
#include <string>

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
                  "; supported: ChatML ('<|im_start|>' + message['role'] + '\\n' + "
                  "message['content'] + '<|im_end|>' + '\\n' per message, '<|im_start|>assistant\\n' "
                  "as the generation prompt, optionally a default system message)");
}

}  // namespace

ChatTemplate ChatTemplate::chatml() { return ChatTemplate(); }

ChatTemplate ChatTemplate::from_text(std::string_view jinja) {
  const std::string text = unescape_newlines(jinja);
  const std::string c = compact(text);
  const bool message = c.find("'<|im_start|>'+message['role']+'\n'+message['content']+'<|im_end|>") != std::string::npos;
  if (!message) {
    if (c.find("<|im_start|>") == std::string::npos) unsupported(jinja, "no ChatML markers (<|im_start|>)");
    unsupported(jinja, "<|im_start|> appears but not as role + '\\n' + content + '<|im_end|>'");
  }
  if (c.find("<|im_end|>'+'\n'") == std::string::npos && c.find("<|im_end|>\n'") == std::string::npos)
    unsupported(jinja, "a message's '<|im_end|>' is not followed by '\\n'");
  if (c.find("add_generation_prompt") == std::string::npos || c.find("'<|im_start|>assistant\n'") == std::string::npos)
    unsupported(jinja, "no generation prompt '<|im_start|>assistant\\n' under add_generation_prompt");

  ChatTemplate t;
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

ChatTemplate ChatTemplate::from_gguf(const GgufFile& file) {
  if (!file.has(kKey))
    throw Error(ErrorCode::format, file.label() + ": no " + std::string(kKey) +
                                       ": the model does not say how to format a chat");
  return from_text(file.get_string(kKey));
}

ChatTemplate ChatTemplate::load(const std::filesystem::path& gguf) { return from_gguf(GgufFile(gguf)); }

std::string ChatTemplate::apply(std::span<const ChatMessage> messages, bool add_generation_prompt) const {
  std::string out;
  for (size_t i = 0; i < messages.size(); ++i) {
    if (messages[i].role.empty())
      throw Error(ErrorCode::invalid_argument, "chat template: message " + std::to_string(i) + " has an empty role");
    if (i == 0 && default_system_ && messages[0].role != "system")
      out += "<|im_start|>system\n" + *default_system_ + "<|im_end|>\n";
    out += "<|im_start|>" + messages[i].role + "\n" + messages[i].content + "<|im_end|>\n";
  }
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

}  // namespace vkformer
