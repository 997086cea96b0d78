// `vkformer generate --model FILE.gguf --prompt TEXT`: text from a GGUF language model, streamed
// to stdout token by token; the prompt and generation speeds go to stderr, and with -v what each
// decoded token's pass executes (dispatches, barriers, pipeline binds, weight bytes read).
#include <cstdio>
#include <string>

#include "interrupt.hpp"
#include "llm_cli.hpp"
#include "vkformer/gguf_tokenizer.hpp"
#include "vkformer/chat.hpp"
#include "vkformer/error.hpp"

namespace vkformer::cli {

int generate_llm(const std::string& model, const std::string& prompt, bool chat, const std::string& src,
                 LlmArgs llm, const GlobalOptions& globals) {
  return run_llm_command([&] {
    llm.model = model;
    if (!src.empty())
      usage_error("--src is for seq2seq models; a GGUF language model takes --prompt TEXT");
    if (prompt.empty()) usage_error("--prompt TEXT is required with a GGUF language model");
    check_llm_args(llm);
    check_speculative_args(llm);
    if (chat) check_chat_template_name(llm);
    else if (!llm.chat_template.empty())
      usage_error("--chat-template is for --chat");

    Device device = Device::open(globals.device_options());
    LanguageModel lm = load_llm(device, llm);
    std::optional<LanguageModel> draft = load_draft(device, llm, lm);
    // The template comes with the model (read from the file as it loaded).
    std::optional<ChatTemplate> chat_template;
    if (chat) chat_template = chosen_chat_template(lm, llm);
    const std::string text = chat ? chat_template->apply({{"user", prompt}}) : prompt;
    // A template that writes the BOS token itself (Llama 3, Gemma) gets no second one.
    const bool add_bos = !(chat && chat_template->writes_bos());
    const std::vector<int32_t> ids = lm.tokenizer().encode(text, add_bos, true);
    if (ids.empty()) usage_error("--prompt gives no tokens");
    check_prompt_fits(lm, ids.size());

    TextGenerationOptions options;
    options.max_tokens = llm.max_tokens;
    options.sampling = llm.sampling;
    options.speculative = llm.speculative;
    options.speculative.draft_model = draft ? &*draft : nullptr;
    InterruptScope ctrl_c;  // Ctrl-C stops at the next token; the statistics so far are printed
    const auto r = generate(lm, ids, options, stream_to_stdout);
    std::printf("\n");
    std::fflush(stdout);
    std::fprintf(stderr, "vkformer generate: %s\n", describe_stats(r.stats).c_str());
    if (const std::string spec = describe_speculation(r.stats); !spec.empty())
      std::fprintf(stderr, "vkformer generate: %s\n", spec.c_str());
    if (llm.verbose) {
      const ExecutorStats s = lm.decode_step_stats();
      const int64_t layers = lm.config().n_layers;
      std::fprintf(stderr,
                   "vkformer generate: per decoded token %zu dispatches (%.2f per layer of %lld), %zu "
                   "barriers, %zu pipeline binds, %.1f MB of weights read\n",
                   s.dispatches, static_cast<double>(s.dispatches) / static_cast<double>(layers),
                   static_cast<long long>(layers), s.pipeline_barriers, s.pipeline_binds,
                   static_cast<double>(s.weight_bytes_read) / 1e6);
    }
    return exit_status_after(r.stats, report_validation(device) ? 1 : 0);
  });
}

}  // namespace vkformer::cli
