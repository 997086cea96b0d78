#pragma once
// Perplexity of a LanguageModel on a text, measured as llama.cpp's llama-perplexity measures it,
// so both give the same number for the same model, text and context:
//   1. the whole text is tokenized once, with BOS where the file asks (add_bos_token) and special
//      tokens' text read as text (llama-perplexity: common_tokenize(text, add_special = true,
//      parse_special = false)); one trailing newline is dropped first, as its -f does;
//   2. it is cut into chunks of `context` tokens, floor(tokens / context) of them (the rest is
//      not used); at least two chunks' worth of tokens are needed;
//   3. each chunk runs from an empty KV cache, its first token replaced by BOS (where the file
//      adds BOS), and only its second half is scored: the logits at positions
//      context/2 .. context-2 predict tokens context/2+1 .. context-1, so every scored token has
//      at least context/2 tokens before it;
//   4. nll = -log softmax(logits)[next token], in double on the host; PPL = exp(mean nll), and
//      its error ± PPL · sqrt(var(nll) / (n - 1)), var over the n tokens scored so far, after
//      every chunk and at the end (llama-perplexity's "Final estimate: PPL = ... +/- ...").
//
//   auto lm = vkformer::LanguageModel::load(device, "model.gguf", {.context = 512});
//   auto r = vkformer::perplexity(lm, text);  // r.ppl, r.ppl_error, r.chunk_ppl
//
// The first half of a chunk only fills the KV cache (LanguageModel::append: one token's logits),
// the second half runs in passes of prompt_chunk() tokens (append_all_logits), each pass's
// [tokens × vocab] logits scored and dropped before the next: the host holds one pass's logits,
// never a chunk's (SmolLM2: 64 × 49152 floats, 12.6 MB). The chunk's last token is not run: no
// token of the chunk follows it.
//
// Errors are vkformer::Error(invalid_argument): a context below 16 or beyond the model's,
// fewer than 2 · context tokens, a vocabulary that appends EOS (llama-perplexity refuses it too).
#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

namespace vkformer {

class LanguageModel;

struct PerplexityOptions {
  int64_t context = 0;  // tokens per chunk (llama-perplexity's -c): 16..lm.context(); 0: lm.context()
  int64_t chunks = 0;   // chunks to score at most (its --chunks); 0: all the text holds
};

// What the callback sees after each pass over a chunk's tokens.
struct PerplexityProgress {
  int64_t chunk = 0;         // the chunk being scored, from 0
  int64_t chunks = 0;        // how many will be scored
  int64_t tokens_done = 0;   // tokens run through the model so far, all chunks
  int64_t tokens_total = 0;  // tokens all chunks run
  bool chunk_done = false;   // this pass ended the chunk: ppl and ppl_error are the running estimate
  double ppl = 0, ppl_error = 0;
};

struct PerplexityResult {
  double ppl = 0;           // exp(mean nll)
  double ppl_error = 0;     // ppl · nll_error
  double mean_nll = 0;      // mean negative log-likelihood (nats per token)
  double nll_error = 0;     // its standard error, sqrt(var / (n - 1))
  int64_t text_tokens = 0;  // tokens of the whole text (BOS included)
  int64_t context = 0;      // tokens per chunk
  int64_t chunks = 0;       // chunks scored (fewer than asked when the callback stopped)
  int64_t scored_tokens = 0;  // chunks · (context - context/2 - 1)
  std::vector<double> chunk_ppl;        // the running estimate after each chunk
  std::vector<double> chunk_ppl_error;  // and its error
  double seconds = 0;       // time in the model and the scoring, tokenization not included
  bool stopped = false;     // the callback returned false before the last chunk
};

// Called after every pass; returning false stops after it (the result covers the chunks done).
using PerplexityCallback = std::function<bool(const PerplexityProgress&)>;

// The text's tokens as llama-perplexity makes them (step 1).
std::vector<int32_t> perplexity_tokens(const LanguageModel& lm, std::string_view text);

// Tokens needed for a context: two chunks (llama-perplexity's rule).
inline int64_t perplexity_min_tokens(int64_t context) { return 2 * context; }

// Steps 2-4 on tokens made by perplexity_tokens. Uses lm's KV cache: lm.position() is 0 after.
PerplexityResult perplexity(LanguageModel& lm, std::span<const int32_t> tokens, const PerplexityOptions& options = {},
                            const PerplexityCallback& callback = {});
// All four steps.
PerplexityResult perplexity(LanguageModel& lm, std::string_view text, const PerplexityOptions& options = {},
                            const PerplexityCallback& callback = {});

}  // namespace vkformer
