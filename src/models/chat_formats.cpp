// The table of prompt formats and the one renderer that reads them. Each entry was checked
// against jinja2's rendering of the templates it stands for (tests/golden_chat).
#include "chat_formats.hpp"

#include <array>

#include "vkformer/error.hpp"

namespace vkformer::chat {

namespace {

using P = SystemPlacement;

ChatFormat chatml() {
  ChatFormat f{.name = "chatml"};
  f.user_open = f.assistant_open = f.system_open = f.other_open = "<|im_start|>{role}\n";
  f.user_close = f.assistant_close = f.system_close = f.other_close = "<|im_end|>\n";
  f.generation = "<|im_start|>assistant\n";
  return f;
}

ChatFormat llama3(std::string_view name) {
  ChatFormat f{.name = name, .begin = "{bos}"};
  f.user_open = f.assistant_open = f.system_open = f.other_open =
      "<|start_header_id|>{role}<|end_header_id|>\n\n";
  f.user_close = f.assistant_close = f.system_close = f.other_close = "<|eot_id|>";
  f.trim_user = f.trim_assistant = f.trim_system = true;
  f.generation = "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return f;
}

ChatFormat llama31() {
  ChatFormat f = llama3("llama3.1");
  // Without tools and with the template's default date_string.
  f.system_open =
      "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n"
      "Today Date: 26 Jul 2024\n\n";
  f.system_always = true;
  return f;
}

ChatFormat llama3_always() {  // llama.cpp's test variant: the reply header written always
  ChatFormat f = llama3("llama3-always-prompt");
  f.begin = "";
  f.generation_always = true;
  return f;
}

ChatFormat gemma(std::string_view name, std::string_view begin) {
  ChatFormat f{.name = name, .begin = begin};
  f.user_open = f.other_open = "<start_of_turn>{role}\n";
  f.assistant_open = "<start_of_turn>model\n";
  f.user_close = f.assistant_close = f.other_close = "<end_of_turn>\n";
  f.trim_user = f.trim_assistant = true;
  f.system = P::refuse;
  f.alternate = true;
  f.generation = "<start_of_turn>model\n";
  return f;
}

ChatFormat phi3(std::string_view name, std::string_view begin, std::string_view end) {
  ChatFormat f{.name = name, .begin = begin};
  f.user_open = f.assistant_open = f.system_open = f.other_open = "<|{role}|>\n";
  f.user_close = f.assistant_close = f.system_close = f.other_close = "<|end|>\n";
  f.generation = "<|assistant|>\n";
  f.end_without_generation = end;
  return f;
}

// Phi-3 mini / medium: the system message is dropped and every user turn opens the reply.
ChatFormat phi3_mini(std::string_view name, std::string_view begin) {
  return {.name = name, .begin = begin, .user_open = "<|user|>\n", .user_close = "<|end|>\n<|assistant|>\n",
          .assistant_close = "<|end|>\n", .other_open = "", .other_close = "", .system = P::drop};
}

// Mistral 7B Instruct v0.1/v0.2 and Llama 2 without a system message: strictly alternating.
ChatFormat mistral_v0() {
  return {.name = "mistral-v0", .begin = "{bos}", .user_open = "[INST] ", .user_close = " [/INST]",
          .assistant_close = "{eos}", .system = P::refuse, .alternate = true};
}

ChatFormat mistral_v1() {
  return {.name = "mistral-v1", .user_open = " [INST] ", .user_close = " [/INST]", .assistant_open = " ",
          .assistant_close = "{eos}", .system = P::into_first_user, .system_join = "\n\n"};
}

ChatFormat mistral_v3() {
  return {.name = "mistral-v3", .user_open = "[INST] ", .user_close = "[/INST]", .assistant_open = " ",
          .assistant_close = "{eos}", .trim_assistant = true, .system = P::into_last_user, .system_join = "\n\n"};
}

ChatFormat mistral_v3_tekken() {
  return {.name = "mistral-v3-tekken", .begin = "{bos}", .user_open = "[INST]", .user_close = "[/INST]",
          .assistant_close = "{eos}", .system = P::into_last_user, .system_join = "\n\n"};
}

ChatFormat mistral_v7() {
  return {.name = "mistral-v7", .user_open = "[INST] ", .user_close = "[/INST]", .assistant_open = " ",
          .assistant_close = "{eos}", .system_open = "[SYSTEM_PROMPT] ", .system_close = "[/SYSTEM_PROMPT]"};
}

const std::array kFormats = {
    chatml(),
    llama3("llama3"),
    llama31(),
    llama3_always(),
    gemma("gemma", "{bos}"),
    phi3("phi3", "", ""),
    phi3("phi3-bos", "{bos}", ""),
    phi3("phi3.5", "", "{eos}"),
    phi3_mini("phi3-mini", "{bos}"),
    phi3_mini("phi3-medium", ""),
    mistral_v0(),
    mistral_v1(),
    mistral_v3(),
    mistral_v3_tekken(),
    mistral_v7(),
};

std::string trimmed(std::string_view s, bool trim) {
  if (!trim) return std::string(s);
  // Jinja's trim: Python's str.strip(), i.e. whitespace at both ends.
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; };
  size_t a = 0, b = s.size();
  while (a < b && space(s[a])) ++a;
  while (b > a && space(s[b - 1])) --b;
  return std::string(s.substr(a, b - a));
}

std::string expand(std::string_view part, std::string_view role, std::string_view bos,
                   std::string_view eos) {
  std::string out;
  for (size_t i = 0; i < part.size();) {
    if (part.substr(i, 6) == "{role}") {
      out += role;
      i += 6;
    } else if (part.substr(i, 5) == "{bos}") {
      out += bos;
      i += 5;
    } else if (part.substr(i, 5) == "{eos}") {
      out += eos;
      i += 5;
    } else {
      out += part[i++];
    }
  }
  return out;
}

[[noreturn]] void refuse(const ChatFormat& f, const std::string& why) {
  throw Error(ErrorCode::invalid_argument, "chat template " + std::string(f.name) + ": " + why);
}

}  // namespace

