#pragma once
// What the language-model commands share (`generate` with a GGUF file, `chat`, `bench --model`):
// the --model FILE.gguf check, --ctx, the sampling options, loading, and the rule that bad input
// (a missing or corrupt file, an unsupported model, an out-of-range value, a prompt too long for
// --ctx) ends with one line on stderr and exit status 2.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <string>

#include "cli.hpp"
#include "vkformer/generate.hpp"
#include "vkformer/llm.hpp"
#include "vkformer/sampling.hpp"

namespace vkformer::cli {

constexpr int kExitBadInput = 2;

struct LlmArgs {
  std::string model;     // --model FILE.gguf
  int64_t context = 0;   // --ctx N (0: the model's, at most 4096)
  int64_t max_tokens = 128;  // -n N
  SamplingOptions sampling;
  std::string chat_template;  // --chat-template NAME (empty: the file's template)
};

// Whether --model names a GGUF file (a regular file starting with "GGUF", or any path ending in
// .gguf, so a missing one is reported as a missing GGUF file).
bool is_gguf_path(const std::string& path);

// --ctx, -n and the sampling options (--temperature, --top-k, --top-p, --min-p,
// --repeat-penalty, --repeat-last-n, --seed).
void add_llm_options(CLI::App& sub, LlmArgs& args, bool with_max_tokens = true);
// --chat-template NAME (generate --chat, chat): a prompt format by name instead of the file's
// template, for a template vkformer does not recognize or to override one.
void add_chat_template_option(CLI::App& sub, LlmArgs& args);
// The named format (with the file's BOS/EOS strings) or the file's template.
ChatTemplate load_chat_template(const LlmArgs& args);
// The ranges, naming the options; before anything is loaded.
void check_llm_args(const LlmArgs& args);
LanguageModel load_llm(Device& device, const LlmArgs& args);
// The prompt must leave room for a token in the cache: errors name --ctx.
void check_prompt_fits(const LanguageModel& model, size_t prompt_tokens);

// Runs `body`; an Error that is the input's fault (invalid_argument, io, format, unsupported,
// shape_mismatch) is printed as "vkformer: error: <message>" and gives kExitBadInput, others
// propagate (exit status 1).
int run_llm_command(const std::function<int()>& body);

// `vkformer generate --model FILE.gguf` (cmd_generate_llm.cpp): --src must be empty; verbose (-v)
// adds what each decoded token's pass executes.
int generate_llm(const std::string& model, const std::string& prompt, bool chat, const std::string& src,
                 LlmArgs llm, bool verbose, const GlobalOptions& globals);

// `vkformer bench --model FILE.gguf -p P -n N -r R` (cmd_bench_llm.cpp): pp<P> and tg<N>.
int bench_llm(const std::string& model, int64_t n_prompt, int64_t n_gen, int repeats, const std::string& json_path,
              const GlobalOptions& globals);

// `vkformer demo --llm-model FILE.gguf` (cmd_demo_llm.cpp): a greedy chat answer checked against
// the reference in golden_dir (tests/golden_llama).
void llm_demo(Device& device, const std::string& gguf, const std::string& golden_dir);

// "12.3 tokens/s" and friends for the stats line on stderr.
std::string describe_stats(const TextGenerationStats& s);

}  // namespace vkformer::cli
