#pragma once
// What the language-model commands share (`generate` with a GGUF file, `chat`, `bench --model`):
// the --model FILE.gguf check, --ctx, the sampling options, loading, and the rule that bad input
// (a missing or corrupt file, an unsupported model, an out-of-range value, a prompt too long for
// --ctx) ends with one line on stderr: exit status 2 for the command line's mistakes (UsageError),
// 1 for the rest (cli.hpp states the rule).
#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "cli.hpp"
#include "vkformer/generate.hpp"
#include "vkformer/llm.hpp"
#include "vkformer/sampling.hpp"

namespace vkformer::cli {

struct LlmArgs {
  std::string model;     // --model FILE.gguf
  int64_t context = 0;   // --ctx N (0: the model's, at most 4096)
  int64_t max_tokens = 128;  // -n N
  SamplingOptions sampling;
  std::string chat_template;  // --chat-template NAME (empty: the file's template)
  bool verbose = false;  // -v: load_llm prints the device, the model, the KV cache and the load time
  // --cache-type-k/--cache-type-v: f32, f16, q8_0 or q4_0; empty: the activations'
  std::string cache_type_k, cache_type_v;
  // Speculative decoding (add_speculative_options): --spec ngram|draft, --model-draft FILE.gguf
  // (implies --spec draft), --draft-max, --draft-min, --draft-p-min.
  std::string spec, model_draft;
  SpeculativeOptions speculative;
  bool kv_rotation = true;  // false: --no-kv-rotation
};

// --spec, --model-draft, --draft-max, --draft-min, --draft-p-min (llama.cpp's names).
void add_speculative_options(CLI::App& sub, LlmArgs& args);
// Their ranges and combination (UsageError naming the option), and that --model-draft is a GGUF
// file; sets args.speculative.mode. Before anything is loaded.
void check_speculative_args(LlmArgs& args);
// The draft model of --model-draft (none without it), loaded with the target's --ctx and checked
// against the loaded target's vocabulary: errors name --model-draft.
std::optional<LanguageModel> load_draft(Device& device, const LlmArgs& args, const LanguageModel& target);
// "drafted 120, accepted 96 (80%), 2.9 tokens per pass" for the stats line; empty without speculation.
std::string describe_speculation(const TextGenerationStats& s);

// --cache-type-k and --cache-type-v (llama.cpp's names; CLI11 takes no -ctk): the KV cache's types;
// --no-kv-rotation: quantized caches store q, k and v unrotated (LanguageModelOptions::kv_rotation).
void add_cache_type_options(CLI::App& sub, LlmArgs& args);
// The types given, as LanguageModelOptions takes them; an unknown name is a UsageError naming the
// option.
std::optional<DType> cache_type_k(const LlmArgs& args);
std::optional<DType> cache_type_v(const LlmArgs& args);
// "K q8_0, V q8_0: 25.5 KiB per token, 12.8 MiB for 512 tokens; the device's memory holds 8192":
// what -v and serve's start line say of a model's KV cache.
std::string describe_kv_cache(const KvCacheInfo& kv, int64_t context);

// -c/--ctx, -n and the sampling options (--temp/--temperature, --top-k, --top-p, --min-p,
// --repeat-penalty, --repeat-last-n, --seed): llama.cpp's names and short forms.
void add_llm_options(CLI::App& sub, LlmArgs& args, bool with_max_tokens = true);
// --chat-template NAME (generate --chat, chat): a prompt format by name instead of the file's
// template, for a template vkformer does not recognize or to override one.
void add_chat_template_option(CLI::App& sub, LlmArgs& args);
// An unknown --chat-template NAME is a command-line mistake (UsageError): checked before loading.
void check_chat_template_name(const LlmArgs& args);
// The named format (with the file's BOS/EOS strings) or the file's template, as the loaded model
// carries them (LanguageModel::chat_templates()); a file without a usable template throws why.
ChatTemplate chosen_chat_template(const LanguageModel& lm, const LlmArgs& args);
// The ranges, naming the options (UsageError), and that --model is a GGUF file (`command` is
// named in the hint otherwise); before anything is loaded.
void check_llm_args(const LlmArgs& args, const std::string& command = "bench");
// Loads --model after checking --ctx against the file's context length; with args.verbose,
// prints the device, the model and the load time to stderr.
LanguageModel load_llm(Device& device, const LlmArgs& args);
// The prompt must leave room for a token in the cache: errors name --ctx.
void check_prompt_fits(const LanguageModel& model, size_t prompt_tokens);

// Runs `body`. Errors propagate to main(), which applies the one exit-status rule (cli.hpp);
// kept as the commands' common entry point.
int run_llm_command(const std::function<int()>& body);

// The token callback of generate and chat: writes the text to stdout at once and stops
// generation after Ctrl-C (inside an InterruptScope, interrupt.hpp).
bool stream_to_stdout(std::string_view text, int32_t token);
// After a generation: when Ctrl-C stopped it, says so on stderr and gives kExitInterrupted,
// else `status`.
int exit_status_after(const TextGenerationStats& stats, int status);

// `vkformer generate --model FILE.gguf` (cmd_generate_llm.cpp): --src must be empty; verbose (-v)
// adds what each decoded token's pass executes.
int generate_llm(const std::string& model, const std::string& prompt, bool chat, const std::string& src,
                 LlmArgs llm, const GlobalOptions& globals);

// `vkformer bench --model FILE.gguf -p P -n N -r R` (cmd_bench_llm.cpp): pp<P> and tg<N>, a
// decoded token's time per kernel and its weight bytes per second against the copy bandwidth
// (not measured with --no-peak). `kv` carries --cache-type-k/--cache-type-v; `depth` tokens (-d,
// llama-bench's n_depth) are in the cache before each test, prefilled once.
int bench_llm(const std::string& model, int64_t n_prompt, int64_t n_gen, int repeats, const std::string& json_path,
              bool no_peak, const GlobalOptions& globals, const LlmArgs& kv = {}, int64_t depth = 0);

// `vkformer bench --model FILE.gguf --spec MODE --spec-prompt FILE...` (cmd_bench_spec.cpp):
// speculative against plain greedy generation of n_gen tokens per prompt file, rounds
// alternating; `args` carries the speculative options (and --cache-type-k/v).
int bench_speculative(const std::string& model, LlmArgs args, const std::vector<std::string>& prompt_files,
                      int64_t n_gen, int repeats, const std::string& json_path, const GlobalOptions& globals);

// `vkformer demo --llm-model FILE.gguf` (cmd_demo_llm.cpp): a greedy chat answer checked against
// the reference in golden_dir (tests/golden_llama).
void llm_demo(Device& device, const std::string& gguf, const std::string& golden_dir);

// "12.3 tokens/s" and friends for the stats line on stderr.
std::string describe_stats(const TextGenerationStats& s);

}  // namespace vkformer::cli
