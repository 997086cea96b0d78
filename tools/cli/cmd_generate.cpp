// `vkformer generate`: greedy or beam-search decoding of one source sentence with a seq2seq
// model (Model::generate). The generated ids go to stdout, space-separated on one line, so a
// script can read them; times go to stderr.
// With a GGUF language model (--model FILE.gguf) it generates text from --prompt instead
// (cmd_generate_llm.cpp).
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "cli.hpp"
#include "cli_options.hpp"
#include "llm_cli.hpp"
#include "model_cli.hpp"
#include "model_kind.hpp"
#include "vkformer/error.hpp"

namespace vkformer::cli {

// What `vkformer generate --help` says first.
constexpr const char* kGenerateHelp =
    "Translate one source sentence with a seq2seq model: greedy or beam search with a KV cache. "
    "Prints the generated token ids (after bos; the last one is eos if it was produced) on one "
    "line, separated by spaces, and the time per decoder step (one token position, for every beam at once) on stderr. "
    "With a GGUF language model (--model FILE.gguf): streams the text generated after --prompt to "
    "stdout and the prompt and generation tokens/s to stderr.";

namespace {

struct GenerateArgs {
  ModelArgs model;
  std::string src;
  GenerateOptions options;
  bool verbose = false;
  // A GGUF language model (cmd_generate_llm.cpp).
  LlmArgs llm;
  std::string prompt;
  bool chat = false;
};

[[noreturn]] void bad(const std::string& what) { usage_error(what); }

// "5,17,3,9" or "5 17 3 9" (or both) -> ids.
std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  const char* p = text.data();
  const char* end = p + text.size();
  auto is_space = [](char ch) { return ch == ' ' || ch == '\t' || ch == '\n'; };
  while (p < end) {
    while (p < end && is_space(*p)) ++p;
    if (p == end) break;
    const char* start = p;
    while (p < end && *p != ',' && !is_space(*p)) ++p;
    std::string token(start, p);
    int64_t v = 0;
    auto [stop, ec] = std::from_chars(token.data(), token.data() + token.size(), v);
    if (token.empty() || ec != std::errc() || stop != token.data() + token.size() || v < INT32_MIN ||
        v > INT32_MAX)
      bad("--src: '" + token + "' is not a token id (expected integers separated by commas, "
          "e.g. --src 5,17,3,9)");
    ids.push_back(static_cast<int32_t>(v));
    while (p < end && is_space(*p)) ++p;
    if (p < end && *p == ',') {
      ++p;
      while (p < end && is_space(*p)) ++p;
      if (p == end || *p == ',') bad("--src: an empty id in '" + text + "'");
    }
  }
  if (ids.empty()) bad("--src is empty: give the source token ids, e.g. --src 5,17,3,9");
  return ids;
}

// The checks Model::generate makes too, but naming the options.
void check(const GenerateArgs& a, const std::vector<int32_t>& src, const ModelConfig& c) {
  if (c.arch != ModelConfig::Arch::seq2seq)
    bad("generate needs a seq2seq model; " + a.model.dir + " is " +
        (c.arch == ModelConfig::Arch::encoder ? "an " : "a ") + ModelConfig::arch_name(c.arch) +
        " (use 'vkformer run')");
  for (size_t i = 0; i < src.size(); ++i)
    if (src[i] < 0 || src[i] >= c.src_vocab)
      bad("--src: token " + std::to_string(src[i]) + " at position " + std::to_string(i) +
          " is outside the source vocabulary [0, " + std::to_string(c.src_vocab) + ")");
  if (static_cast<int64_t>(src.size()) > c.max_len)
    bad("--src has " + std::to_string(src.size()) + " tokens, more than the model's max_len " +
        std::to_string(c.max_len));
  const GenerateOptions& o = a.options;
  const std::string vocab = "the target vocabulary [0, " + std::to_string(c.tgt_vocab) + ")";
  if (o.max_new_tokens < 1 || o.max_new_tokens > c.max_len)
    bad("--max-len is " + std::to_string(o.max_new_tokens) + ", expected 1.." +
        std::to_string(c.max_len) + " (the model's max_len)");
  if (o.beam < 1 || o.beam > 64) bad("--beam is " + std::to_string(o.beam) + ", expected 1..64");
  if (o.bos < 0 || o.bos >= c.tgt_vocab)
    bad("--bos " + std::to_string(o.bos) + " is outside " + vocab);
  if (o.eos != -1 && (o.eos < 0 || o.eos >= c.tgt_vocab))
    bad("--eos " + std::to_string(o.eos) + " is outside " + vocab + " (-1: no end token)");
}

// Options of the other kind of model are errors naming the first one given, not ignored (--beam
// and --dtype once were, with a GGUF model).
void refuse_given(const CLI::App& sub, std::initializer_list<const char*> names, const std::string& why) {
  for (const char* name : names)
    if (sub.get_option(name)->count() > 0) bad(std::string(name) + " " + why);
}



int generate_command(const CLI::App& sub, GenerateArgs& args, const GlobalOptions& globals) {
  // What --model is decides which generate this is (or which command the user wanted).
  const ModelKind kind = model_kind(args.model.dir);
  require_model_kind("generate", args.model.dir, kind);
  check_utf8(args.prompt, "--prompt", true);
  if (kind == ModelKind::gguf)
    return run_llm_command([&] {
      refuse_given(sub, {"--beam", "--max-len", "--bos", "--eos", "--length-penalty", "--dtype"},
                   "applies to seq2seq model directories, not to the GGUF language model " + args.model.dir +
                       " (its options: --prompt, --chat, -n, --ctx and the sampling options)");
      args.llm.verbose = args.verbose;
      return generate_llm(args.model.dir, args.prompt, args.chat, args.src, args.llm, globals);
    });
  refuse_given(sub, {"--ctx", "--max-tokens", "--temperature", "--top-k", "--top-p", "--min-p", "--repeat-penalty",
                     "--repeat-last-n", "--seed"},
               "applies to GGUF language models; " + args.model.dir + " is a model directory (seq2seq: "
               "--src, --beam, --max-len, --bos, --eos, --length-penalty)");
  // The config first: a directory that is no model is named as such, not asked for --src.
  const ModelConfig config = args.model.config();
  if (!args.prompt.empty() || args.chat)
    bad("--prompt and --chat are for GGUF language models; " + args.model.dir +
        " is a model directory, and a seq2seq model translates token ids: give --src IDS, e.g. --src 5,17,3,9");
  if (args.src.empty()) bad("--src IDS is required with a seq2seq model directory, e.g. --src 5,17,3,9");
  std::vector<int32_t> src = parse_ids(args.src);
  check(args, src, config);

  Device device = Device::open(globals.device_options());
  auto t_load = Clock::now();
  Model model = Model::load(device, args.model.dir, args.model.options());
  const double load_ms = ms_since(t_load);
  auto t_gen = Clock::now();
  std::vector<int32_t> ids = model.generate(src, args.options);
  const double total_ms = ms_since(t_gen);
  const GenerationStats stats = model.last_generation_stats();

  std::string line;
  for (size_t i = 0; i < ids.size(); ++i) line += (i ? " " : "") + std::to_string(ids[i]);
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);

