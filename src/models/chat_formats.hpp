#pragma once
// The prompt formats ChatTemplate renders, each described by its parts rather than by code:
// what opens and closes each role's turn, which contents the template trims, where a system
// message goes, what opens the assistant's reply. One table (chat_formats.cpp) holds them by
// name; chat_template.cpp maps the Jinja templates it recognizes onto them.
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "vkformer/chat.hpp"

namespace vkformer::chat {

enum class SystemPlacement {
  turn,             // a turn of its own, like the others
  drop,             // left out (Phi-3 mini / medium)
  refuse,           // the template raises an error (Gemma)
  into_first_user,  // prepended to the first user message, then system_join (Mistral v1)
  into_last_user,   // prepended to the last user message, then system_join (Mistral v3)
};

// Turn parts may hold {role}, {bos} and {eos}, replaced by the message's role and the tokens'
// strings.
struct ChatFormat {
  std::string_view name;
  std::string_view begin;  // before everything when there is a message ("{bos}" for most)
  std::string_view user_open, user_close;
  std::string_view assistant_open, assistant_close;
  std::string_view system_open, system_close;
  std::string_view other_open, other_close;  // any other role
  bool trim_user = false, trim_assistant = false, trim_system = false;
  SystemPlacement system = SystemPlacement::turn;
  std::string_view system_join;
  bool system_always = false;     // a system turn even without a system message (Llama 3.1)
  std::string_view generation;    // opens the assistant's reply (add_generation_prompt)
  bool generation_always = false; // written whether or not it is asked for
  std::string_view end_without_generation;  // written when it is not asked for (Phi-3.5: {eos})
  bool alternate = false;         // roles must alternate user / assistant from the first message
};

const ChatFormat* find_format(std::string_view name);
std::string format_names();  // comma-separated, for messages

// The prompt text. A system message the format refuses, or roles that do not alternate where it
// requires it, are ErrorCode::invalid_argument naming the format.
std::string render(const ChatFormat& format, std::span<const ChatMessage> messages,
                   bool add_generation_prompt, const std::optional<std::string>& default_system,
                   std::string_view bos, std::string_view eos);

}  // namespace vkformer::chat
