// `vkformer chat --model FILE.gguf`: a conversation with a GGUF chat model. Each line on stdin is
// a user turn; the reply streams to stdout, followed by an empty line. The KV cache is kept
// across turns (only each new turn's tokens are run). When the context (--ctx) is full, the
// oldest turns are forgotten, shifted out of the cache (LanguageModel::shift: the kept turns'
// rows move down, their keys re-rotated, so nothing runs again); a message that does not fit even alone, or is not UTF-8, is skipped
// with an error, and the chat goes on (its exit status is then 1). EOF ends the chat; Ctrl-C
// during a reply prints the statistics so far and ends it with status 130. When stdin is not a
// terminal each line is echoed as "> line" before its reply, so a transcript shows both.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "interrupt.hpp"
#include "cli_options.hpp"
#include "llm_cli.hpp"
#include "terminal.hpp"
#include "vkformer/gguf_tokenizer.hpp"
#include "vkformer/chat.hpp"
#include "vkformer/error.hpp"

namespace vkformer::cli {

// What `vkformer chat --help` says first.
constexpr const char* kChatHelp =
    "Chat with a GGUF language model: each line on stdin is a user message, formatted with the "
    "model's chat template; the reply streams to stdout. The KV cache is kept across turns; when the "
    "context (--ctx) is full the oldest turns are forgotten (shifted out of the cache, nothing runs again), "
    "and a message too long for it is skipped "
    "with an error (exit status 1 at the end). EOF ends; Ctrl-C stops a reply and ends the chat (status "
    "130). Piped input is echoed as '> line' before each reply.";

namespace {

struct ChatArgs {
  LlmArgs llm;
  std::string system;
  bool has_system = false;
};

// One line of stdin without its "\n" (and a "\r" before it); false at the end. A read error
// (stdin a directory, a device that fails) is an io error: it once ended the chat as an EOF,
// with status 0 and no output.
bool read_line(std::string& line) {
  line.clear();
  char buf[4096];
  while (std::fgets(buf, sizeof buf, stdin)) {
    line += buf;
    if (!line.empty() && line.back() == '\n') {
      line.pop_back();
      if (!line.empty() && line.back() == '\r') line.pop_back();
      return true;
    }
  }
  if (std::ferror(stdin))
    throw Error(ErrorCode::io, std::string("cannot read the chat from stdin: ") + std::strerror(errno));
  return !line.empty();  // a last line without "\n"
}

// Tokens the conversation takes with `text` as the next user message, run from its messages
// (what reply() appends, give or take how a reply's text tokenizes again); with `alone`, from its
// system message only.
int64_t tokens_with(const Conversation& chat, const LanguageModel& lm, const std::string& text, bool alone) {
  std::vector<ChatMessage> messages = chat.messages();
  if (alone) messages.erase(std::remove_if(messages.begin(), messages.end(),
                                           [](const ChatMessage& m) { return m.role != "system"; }),
                            messages.end());
  messages.push_back({"user", text});
  const ChatTemplate& t = chat.chat_template();
  return static_cast<int64_t>(lm.tokenizer().encode(t.apply(messages, true), !t.writes_bos(), true).size());
}

// Makes room for `line` and its reply (up to -n tokens, or half the context) by forgetting the
// oldest turns; false, with the reason on stderr, when the system message and the line alone
// leave no room for a reply. A full context once ended the chat with "LanguageModel::append: ...
// truncate() or reset() first".
bool make_room(Conversation& chat, const LanguageModel& lm, const std::string& line, int64_t max_tokens,
               bool has_system) {
  const int64_t context = lm.context();
  if (const int64_t alone = tokens_with(chat, lm, line, true); alone >= context) {
    std::fprintf(stderr,
                 "vkformer: error: this message takes %lld tokens with the system message, but the context "
                 "(--ctx) holds %lld and needs room for the reply: the message is skipped; give a shorter "
                 "message%s or a larger --ctx\n",
                 static_cast<long long>(alone), static_cast<long long>(context),
                 has_system ? " or --system" : "");
    return false;
  }
  int dropped = 0, shifted = 0;
  const auto t0 = std::chrono::steady_clock::now();
  while (tokens_with(chat, lm, line, false) + std::min(max_tokens, context / 2) > context &&
         chat.forget_oldest_turn()) {
    ++dropped;
    shifted += chat.last_forget_shifted() ? 1 : 0;
  }
  // A shift moves the kept turns' cache rows (their keys re-rotated), so the next turn runs only
  // its own tokens; otherwise the conversation runs again from its messages.
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (dropped > 0)
    std::fprintf(stderr,
                 "vkformer chat: the context (--ctx %lld tokens) is full: forgot the oldest %d turn%s (%s, %.3f s)\n",
                 static_cast<long long>(context), dropped, dropped == 1 ? "" : "s",
                 shifted == dropped ? "shifted out of the cache" : "the conversation runs again", seconds);
  return true;
}

int chat_command(ChatArgs& a, const GlobalOptions& globals) {
  return run_llm_command([&] {
    check_llm_args(a.llm, "chat");
    check_speculative_args(a.llm);
    check_utf8(a.system, "--system", true);
    check_chat_template_name(a.llm);
    Device device = Device::open(globals.device_options());
    LanguageModel lm = load_llm(device, a.llm);
    std::optional<LanguageModel> draft = load_draft(device, a.llm, lm);
    Conversation chat(lm, chosen_chat_template(lm, a.llm),
                      a.has_system ? std::optional<std::string>(a.system) : std::nullopt);
    const bool tty = platform::is_terminal(stdin) && platform::is_terminal(stderr);
    const bool echo = !platform::is_terminal(stdin);
    TextGenerationOptions options;
    options.max_tokens = a.llm.max_tokens;
    options.sampling = a.llm.sampling;
    options.speculative = a.llm.speculative;
    options.speculative.draft_model = draft ? &*draft : nullptr;
    std::string line;
    int skipped = 0;  // messages that could not be answered: the exit status says so at the end
    for (int64_t number = 1;; ++number) {
      if (tty) std::fprintf(stderr, "> ");
      if (!read_line(line)) break;
      if (line.empty()) continue;
      if (const std::string problem = utf8_problem(line, "stdin line " + std::to_string(number)); !problem.empty()) {
        std::fprintf(stderr, "vkformer: error: %s; the message is skipped\n", problem.c_str());
        ++skipped;
        continue;
      }
      if (echo) {
        std::printf("> %s\n", line.c_str());
        std::fflush(stdout);
      }
      if (!make_room(chat, lm, line, options.max_tokens, a.has_system)) {
        ++skipped;
        continue;
      }
      TextGenerationResult r;
      InterruptScope ctrl_c;  // only while replying: Ctrl-C at the prompt ends the chat as usual
      try {
        r = chat.reply(line, options, stream_to_stdout);
      } catch (const Error& e) {
        // This message's fault (the turn is forgotten, the conversation goes on); others end it.
        if (e.code() != ErrorCode::invalid_argument) throw;
        std::fprintf(stderr, "vkformer: error: %s; the message is skipped\n", e.what());
        ++skipped;
        continue;
      }
      std::printf("\n\n");
      std::fflush(stdout);
      std::fprintf(stderr, "vkformer chat: turn %lld tokens, cache %lld of %lld; %s\n",
                   static_cast<long long>(chat.last_turn_tokens()), static_cast<long long>(lm.position()),
                   static_cast<long long>(lm.context()), describe_stats(r.stats).c_str());
      if (const std::string spec = describe_speculation(r.stats); !spec.empty())
        std::fprintf(stderr, "vkformer chat: %s\n", spec.c_str());
      if (r.stats.stop == StopReason::context_full)
        std::fprintf(stderr, "vkformer chat: the reply filled the context (--ctx %lld tokens) and was cut short; "
                             "the oldest turns will be forgotten to make room for the next message\n",
                     static_cast<long long>(lm.context()));
      if (const int status = exit_status_after(r.stats, 0); status != 0) return status;
    }
    if (report_validation(device)) return 1;
    if (skipped > 0) {
      std::fprintf(stderr, "vkformer chat: %d message%s skipped (see above)\n", skipped, skipped == 1 ? " was" : "s were");
      return kExitError;
    }
    return 0;
  });
}

}  // namespace

Command add_chat_command(CLI::App& app, const GlobalOptions& globals) {
  auto* sub = app.add_subcommand("chat", kChatHelp);
  auto args = std::make_shared<ChatArgs>();
  add_gguf_option(*sub, "-m,--model", args->llm.model, "The model: a GGUF file (llama architecture)")->required();
  sub->add_option("--system", args->system,
                  "A system message first (default: the template's own, if it has one)")
      ->type_name("TEXT")
      ->each([args](const std::string&) { args->has_system = true; });
  add_llm_options(*sub, args->llm);
  add_speculative_options(*sub, args->llm);
  add_chat_template_option(*sub, args->llm);
  return {sub, [&globals, args]() { return chat_command(*args, globals); }};
}

}  // namespace vkformer::cli
