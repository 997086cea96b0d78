#pragma once
// Decoder-only language models from GGUF files (llama.cpp's format): the llama architecture
// (Llama 3, SmolLM2, TinyLlama, ... with a byte-level BPE or SentencePiece vocabulary) with its weights kept on the device in their stored types
// (F32, F16, BF16 and the quantized types of vkformer/quant_types.def: Q4_K_M and Q6_K files too), a KV cache, and two graphs recorded once and replayed:
// one that runs a chunk of prompt tokens in one batched pass and one for a single decoded token.
//
//   auto device = vkformer::Device::open();
//   auto lm = vkformer::LanguageModel::load(device, "SmolLM2-135M-Instruct.Q4_1.gguf");
//   std::vector<int32_t> ids = lm.tokenizer().encode("<|im_start|>user\nHi<|im_end|>\n");
//   std::vector<float> logits = lm.append(ids);  // the next token's logits [vocab]
//
// Errors are vkformer::Error naming the file, key or tensor (format) or the argument
// (invalid_argument). One LanguageModel is used by one thread at a time.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "vkformer/device.hpp"
#include "vkformer/dtype.hpp"
#include "vkformer/executor.hpp"

namespace vkformer {

class BpeTokenizer;

// Hyper-parameters of a llama-architecture model, from the GGUF's "<arch>.*" keys.
struct LlamaConfig {
  std::string architecture;  // general.architecture: "llama"
  int64_t n_layers = 0;      // <arch>.block_count
  int64_t d_model = 0;       // <arch>.embedding_length
  int64_t n_heads = 0;       // <arch>.attention.head_count
  int64_t n_kv_heads = 0;    // <arch>.attention.head_count_kv (default n_heads)
  int64_t head_dim = 0;      // d_model / n_heads (or <arch>.attention.key_length)
  int64_t d_ff = 0;          // <arch>.feed_forward_length
  int64_t vocab_size = 0;    // rows of token_embd.weight
  int64_t context_length = 0;  // <arch>.context_length
  double rms_eps = 1e-5;     // <arch>.attention.layer_norm_rms_epsilon
  double rope_base = 10000.0;  // <arch>.rope.freq_base
  int64_t rope_dims = 0;     // <arch>.rope.dimension_count (default head_dim)
  enum class RopeStyle : uint8_t { interleaved, neox } rope_style = RopeStyle::interleaved;
  bool tied_output = false;  // no output.weight: the token embedding is the output projection
};

struct LanguageModelOptions {
  DType activations = DType::f32;  // f16: activations and the KV cache stored in f16
  int64_t context = 0;             // KV cache length; 0: the model's context_length capped at 4096
};

class LanguageModelImpl;

class LanguageModel {
 public:
  static LanguageModel load(Device& device, const std::filesystem::path& gguf,
                            const LanguageModelOptions& options = {});
  ~LanguageModel();
  LanguageModel(LanguageModel&&) noexcept;
  LanguageModel& operator=(LanguageModel&&) noexcept;

  const LlamaConfig& config() const;
  const BpeTokenizer& tokenizer() const;
  int64_t context() const;   // tokens the KV cache holds
  int64_t position() const;  // tokens in the cache now: where the next append starts

  // Runs `tokens` at positions [position(), position() + n) in batched passes, keeps their K/V
  // and returns the last token's logits [vocab]. More tokens than context() - position() is
  // invalid_argument naming both numbers; so is an empty list or an id outside the vocabulary.
  std::vector<float> append(std::span<const int32_t> tokens);
  // The same, returning every token's logits [n × vocab] (row i: the prediction after token i).
  std::vector<float> append_all_logits(std::span<const int32_t> tokens);
  void reset();               // position() = 0
  void truncate(int64_t n);   // forget all but the first n tokens (0 <= n <= position())

  // What one decoded token's pass executes (its graph is recorded once and replayed per token):
  // dispatches, barriers, pipeline binds and weight bytes read, counted from the recording.
  ExecutorStats decode_step_stats() const;
  // The same for one batched pass over a chunk of prompt tokens (prompt_chunk() of them, padding
  // included).
  ExecutorStats prompt_chunk_stats() const;
  int64_t prompt_chunk() const;

 private:
  explicit LanguageModel(std::unique_ptr<LanguageModelImpl> impl);
  LanguageModelImpl& impl() const;  // throws on a moved-from LanguageModel
  std::unique_ptr<LanguageModelImpl> impl_;
};

}  // namespace vkformer
