// Perplexity as llama-perplexity measures it (include/vkformer/perplexity.hpp states the method;
// llama.cpp's tools/perplexity/perplexity.cpp, perplexity()). The log-softmax runs on the host in
// double: the logits come back to the host anyway (append_all_logits), a row of the vocabulary is
// a fraction of a millisecond against the pass that made it, and double sums keep the result
// independent of the order of 262,144 terms (Gemma 3's vocabulary).
#include "vkformer/perplexity.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>

#include "vkformer/error.hpp"
#include "vkformer/gguf_tokenizer.hpp"
#include "vkformer/llm.hpp"

namespace vkformer {

namespace {

// llama-perplexity takes any context; below this a chunk's scored half is a handful of tokens.
constexpr int64_t kMinContext = 16;

[[noreturn]] void invalid(const std::string& message) {
  throw Error(ErrorCode::invalid_argument, "perplexity: " + message);
}

// -log softmax(row)[next]: the row's maximum subtracted before exp, so no logit overflows.
double negative_log_likelihood(const float* row, int64_t vocab, int32_t next) {
  double max = row[0];
  for (int64_t i = 1; i < vocab; ++i) max = std::max(max, static_cast<double>(row[i]));
  double sum = 0;
  for (int64_t i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(row[i]) - max);
  return std::log(sum) + max - static_cast<double>(row[next]);
}

// Sums of nll and nll² over the tokens scored so far, and llama-perplexity's estimate from them.
struct Running {
  double nll = 0, nll2 = 0;
  int64_t n = 0;

  void add(double v) {
    nll += v;
    nll2 += v * v;
    ++n;
  }
  double mean() const { return nll / static_cast<double>(n); }
  double ppl() const { return std::exp(mean()); }
  // sqrt(var / (n - 1)), var = E[nll²] - E[nll]²; 0 where rounding makes var <= 0 (all equal).
  double mean_error() const {
    const double var = nll2 / static_cast<double>(n) - mean() * mean();
    return var > 0 && n > 1 ? std::sqrt(var / static_cast<double>(n - 1)) : 0.0;
  }
};

}  // namespace

std::vector<int32_t> perplexity_tokens(const LanguageModel& lm, std::string_view text) {
  if (!text.empty() && text.back() == '\n') text.remove_suffix(1);
  return lm.tokenizer().encode(text, /*add_special=*/true, /*parse_special=*/false);
}

PerplexityResult perplexity(LanguageModel& lm, std::span<const int32_t> tokens, const PerplexityOptions& options,
                            const PerplexityCallback& callback) {
  const GgufTokenizer& tok = lm.tokenizer();
  const int64_t n_ctx = options.context == 0 ? lm.context() : options.context;
  if (n_ctx < kMinContext || n_ctx > lm.context())
    invalid("context " + std::to_string(n_ctx) + " is outside " + std::to_string(kMinContext) + ".." +
            std::to_string(lm.context()) + " (the model's KV cache holds " + std::to_string(lm.context()) + ")");
  if (options.chunks < 0) invalid("chunks is " + std::to_string(options.chunks) + ", expected >= 0 (0: all)");
  if (tok.add_eos())
    invalid("the vocabulary appends EOS to every text (tokenizer.ggml.add_eos_token); llama-perplexity refuses "
            "such a model too");
  const int64_t n_tokens = static_cast<int64_t>(tokens.size());
  if (n_tokens < perplexity_min_tokens(n_ctx))
    invalid("the text has " + std::to_string(n_tokens) + " tokens; a context of " + std::to_string(n_ctx) +
            " needs at least " + std::to_string(perplexity_min_tokens(n_ctx)) + " (two chunks)");

  const int64_t vocab = lm.config().vocab_size;
  const bool bos_first = tok.add_bos() && tok.bos_id() >= 0;
  const int64_t first = n_ctx / 2;  // the first scored position's logits predict token first + 1
  const int64_t pass = lm.prompt_chunk();

  PerplexityResult r;
  r.text_tokens = n_tokens;
  r.context = n_ctx;
  const int64_t all_chunks = n_tokens / n_ctx;
  const int64_t chunks = options.chunks > 0 ? std::min(options.chunks, all_chunks) : all_chunks;

  PerplexityProgress p;
  p.chunks = chunks;
  p.tokens_total = chunks * (n_ctx - 1);  // the last token of a chunk is not run
  Running run, whole;  // every scored token; those of the chunks done
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<int32_t> chunk;
  for (int64_t c = 0; c < chunks && !r.stopped; ++c) {
    chunk.assign(tokens.begin() + c * n_ctx, tokens.begin() + (c + 1) * n_ctx);
    if (bos_first) chunk[0] = tok.bos_id();
    lm.reset();
    p.chunk = c;
    p.chunk_done = false;
    lm.append(std::span<const int32_t>(chunk).first(static_cast<size_t>(first)));
    p.tokens_done += first;
    for (int64_t at = first; at < n_ctx - 1 && !r.stopped;) {
      const int64_t n = std::min(pass, n_ctx - 1 - at);
      const std::vector<float> logits =
          lm.append_all_logits(std::span<const int32_t>(chunk).subspan(static_cast<size_t>(at), static_cast<size_t>(n)));
      for (int64_t i = 0; i < n; ++i)
        run.add(negative_log_likelihood(logits.data() + i * vocab, vocab, chunk[static_cast<size_t>(at + i + 1)]));
      at += n;
      p.tokens_done += n;
      p.chunk_done = at == n_ctx - 1;
      if (p.chunk_done) {
        whole = run;
        r.chunk_ppl.push_back(run.ppl());
        r.chunk_ppl_error.push_back(run.ppl() * run.mean_error());
        p.ppl = r.chunk_ppl.back();
        p.ppl_error = r.chunk_ppl_error.back();
      }
      if (callback && !callback(p)) r.stopped = !(p.chunk_done && c + 1 == chunks);
    }
  }
  lm.reset();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.chunks = static_cast<int64_t>(r.chunk_ppl.size());
  r.scored_tokens = r.chunks * (n_ctx - first - 1);
  if (r.chunks > 0) {
    r.mean_nll = whole.mean();
    r.nll_error = whole.mean_error();
    r.ppl = r.chunk_ppl.back();
    r.ppl_error = r.chunk_ppl_error.back();
  }
  return r;
}

PerplexityResult perplexity(LanguageModel& lm, std::string_view text, const PerplexityOptions& options,
                            const PerplexityCallback& callback) {
  const std::vector<int32_t> tokens = perplexity_tokens(lm, text);
  return perplexity(lm, tokens, options, callback);
}

}  // namespace vkformer
