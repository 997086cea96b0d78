// `vkformer embed`: sentence embeddings from a BERT-family model directory (sentence-transformers'
// layout or plain Hugging Face), for texts from the command line and/or a file; written as .npy,
// printed as JSON, or ranked by cosine similarity to a query (semantic search).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <span>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <vector>

#include "cli.hpp"
#include "cli_options.hpp"
#include "io_util.hpp"
#include "model_kind.hpp"
#include "progress.hpp"
#include "vkformer/embedder.hpp"
#include "vkformer/error.hpp"
#include "vkformer/io.hpp"

namespace vkformer::cli {

// What `vkformer embed --help` says first.
constexpr const char* kEmbedHelp =
    "Sentence embeddings with a BERT-family model (e.g. all-MiniLM-L6-v2, from "
    "scripts/fetch_minilm.sh). Prints one JSON array per text, or writes [N, D] float32 to "
    "--output; with --query, prints the texts ranked by cosine similarity to the query.";

// Texts (cli_options.hpp): the positional arguments, then --file's lines (UTF-8, one text per line,
// "\r\n" ends accepted). Shared with `vkformer tokenize` (cmd_tokenize.cpp). Text that is not UTF-8 is refused
// here, naming the argument or the line, before any model is loaded.
std::vector<std::string> read_texts(const std::vector<std::string>& args, const std::string& file) {
  std::vector<std::string> texts = args;
  for (size_t i = 0; i < args.size(); ++i) check_utf8(args[i], "text " + std::to_string(i + 1), true);
  if (!file.empty()) {
    io::check_regular_file(file);
    std::ifstream in(file, std::ios::binary);
    if (!in) throw Error(ErrorCode::io, "--file " + file + ": cannot be opened");
    size_t number = 0;
    for (std::string line; std::getline(in, line);) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      check_utf8(line, "line " + std::to_string(++number) + " of --file " + file, false);
      texts.push_back(std::move(line));
    }
    if (in.bad()) throw Error(ErrorCode::io, "--file " + file + ": cannot be read");
  }
  if (texts.empty())
    usage_error("no texts: give them as arguments or with --file");
  return texts;
}