const ChatFormat* find_format(std::string_view name) {
  for (const ChatFormat& f : kFormats)
    if (f.name == name) return &f;
  return nullptr;
}

std::string format_names() {
  std::string out;
  for (const ChatFormat& f : kFormats) out += (out.empty() ? "" : ", ") + std::string(f.name);
  return out;
}

std::string render(const ChatFormat& f, std::span<const ChatMessage> messages,
                   bool add_generation_prompt, const std::optional<std::string>& default_system,
                   std::string_view bos, std::string_view eos) {
  for (size_t i = 0; i < messages.size(); ++i)
    if (messages[i].role.empty())
      throw Error(ErrorCode::invalid_argument, "chat template: message " + std::to_string(i) + " has an empty role");

  std::vector<ChatMessage> turns(messages.begin(), messages.end());
  std::optional<std::string> system;
  if (!turns.empty() && turns[0].role == "system" && f.system != SystemPlacement::turn) {
    if (f.system == SystemPlacement::refuse)
      refuse(f, "the template has no system role (it raises 'System role not supported')");
    system = turns[0].content;
    turns.erase(turns.begin());
  }
  if (f.alternate)
    for (size_t i = 0; i < turns.size(); ++i)
      if ((turns[i].role == "user") != (i % 2 == 0))
        refuse(f, "roles must alternate user/assistant/user/... (message " + std::to_string(i) + " is " +
                      turns[i].role + ")");
  if (system && f.system != SystemPlacement::drop) {
    auto target = turns.end();
    for (auto it = turns.begin(); it != turns.end(); ++it)
      if (it->role == "user") {
        target = it;
        if (f.system == SystemPlacement::into_first_user) break;
      }
    if (target != turns.end()) target->content = *system + std::string(f.system_join) + target->content;
  }

  std::string out;
  if (!messages.empty()) out += expand(f.begin, "", bos, eos);
  const bool has_system = !turns.empty() && turns[0].role == "system";
  if (f.system_always && !has_system)
    out += expand(f.system_open, "system", bos, eos) + expand(f.system_close, "system", bos, eos);
  if (default_system && (turns.empty() || turns[0].role != "system") && !turns.empty())
    out += expand(f.system_open, "system", bos, eos) + *default_system + expand(f.system_close, "system", bos, eos);
  for (const ChatMessage& m : turns) {
    std::string_view open = f.other_open, close = f.other_close;
    bool trim = false;
    if (m.role == "user") {
      open = f.user_open, close = f.user_close, trim = f.trim_user;
    } else if (m.role == "assistant") {
      open = f.assistant_open, close = f.assistant_close, trim = f.trim_assistant;
    } else if (m.role == "system") {
      open = f.system_open, close = f.system_close, trim = f.trim_system;
    }
    out += expand(open, m.role, bos, eos) + trimmed(m.content, trim) + expand(close, m.role, bos, eos);
  }
  if (add_generation_prompt || f.generation_always)
    out += expand(f.generation, "assistant", bos, eos);
  else
    out += expand(f.end_without_generation, "", bos, eos);
  return out;
}

}  // namespace vkformer::chat
