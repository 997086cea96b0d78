#pragma once
// Sentence embeddings from a Hugging Face BERT-family model, as sentence-transformers computes
// them: text -> WordPiece tokens -> BERT encoder -> pooling -> (L2 normalization), all but the
// tokenizer on the Vulkan device.
//
//   auto device = vkformer::Device::open();
//   auto model = vkformer::SentenceEmbedder::load(device, "all-MiniLM-L6-v2/");
//   std::vector<std::string> texts = {"A man is eating food.", "A man is riding a horse."};
//   vkformer::HostTensor e = model.embed(texts);  // [2, 384] f32
//
// The directory is what sentence-transformers saves (modules.json, 1_Pooling/config.json,
// sentence_bert_config.json, config.json, model.safetensors, tokenizer.json or vocab.txt), or a
// plain Hugging Face BERT directory (then: mean pooling, no normalization, as
// sentence-transformers does for one).
//
// Inputs of any lengths run without compiling per length: a batch is sorted by length, split into
// runs of at most max_batch sequences, and each run is padded up to a bucket (lengths 8, 16, 32,
// 64, then multiples of 64 up to max_seq_length; batch sizes powers of two). One executor is
// compiled per bucket the first time it is needed and replayed afterwards; padding never changes
// a result.
//
// Errors are vkformer::Error naming the file, key, tensor or argument. One SentenceEmbedder is
// used by one thread at a time (another thread's call throws invalid_argument instead of racing).
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "vkformer/device.hpp"
#include "vkformer/graph.hpp"
#include "vkformer/host_tensor.hpp"
#include "vkformer/tokenizer.hpp"

namespace vkformer {

struct EmbedderOptions {
  DType dtype = DType::f32;  // f16: weights and activations stored in f16, math in f32
  int64_t max_batch = 32;    // sequences per device run; longer lists run in several
  AttentionOptions::Path attention = AttentionOptions::Path::automatic;
};

class SentenceEmbedderImpl;

class SentenceEmbedder {
 public:
  static SentenceEmbedder load(Device device, const std::filesystem::path& dir,
                               const EmbedderOptions& options = {});
  ~SentenceEmbedder();
  SentenceEmbedder(SentenceEmbedder&&) noexcept;
  SentenceEmbedder& operator=(SentenceEmbedder&&) noexcept;

  // [N, dimension()] f32, one row per text, in order. Texts longer than max_seq_length() tokens
  // are truncated, as sentence-transformers does. An empty list or text that is not UTF-8 is
  // invalid_argument.
  HostTensor embed(std::span<const std::string> texts);
  HostTensor embed(const std::vector<std::string>& texts) { return embed(std::span(texts)); }

  // For callers with their own tokenizer: one list of ids per sequence, [CLS] ... [SEP] included,
  // each of 1 to max_seq_length() ids in [0, vocab size).
  HostTensor embed_ids(std::span<const std::vector<int32_t>> ids);
  HostTensor embed_ids(const std::vector<std::vector<int32_t>>& ids) { return embed_ids(std::span(ids)); }
  // A padded batch as Hugging Face passes one: input_ids and attention_mask i32 [N, S]
  // (attention_mask: 1 = token, 0 = padding, padding at the end of each row: a tokenizer's
  // padding_side "right"), token_type_ids i32 [N, S] or null for zeros. S may exceed
  // max_seq_length() as long as no row keeps more tokens than that.
  HostTensor embed_ids(const HostTensor& input_ids, const HostTensor& attention_mask,
                       const HostTensor* token_type_ids = nullptr);

  const WordPieceTokenizer& tokenizer() const;
  int64_t dimension() const;
  int64_t max_seq_length() const;
  PoolMode pooling() const;
  bool normalizes() const;
  DType dtype() const;
  // How many executors (one per shape bucket) have been compiled so far.
  size_t compiled_executors() const;
  Device& device() const;

 private:
  explicit SentenceEmbedder(std::unique_ptr<SentenceEmbedderImpl> impl);
  SentenceEmbedderImpl& impl() const;  // throws on a moved-from SentenceEmbedder
  std::unique_ptr<SentenceEmbedderImpl> impl_;
};

}  // namespace vkformer
