#include "llm_cli.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "vkformer/chat.hpp"
#include "cli_options.hpp"
#include "interrupt.hpp"
#include "model_cli.hpp"
#include "model_kind.hpp"
#include "vkformer/error.hpp"
#include "vkformer/gguf.hpp"

namespace vkformer::cli {

namespace {

[[noreturn]] void bad(const std::string& what) { usage_error(what); }

std::string show(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

void print_verbose_draft(const LanguageModel& lm, const std::string& path, double load_ms);

}  // namespace

void add_llm_options(CLI::App& sub, LlmArgs& a, bool with_max_tokens) {
  // Integers are parsed strictly (cli.hpp): no wrapping, saturating or negative unsigned values.
  constexpr int64_t kInt32Max = INT32_MAX;
  add_whole_number(sub, "-c,--ctx", a.context, 0, kInt32Max,
                   "Tokens the KV cache holds: the prompt and everything generated (default: the "
                   "model's context length, at most 4096)");
  if (with_max_tokens)
    add_whole_number(sub, "-n,--max-tokens", a.max_tokens, 1, kInt32Max, "Most tokens to generate (default: 128)");
  sub.add_option("--temperature,--temp", a.sampling.temperature,
                 "Sampling temperature, >= 0; 0 = greedy (default: 0)")->type_name("T");
  add_whole_number(sub, "--top-k", a.sampling.top_k, 0, kInt32Max,
                   "Keep the K most likely tokens, >= 0; 0 = off (default: 0)", "K");
  sub.add_option("--top-p", a.sampling.top_p,
                 "Keep the most likely tokens up to probability P, in (0, 1]; 1 = off (default: 1)")
      ->type_name("P");
  sub.add_option("--min-p", a.sampling.min_p,
                 "Keep tokens at least P times as likely as the best, in [0, 1]; 0 = off (default: 0)")
      ->type_name("P");
  sub.add_option("--repeat-penalty", a.sampling.repeat_penalty,
                 "Penalize tokens among the last --repeat-last-n (llama.cpp's rule), > 0; 1 = off "
                 "(default: 1)")
      ->type_name("R");
  add_whole_number(sub, "--repeat-last-n", a.sampling.repeat_last_n, 0, kInt32Max,
                   "How many recent tokens the penalty looks at, >= 0 (default: 64)");
  sub.add_option("--seed", a.sampling.seed, "Random seed for sampling, 0 to 2^64 - 1 (default: 0)")
      ->check(unsigned_number_in(0, UINT64_MAX))
      ->type_name("S");
  add_cache_type_options(sub, a);
}

void add_speculative_options(CLI::App& sub, LlmArgs& a) {
  constexpr int64_t kInt32Max = INT32_MAX;
  sub.add_option("--spec", a.spec,
                 "Speculative decoding: ngram (prompt lookup: what followed the latest earlier "
                 "occurrence of the last few tokens is proposed and verified in one pass; helps "
                 "where the reply copies the prompt) or draft (a --model-draft proposes); greedy "
                 "output is unchanged")
      ->type_name("MODE");
  sub.add_option("--model-draft", a.model_draft,
                 "A draft model of the target's vocabulary (GGUF) for --spec draft (implied)")
      ->type_name("FILE");
  sub.add_option("--draft-max,--draft", a.speculative.draft_max,
                 "Tokens proposed per verification pass at most, 1.." +
                     std::to_string(LanguageModel::kMaxVerifyTokens - 1) + " (default: 16)")
      ->check(whole_number_in(0, kInt32Max))
      ->type_name("N");
  sub.add_option("--draft-min", a.speculative.draft_min,
                 "Fewer proposals than this are not verified, 0..--draft-max (default: 0)")
      ->check(whole_number_in(0, kInt32Max))
      ->type_name("N");
  sub.add_option("--draft-p-min", a.speculative.draft_p_min,
                 "The draft model stops proposing where its top token is less likely than P, in "
                 "[0, 1] (default: 0.8)")
      ->type_name("P");
}

void check_speculative_args(LlmArgs& a) {
  SpeculativeOptions& s = a.speculative;
  if (!a.spec.empty() && a.spec != "ngram" && a.spec != "draft")
    bad("--spec must be ngram or draft, got '" + a.spec + "'");
  if (a.spec == "ngram" && !a.model_draft.empty())
    bad("--spec ngram takes no --model-draft (that is --spec draft)");
  if (a.spec == "draft" && a.model_draft.empty()) bad("--spec draft needs --model-draft FILE.gguf");
  s.mode = !a.model_draft.empty() ? SpeculativeMode::draft
           : a.spec == "ngram"    ? SpeculativeMode::ngram
                                  : SpeculativeMode::off;
  const int64_t most = LanguageModel::kMaxVerifyTokens - 1;
  if (s.draft_max < 1 || s.draft_max > most)
    bad("--draft-max must be in 1.." + std::to_string(most) + " (tokens verified in one pass), got " +
        std::to_string(s.draft_max));
  if (s.draft_min > s.draft_max)
    bad("--draft-min must be at most --draft-max (" + std::to_string(s.draft_max) + "), got " +
        std::to_string(s.draft_min));
  if (!(s.draft_p_min >= 0 && s.draft_p_min <= 1)) bad("--draft-p-min must be in [0, 1], got " + show(s.draft_p_min));
  if (!a.model_draft.empty()) {
    if (!std::filesystem::is_regular_file(a.model_draft))
      bad("--model-draft " + a.model_draft + ": no such file");
    if (model_kind(a.model_draft) != ModelKind::gguf)
      bad("--model-draft " + a.model_draft + " is not a GGUF file (a draft model is a GGUF language model)");
  }
}

std::optional<LanguageModel> load_draft(Device& device, const LlmArgs& a, const LanguageModel& target) {
  if (a.model_draft.empty()) return std::nullopt;
  LanguageModelOptions o;
  o.cache_type_k = cache_type_k(a);
  o.cache_type_v = cache_type_v(a);
  try {
    // The target's context where the draft's own is as long; a shorter one proposes until it
    // is full (then decoding goes on plainly).
    const GgufFile file(a.model_draft);
    const std::string arch(file.get_string_or("general.architecture", "llama"));
    const auto own = static_cast<int64_t>(file.get_uint_or(arch + ".context_length", 0));
    o.context = own > 0 ? std::min(own, target.context()) : target.context();
    const auto t0 = Clock::now();
    LanguageModel draft = LanguageModel::load(device, a.model_draft, o);
    check_draft_model(target, draft);
    if (a.verbose) print_verbose_draft(draft, a.model_draft, ms_since(t0));
    return draft;
  } catch (const Error& e) {
    const std::string m = e.what();
    throw Error(e.code(), m.starts_with(a.model_draft) ? "--model-draft " + m : "--model-draft " + a.model_draft + ": " + m);
  }
}

std::string describe_speculation(const TextGenerationStats& s) {
  if (s.passes == 0 || (s.drafted_tokens == 0 && s.accepted_tokens == 0)) return "";
  char buf[160];
  std::snprintf(buf, sizeof buf, "speculation: %lld drafted, %lld accepted (%.0f%%), %.2f tokens per pass",
                static_cast<long long>(s.drafted_tokens), static_cast<long long>(s.accepted_tokens),
                100 * s.acceptance_rate(), static_cast<double>(s.generated_tokens) / static_cast<double>(s.passes));
  return buf;
}

void add_cache_type_options(CLI::App& sub, LlmArgs& a) {
  sub.add_option("--cache-type-k", a.cache_type_k,
                 "KV cache type of the keys: f32, f16, q8_0 or q4_0 (q8_0: 34 bytes per 32 values, "
                 "about half of f16; default: the activations' type, f32)")
      ->type_name("TYPE");
  sub.add_option("--cache-type-v", a.cache_type_v,
                 "KV cache type of the values: f32, f16, q8_0 or q4_0 (default: the activations' type, f32)")
      ->type_name("TYPE");
  sub.add_flag("--no-kv-rotation{false}", a.kv_rotation,
               "Store quantized K/V caches unrotated (default: q, k and v rotated by a Hadamard matrix, "
               "as llama.cpp does; the same attention, far less loss for q4_0 keys)");
}

namespace {

std::optional<DType> cache_type(const std::string& name, const char* option) {
  if (name.empty()) return std::nullopt;
  try {
    return parse_kv_cache_type(name, option);
  } catch (const Error& e) {
    usage_error(e.what());  // a command-line mistake: exit status 2
  }
}

std::string bytes_text(double bytes) {
  char buf[32];
  if (bytes >= 1024.0 * 1024.0 * 1024.0) std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  else if (bytes >= 1024.0 * 1024.0) std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / (1024.0 * 1024.0));
  else if (bytes >= 1024.0) std::snprintf(buf, sizeof buf, "%.1f KiB", bytes / 1024.0);
  else std::snprintf(buf, sizeof buf, "%.0f bytes", bytes);
  return buf;
}

}  // namespace

std::optional<DType> cache_type_k(const LlmArgs& a) { return cache_type(a.cache_type_k, "--cache-type-k"); }
std::optional<DType> cache_type_v(const LlmArgs& a) { return cache_type(a.cache_type_v, "--cache-type-v"); }

std::string describe_kv_cache(const KvCacheInfo& kv, int64_t context) {
  std::string rotation;  // the attention rotation of quantized caches, where it applies
  if (kv.rotation_k > 0 || kv.rotation_v > 0)
    rotation = "; rotated by Hadamard blocks of " + std::to_string(kv.rotation_k) + " (q, k) and " +
               std::to_string(kv.rotation_v) + " (v)";
  return "K " + std::string(dtype_name(kv.type_k)) + ", V " + std::string(dtype_name(kv.type_v)) + ": " +
         std::to_string(kv.bytes_per_token) + " bytes per token (" + bytes_text(static_cast<double>(kv.bytes)) +
         " for the context of " + std::to_string(context) + " and a prompt chunk's padding); the device's memory holds a context of " +
         std::to_string(kv.context_that_fits) + rotation;
}

void check_llm_args(const LlmArgs& a, const std::string& command) {
  (void)cache_type_k(a);  // unknown names: UsageError naming the option
  (void)cache_type_v(a);
  if (a.max_tokens < 1) bad("-n must be at least 1, got " + std::to_string(a.max_tokens));
  if (a.context < 0) bad("--ctx must be at least 1 (or 0 for the model's), got " + std::to_string(a.context));
  const SamplingOptions& s = a.sampling;
  auto range = [](const std::string& flag, const std::string& what, double got) {
    bad(flag + " must be " + what + ", got " + show(got));
  };
  if (!(s.temperature >= 0) || std::isinf(s.temperature)) range("--temperature", "a number >= 0 (0: greedy)", s.temperature);
  if (s.top_k < 0) range("--top-k", ">= 0 (0: off)", s.top_k);
  if (!(s.top_p > 0 && s.top_p <= 1)) range("--top-p", "in (0, 1] (1: off)", s.top_p);
  if (!(s.min_p >= 0 && s.min_p <= 1)) range("--min-p", "in [0, 1] (0: off)", s.min_p);
  if (!(s.repeat_penalty > 0) || std::isinf(s.repeat_penalty))
    range("--repeat-penalty", "a number > 0 (1: off)", s.repeat_penalty);
  if (s.repeat_last_n < 0) range("--repeat-last-n", ">= 0", s.repeat_last_n);
  try {
    validate(s);  // anything the library checks beyond these
  } catch (const Error& e) {
    bad(e.what());
  }
  require_model_kind(command, a.model, model_kind(a.model));
}

void add_chat_template_option(CLI::App& sub, LlmArgs& a) {
  sub.add_option("--chat-template", a.chat_template,
                 "The prompt format by name instead of the model's tokenizer.chat_template (for a "
                 "template vkformer does not recognize): " + ChatTemplate::names())
      ->type_name("NAME");
}

void check_chat_template_name(const LlmArgs& a) {
  if (a.chat_template.empty()) return;
  try {
    (void)ChatTemplate::named(a.chat_template);
  } catch (const Error& e) {
    // An unknown name is a command-line mistake (exit status 2), not the file's.
    if (e.code() == ErrorCode::invalid_argument) usage_error(e.what());
    throw;
  }
}

ChatTemplate chosen_chat_template(const LanguageModel& lm, const LlmArgs& a) {
  return lm.chat_templates().choose(a.chat_template);
}

namespace {

// The file's own context length, so --ctx is checked with the options' words before a load
// (the library's check names LanguageModel::load).
int64_t model_context_length(const std::string& path) {
  const GgufFile file(path);
  const std::string arch(file.get_string_or("general.architecture", "llama"));
  return static_cast<int64_t>(file.get_uint_or(arch + ".context_length", 0));
}

void print_verbose(const Device& device, const LanguageModel& lm, const std::string& path, double load_ms) {
  const DeviceInfo& d = device.info();
  const LanguageModelConfig& c = lm.config();
  std::fprintf(stderr, "device      %u: %s (%s)\n", d.index, d.name.c_str(), d.driver_name.c_str());
  std::fprintf(stderr,
               "model       %s: %s, %lld layers, d_model %lld, %lld heads (%lld key/value), feed-forward %lld, "
               "vocabulary %lld, context %lld of %lld\n",
               path.c_str(), c.architecture.c_str(), static_cast<long long>(c.n_layers),
               static_cast<long long>(c.d_model), static_cast<long long>(c.n_heads),
               static_cast<long long>(c.n_kv_heads), static_cast<long long>(c.d_ff),
               static_cast<long long>(c.vocab_size), static_cast<long long>(lm.context()),
               static_cast<long long>(c.context_length));
  std::fprintf(stderr, "kv cache    %s\n", describe_kv_cache(lm.kv_cache(), lm.context()).c_str());
  std::fprintf(stderr, "load        %s (weights to the device, graphs compiled and recorded)\n",
               format_ms(load_ms).c_str());
}

void print_verbose_draft(const LanguageModel& lm, const std::string& path, double load_ms) {
  const LanguageModelConfig& c = lm.config();
  std::fprintf(stderr, "draft model %s: %s, %lld layers, d_model %lld, loaded in %s\n", path.c_str(),
               c.architecture.c_str(), static_cast<long long>(c.n_layers), static_cast<long long>(c.d_model),
               format_ms(load_ms).c_str());
}

}  // namespace

LanguageModel load_llm(Device& device, const LlmArgs& a) {
  LanguageModelOptions o;
  o.context = a.context;
  o.cache_type_k = cache_type_k(a);
  o.cache_type_v = cache_type_v(a);
  o.kv_rotation = a.kv_rotation;
  try {
    if (const int64_t limit = model_context_length(a.model); limit > 0 && a.context > limit)
      bad("--ctx " + std::to_string(a.context) + " is more than this model's context length (" + std::to_string(limit) +
          " tokens): give --ctx " + std::to_string(limit) + " or less, or leave it out for " +
          std::to_string(std::min<int64_t>(limit, 4096)));
    const auto t0 = Clock::now();
    LanguageModel lm = LanguageModel::load(device, a.model, o);
    if (a.verbose) print_verbose(device, lm, a.model, ms_since(t0));
    return lm;
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    std::string m = e.what();
    // A cache type this model cannot take (a quantized one on head dims not whole blocks) is the
    // command line's mistake: named by its option, exit status 2.
    for (const char* field : {"cache_type_k", "cache_type_v"})
      if (const size_t at = m.find(std::string(": ") + field + " "); e.code() == ErrorCode::invalid_argument && at != std::string::npos)
        bad(std::string(field[11] == 'k' ? "--cache-type-k" : "--cache-type-v") + m.substr(at + 2 + 12));
    // Its advice speaks of the context, which this tool sets with --ctx.
    if (e.code() == ErrorCode::out_of_memory) m += "; --ctx sets the context";
    // The library's messages usually name the file already.
    throw Error(e.code(), m.starts_with(a.model) ? "--model " + m : "--model " + a.model + ": " + m);
  }
}

void check_prompt_fits(const LanguageModel& model, size_t prompt_tokens) {
  if (static_cast<int64_t>(prompt_tokens) >= model.context())
    bad("the prompt has " + std::to_string(prompt_tokens) + " tokens but the context (--ctx) holds " +
        std::to_string(model.context()) + ": no room to generate; give a larger --ctx or a shorter prompt");
}

int run_llm_command(const std::function<int()>& body) { return body(); }

bool stream_to_stdout(std::string_view text, int32_t) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
  return !InterruptScope::interrupted();
}

int exit_status_after(const TextGenerationStats& stats, int status) {
  if (stats.stop != StopReason::callback || !InterruptScope::interrupted()) return status;
  std::fprintf(stderr, "vkformer: interrupted (Ctrl-C) after %lld generated tokens\n",
               static_cast<long long>(stats.generated_tokens));
  return kExitInterrupted;
}

std::string describe_stats(const TextGenerationStats& s) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "prompt %lld tokens in %.2f s (%.2f tokens/s), generation %lld tokens in %.2f s (%.2f tokens/s), "
                "stop: %s",
                static_cast<long long>(s.prompt_tokens), s.prompt_seconds, s.prompt_tokens_per_second(),
                static_cast<long long>(s.generated_tokens), s.generation_seconds, s.generation_tokens_per_second(),
                to_string(s.stop));
  return buf;
}

}  // namespace vkformer::cli
