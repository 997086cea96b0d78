// `vkformer perplexity -m MODEL.gguf -f TEXT [-c N] [--chunks K] [--json]`: the model's perplexity
// on a text, measured as llama.cpp's llama-perplexity measures it (include/vkformer/perplexity.hpp),
// so both print the same number for the same model, text and --ctx. The running estimate after
// each chunk goes to stdout ("[3/48] 14.1234 ± 0.5678") and llama-perplexity's last line after
// them ("Final estimate: PPL = ... +/- ..."); with --json one JSON object instead. A progress bar
// on stderr where it is a terminal. Ctrl-C stops after the current pass: the estimate so far is
// printed and the status is 130.
//
// Bad input, before any model runs where it can be: --ctx below 16 or beyond the model's context
// (status 2); a missing, empty, binary (NUL bytes, not UTF-8) or too short --file (status 1).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "interrupt.hpp"
#include "io_util.hpp"
#include "cli_options.hpp"
#include "llm_cli.hpp"
#include "progress.hpp"
#include "vkformer/error.hpp"
#include "vkformer/perplexity.hpp"

namespace vkformer::cli {

// What `vkformer perplexity --help` says first.
constexpr const char* kPerplexityHelp =
    "A GGUF language model's perplexity on a text, as llama.cpp's llama-perplexity measures it: the "
    "text cut into chunks of --ctx tokens, each scored on its second half; the running estimate after "
    "each chunk, then 'Final estimate: PPL = X +/- E'. The text needs at least 2 x --ctx tokens.";

namespace {

// Below this a chunk's scored half is a handful of tokens; the library refuses it too.
constexpr int64_t kMinContext = 16;

struct PerplexityArgs {
  LlmArgs llm;  // --model, --ctx (512 by default, as llama-perplexity's), -v
  std::string file;
  int64_t chunks = 0;  // 0: all the text holds
  bool json = false;
};

// The whole file as text: the file's problems are status 1 and name it.
std::string read_text(const std::string& file) {
  try {
    io::check_regular_file(file);
  } catch (const Error& e) {
    throw Error(e.code(), std::string("--file: ") + e.what());
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error(ErrorCode::io, "--file " + file + ": cannot be opened");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw Error(ErrorCode::io, "--file " + file + ": cannot be read");
  if (text.empty())
    throw Error(ErrorCode::invalid_argument,
                "--file " + file + " is empty: perplexity needs a text of at least two chunks (2 x --ctx tokens)");
  if (const size_t nul = text.find('\0'); nul != std::string::npos)
    throw Error(ErrorCode::invalid_argument, "--file " + file + " is not text: it holds a NUL byte at offset " +
                                                 std::to_string(nul) + " (a binary file?)");
  if (const std::string problem = utf8_problem(text, "--file " + file); !problem.empty())
    throw Error(ErrorCode::invalid_argument, problem);
  return text;
}

std::string estimate(double ppl, double error) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.4f ± %.4f", ppl, error);
  return buf;
}

int perplexity_command(PerplexityArgs& a, const GlobalOptions& globals) {
  check_llm_args(a.llm, "perplexity");
  if (a.llm.context < kMinContext)
    usage_error("--ctx " + std::to_string(a.llm.context) + " is too small for perplexity: give at least " +
                std::to_string(kMinContext) + " (each chunk's second half is scored after its first half)");
  const std::string text = read_text(a.file);
  Device device = Device::open(globals.device_options());
  LanguageModel lm = load_llm(device, a.llm);  // --ctx beyond the model's context is refused here
  const int64_t ctx = lm.context();
  const std::vector<int32_t> tokens = perplexity_tokens(lm, text);
  const auto n_tokens = static_cast<int64_t>(tokens.size());
  if (n_tokens < perplexity_min_tokens(ctx))
    throw Error(ErrorCode::invalid_argument,
                "--file " + a.file + " is too short: it has " + std::to_string(n_tokens) +
                    " tokens for this model, and --ctx " + std::to_string(ctx) + " needs at least " +
                    std::to_string(perplexity_min_tokens(ctx)) + " (two chunks of " + std::to_string(ctx) +
                    "); give a longer text or a smaller --ctx");
  const int64_t chunks = a.chunks > 0 ? std::min(a.chunks, n_tokens / ctx) : n_tokens / ctx;
  std::fprintf(stderr, "vkformer perplexity: %lld tokens, %lld chunks of %lld (the last %lld tokens of each scored)\n",
               static_cast<long long>(n_tokens), static_cast<long long>(chunks), static_cast<long long>(ctx),
               static_cast<long long>(ctx - ctx / 2 - 1));

  Progress progress("vkformer perplexity: tokens", chunks * (ctx - 1));
  int64_t shown = 0;
  InterruptScope ctrl_c;  // Ctrl-C stops after the current pass
  const PerplexityResult r =
      perplexity(lm, tokens, {.context = ctx, .chunks = chunks}, [&](const PerplexityProgress& p) {
        if (p.chunk_done && !a.json) {
          progress.clear();
          std::printf("[%lld/%lld] %s\n", static_cast<long long>(p.chunk + 1), static_cast<long long>(p.chunks),
                      estimate(p.ppl, p.ppl_error).c_str());
          std::fflush(stdout);
        }
        progress.advance(p.tokens_done - shown);
        shown = p.tokens_done;
        return !InterruptScope::interrupted();
      });
  progress.clear();

  if (a.json) {
    nlohmann::ordered_json doc;
    doc["model"] = a.llm.model;
    doc["file"] = a.file;
    doc["device"] = device.info().name;
    doc["context"] = ctx;
    const KvCacheInfo kv = lm.kv_cache();
    doc["cache_type_k"] = std::string(dtype_name(kv.type_k));
    doc["cache_type_v"] = std::string(dtype_name(kv.type_v));
    doc["kv_bytes_per_token"] = kv.bytes_per_token;
    doc["text_tokens"] = n_tokens;
    doc["chunks"] = r.chunks;
    doc["scored_tokens"] = r.scored_tokens;
    doc["ppl"] = r.ppl;
    doc["ppl_error"] = r.ppl_error;
    doc["mean_nll"] = r.mean_nll;
    doc["nll_error"] = r.nll_error;
    doc["chunk_ppl"] = r.chunk_ppl;
    doc["chunk_ppl_error"] = r.chunk_ppl_error;
    doc["seconds"] = r.seconds;
    doc["stopped"] = r.stopped;
    std::cout << doc.dump(1) << "\n";
  } else if (r.chunks > 0) {
    // llama-perplexity's own last line, so scripts that read one read both.
    std::printf("Final estimate: PPL = %.4f +/- %.5f\n", r.ppl, r.ppl_error);
  }
  std::fflush(stdout);
  const double run_tokens = static_cast<double>(shown);
  std::fprintf(stderr, "vkformer perplexity: %lld chunks, %lld tokens scored, in %.1f s (%.1f tokens/s through the model)\n",
               static_cast<long long>(r.chunks), static_cast<long long>(r.scored_tokens), r.seconds,
               r.seconds > 0 ? run_tokens / r.seconds : 0.0);
  if (r.stopped) {
    std::fprintf(stderr, "vkformer: interrupted (Ctrl-C) after %lld of %lld chunks%s\n",
                 static_cast<long long>(r.chunks), static_cast<long long>(chunks),
                 r.chunks > 0 ? ": the estimate covers those" : "");
    return kExitInterrupted;
  }
  return report_validation(device) ? 1 : 0;
}

}  // namespace

Command add_perplexity_command(CLI::App& app, const GlobalOptions& globals) {
  auto* sub = app.add_subcommand("perplexity", kPerplexityHelp);
  auto args = std::make_shared<PerplexityArgs>();
  args->llm.context = 512;
  add_gguf_option(*sub, "-m,--model", args->llm.model, "The model: a GGUF file")->required();
  sub->add_option("-f,--file", args->file, "The text: a UTF-8 file (e.g. wikitext-2's wiki.test.raw)")
      ->required()
      ->type_name("TEXT");
  add_whole_number(*sub, "-c,--ctx", args->llm.context, 1, INT32_MAX,
                   "Tokens per chunk, also the KV cache's length (default: 512, as llama-perplexity's)");
  add_whole_number(*sub, "--chunks", args->chunks, 1, INT32_MAX, "Score at most K chunks (default: all the text holds)",
                   "K");
  sub->add_flag("--json", args->json,
                "Print one JSON object (ppl, ppl_error, chunk_ppl, tokens, seconds, ...) instead of the lines");
  sub->add_flag("-v,--verbose", args->llm.verbose, "Also print the device, the model, the KV cache and the load time");
  add_cache_type_options(*sub, args->llm);
  return {sub, [&globals, args]() { return perplexity_command(*args, globals); }};
}

}  // namespace vkformer::cli