namespace {

struct EmbedArgs {
  std::string model, file, output, query, dtype = "f32";
  std::vector<std::string> texts;
  bool json = false;
  int top = 0;
};

double cosine(const float* a, const float* b, int64_t d) {
  double dot = 0, aa = 0, bb = 0;
  for (int64_t i = 0; i < d; ++i) dot += double(a[i]) * b[i], aa += double(a[i]) * a[i], bb += double(b[i]) * b[i];
  return aa > 0 && bb > 0 ? dot / std::sqrt(aa * bb) : 0.0;
}

// Embeds in slices so long lists show progress; padding and batching never change a result
// (tests/bert_test.cpp), so the slices give what one call would.
HostTensor embed_with_progress(SentenceEmbedder& model, const std::vector<std::string>& texts) {
  constexpr size_t kSlice = 64;
  if (texts.size() <= kSlice) return model.embed(texts);
  HostTensor all({static_cast<int64_t>(texts.size()), model.dimension()}, DType::f32);
  Progress progress("vkformer embed: texts", static_cast<int64_t>(texts.size()));
  for (size_t start = 0; start < texts.size(); start += kSlice) {
    const size_t n = std::min(kSlice, texts.size() - start);
    const HostTensor part = model.embed(std::span(texts).subspan(start, n));
    std::memcpy(all.data() + start * model.dimension() * sizeof(float), part.data(), part.nbytes());
    progress.advance(static_cast<int64_t>(n));
  }
  progress.done();
  return all;
}

int embed_command(const EmbedArgs& args, const GlobalOptions& globals) {
  require_model_kind("embed", args.model, model_kind(args.model));
  check_utf8(args.query, "--query", true);
  if (!args.output.empty()) io::check_output_path(args.output, "--output");
  std::vector<std::string> texts = read_texts(args.texts, args.file);
  Device device = Device::open(globals.device_options());
  auto t0 = std::chrono::steady_clock::now();
  SentenceEmbedder model = [&] {
    try {
      return SentenceEmbedder::load(device, args.model, {.dtype = args.dtype == "f16" ? DType::f16 : DType::f32});
    } catch (const Error& e) {
      // Which step failed: the device's errors (out of memory, lost) name only the Vulkan call.
      const std::string m = e.what();
      throw Error(e.code(), m.starts_with(args.model) ? "--model " + m : "--model " + args.model + ": " + m);
    }
  }();
  auto t1 = std::chrono::steady_clock::now();
  std::vector<std::string> all = texts;
  if (!args.query.empty()) all.push_back(args.query);
  HostTensor e = embed_with_progress(model, all);
  auto t2 = std::chrono::steady_clock::now();
  const int64_t d = model.dimension();
  const auto values = e.to_f32();
  const size_t n = texts.size();
  std::fprintf(stderr, "%zu text(s), %lld dimensions, %s pooling%s: load %.0f ms, embed %.0f ms\n",
               all.size(), static_cast<long long>(d),
               model.pooling() == PoolMode::mean ? "mean" : model.pooling() == PoolMode::cls ? "cls" : "max",
               model.normalizes() ? ", normalized" : "",
               std::chrono::duration<double, std::milli>(t1 - t0).count(),
               std::chrono::duration<double, std::milli>(t2 - t1).count());
  if (!args.output.empty()) {
    HostTensor rows({static_cast<int64_t>(n), d}, DType::f32);
    std::memcpy(rows.data(), e.data(), rows.nbytes());
    write_npy(args.output, rows);
  }
  if (!args.query.empty()) {
    std::vector<double> score(n);
    for (size_t i = 0; i < n; ++i) score[i] = cosine(&values[i * d], &values[n * d], d);
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return score[a] > score[b]; });
    const size_t shown = args.top > 0 ? std::min<size_t>(args.top, n) : n;
    if (args.json) {
      nlohmann::json out = nlohmann::json::array();
      for (size_t r = 0; r < shown; ++r)
        out.push_back({{"index", order[r]}, {"score", score[order[r]]}, {"text", texts[order[r]]}});
      std::cout << out.dump() << "\n";
    } else {
      for (size_t r = 0; r < shown; ++r) std::printf("%.4f  %s\n", score[order[r]], texts[order[r]].c_str());
    }
  } else if (args.json || args.output.empty()) {
    // One JSON array of numbers per text, one line each.
    for (size_t i = 0; i < n; ++i) {
      nlohmann::json row(std::vector<float>(values.begin() + i * d, values.begin() + (i + 1) * d));
      std::cout << row.dump() << "\n";
    }
  }
  return report_validation(device) ? 1 : 0;
}

}  // namespace

Command add_embed_command(CLI::App& app, const GlobalOptions& globals) {
  auto* sub = app.add_subcommand("embed", kEmbedHelp);
  auto args = std::make_shared<EmbedArgs>();
  add_model_dir_option(*sub, args->model,
                       "Model directory: sentence-transformers' layout (modules.json, 1_Pooling, ...) "
                       "or a Hugging Face BERT directory (config.json, model.safetensors, tokenizer)");
  add_text_inputs(*sub, args->texts, args->file, "embed");
  sub->add_option("--output", args->output, "Write the embeddings [N, D] float32 here (.npy)")
      ->type_name("E.npy");
  sub->add_flag("--json", args->json,
                "Print JSON even with --output (with --query: one array of {index, score, text})");
  sub->add_option("--query", args->query, "Rank the texts by cosine similarity to this text")
      ->type_name("Q")
      // An empty query (--query "$UNSET") was silently no query at all.
      ->check(CLI::Validator(
          [](std::string& q) -> std::string {
            return q.empty() ? "the query is empty: give the text to rank the others by" : "";
          },
          ""));
  add_whole_number(*sub, "--top", args->top, 1, int64_t{1} << 30, "With --query: print only the best K (default: all)", "K");
  sub->add_option("--dtype", args->dtype, "Weights and activations: f32 or f16 (default: f32)")
      ->check(CLI::IsMember({"f32", "f16"}));
  return {sub, [&globals, args]() { return embed_command(*args, globals); }};
}

}  // namespace vkformer::cli