  const GenerateOptions& o = args.options;
  if (args.verbose) {
    const DeviceInfo& d = device.info();
    std::fprintf(stderr, "device      %u: %s\n", d.index, d.name.c_str());
    std::fprintf(stderr, "model       %s: %s; %s on the device\n", args.model.dir.c_str(),
                 describe(config).c_str(), std::string(dtype_name(model.dtype())).c_str());
    std::string search = o.beam == 1 ? std::string("greedy") : "beam " + std::to_string(o.beam);
    if (o.beam > 1) {
      char alpha[32];
      std::snprintf(alpha, sizeof alpha, "%g", o.length_penalty);
      search += ", length penalty " + std::string(alpha);
    }
    search += ", at most " + std::to_string(o.max_new_tokens) + " tokens, bos " +
              std::to_string(o.bos) + ", eos " + (o.eos < 0 ? "none" : std::to_string(o.eos));
    std::fprintf(stderr, "search      %s\n", search.c_str());
    std::fprintf(stderr, "load        %s (config, weights to the device)\n", format_ms(load_ms).c_str());
    std::fprintf(stderr, "compile     %s (graphs compiled and recorded for this source length)\n",
                 format_ms(total_ms - stats.encode_ms - stats.decode_ms).c_str());
  }
  // A step decodes one token position (for every live beam at once with --beam).
  std::fprintf(stderr, "vkformer generate: %zu tokens; encoder %s; decoder %s for %zu step%s, %s per decoder step\n",
               ids.size(), format_ms(stats.encode_ms).c_str(), format_ms(stats.decode_ms).c_str(),
               stats.steps, stats.steps == 1 ? "" : "s", format_ms(stats.ms_per_token()).c_str());
  return report_validation(device) ? 1 : 0;
}

}  // namespace

Command add_generate_command(CLI::App& app, const GlobalOptions& globals) {
  auto* sub = app.add_subcommand("generate", kGenerateHelp);
  auto args = std::make_shared<GenerateArgs>();
  add_model_options(*sub, args->model);
  sub->get_option("--model")
      ->description("A GGUF language model file (with --prompt) or a seq2seq model directory: config.json "
                    "and model.safetensors (with --src)")
      ->type_name("FILE.gguf|DIR");
  sub->add_option("--src", args->src,
                  "Source token ids, separated by commas (or spaces, quoted), e.g. 5,17,3,9 "
                  "(seq2seq models: required)")
      ->type_name("IDS");
  sub->add_option("-p,--prompt", args->prompt, "GGUF language models: the text to continue")->type_name("TEXT");
  sub->add_flag("--chat", args->chat,
                "GGUF language models: --prompt is a user message, formatted with the model's chat "
                "template (tokenizer.chat_template), and the reply is generated");
  add_llm_options(*sub, args->llm);
  add_speculative_options(*sub, args->llm);
  add_chat_template_option(*sub, args->llm);
  add_whole_number(*sub, "--beam", args->options.beam, 1, 64, "Beam width, 1..64; 1 = greedy (default: 1)", "K");
  add_whole_number(*sub, "--max-len", args->options.max_new_tokens, 1, INT32_MAX,
                   "Most tokens to generate after bos, eos included; at most the model's max_len "
                   "(default: 32)");
  add_whole_number(*sub, "--bos", args->options.bos, 0, INT32_MAX, "Start token id fed first (default: 1)", "ID");
  add_whole_number(*sub, "--eos", args->options.eos, -1, INT32_MAX,
                   "End token id: a hypothesis ends when it produces it; -1 = none, always "
                   "generate --max-len tokens (default: 2)",
                   "ID");
  sub->add_option("--length-penalty", args->options.length_penalty,
                  "Beam search: finished hypotheses are ranked by log-probability / ((5 + "
                  "length) / 6)^A (default: 0.6)")
      ->type_name("A");
  sub->add_flag("-v,--verbose", args->verbose,
                "Also print the device, the model and the load and compile times to stderr (and, for "
                "seq2seq models, the search settings)");
  return {sub, [&globals, args, sub]() { return generate_command(*sub, *args, globals); }};
}

}  // namespace vkformer::cli
