// `vkformer chat --model FILE.gguf`: a conversation with a GGUF chat model. Each line on stdin is
// a user turn; the reply streams to stdout, followed by an empty line. The KV cache is kept
// across turns (only each new turn's tokens are run). EOF ends the chat.
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "llm_cli.hpp"
#include "terminal.hpp"
#include "vkformer/chat.hpp"
#include "vkformer/error.hpp"

namespace vkformer::cli {

namespace {

struct ChatArgs {
  LlmArgs llm;
  std::string system;
  bool has_system = false;
};

int chat_command(ChatArgs& a, const GlobalOptions& globals) {
  return run_llm_command([&] {
    check_llm_args(a.llm);
    ChatTemplate chat_template = ChatTemplate::load(a.llm.model);
    Device device = Device::open(globals.device_options());
    LanguageModel lm = load_llm(device, a.llm);
    Conversation chat(lm, chat_template, a.has_system ? std::optional<std::string>(a.system) : std::nullopt);
    const bool tty = platform::is_terminal(stdin) && platform::is_terminal(stderr);
    TextGenerationOptions options;
    options.max_tokens = a.llm.max_tokens;
    options.sampling = a.llm.sampling;
    std::string line;
    for (;;) {
      if (tty) std::fprintf(stderr, "> ");
      if (!std::getline(std::cin, line)) break;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.empty()) continue;
      const auto r = chat.reply(line, options, [](std::string_view piece, int32_t) {
        std::fwrite(piece.data(), 1, piece.size(), stdout);
        std::fflush(stdout);
        return true;
      });
      std::printf("\n\n");
      std::fflush(stdout);
      std::fprintf(stderr, "vkformer chat: turn %lld tokens, cache %lld of %lld; %s\n",
                   static_cast<long long>(chat.last_turn_tokens()), static_cast<long long>(lm.position()),
                   static_cast<long long>(lm.context()), describe_stats(r.stats).c_str());
    }
    return report_validation(device) ? 1 : 0;
  });
}

}  // namespace

Command add_chat_command(CLI::App& app, const GlobalOptions& globals) {
  auto* sub = app.add_subcommand(
      "chat",
      "Chat with a GGUF language model: each line on stdin is a user message, formatted with the "
      "model's chat template; the reply streams to stdout. The KV cache is kept across turns. EOF ends.");
  auto args = std::make_shared<ChatArgs>();
  sub->add_option("--model", args->llm.model, "The model: a GGUF file (llama architecture)")
      ->required()
      ->type_name("FILE.gguf");
  sub->add_option("--system", args->system,
                  "A system message first (default: the template's own, if it has one)")
      ->type_name("TEXT")
      ->each([args](const std::string&) { args->has_system = true; });
  add_llm_options(*sub, args->llm);
  return {sub, [&globals, args]() { return chat_command(*args, globals); }};
}

}  // namespace vkformer::cli
