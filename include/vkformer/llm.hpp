#pragma once
// Decoder-only language models from GGUF files (llama.cpp's format): the llama (Llama 2/3, Mistral,
// SmolLM2, TinyLlama), qwen2, qwen3, gemma2, gemma3 and phi3 architectures (docs/models.md), with
// a byte-level BPE or SentencePiece vocabulary, with their weights kept on the device in their stored types
// (F32, F16, BF16 and the quantized types of vkformer/quant_types.def: Q4_K_M, Q5_K_M and Q6_K files too), a KV cache, and two graphs recorded once and replayed:
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
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "vkformer/chat.hpp"
#include "vkformer/device.hpp"
#include "vkformer/dtype.hpp"
#include "vkformer/executor.hpp"

namespace vkformer {

class GgufTokenizer;

// Hyper-parameters of a decoder-only model, from the GGUF's "<arch>.*" keys and the family its
// general.architecture names (src/models/llm/family_*.cpp: what sets each apart).
struct LanguageModelConfig {
  // general.architecture: llama (Llama 2/3, Mistral, SmolLM2, TinyLlama), qwen2, qwen3, gemma2,
  // gemma3 or phi3.
  std::string architecture;
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
  using RopeStyle = vkformer::RopeStyle;
  RopeStyle rope_style = RopeStyle::interleaved;  // the family's (llama: interleaved, others neox)
  double rope_freq_scale = 1.0;    // 1 / <arch>.rope.scaling.factor where rope.scaling.type is linear
  bool rope_freq_factors = false;  // a rope_freqs tensor divides the frequencies (Llama 3.1)
  // Sliding-window layers' RoPE base where it differs (Gemma 3: <arch>.rope.freq_base_swa, 10000
  // by default; without the linear scaling); 0: rope_base.
  double rope_base_sliding = 0.0;
  // <arch>.attention.sliding_window: a sliding layer's query at position p sees keys
  // [p - window + 1, p]; 0: none. Which layers slide is the family's (Gemma 2: even layers,
  // Gemma 3: all but every sixth, others: all) or <arch>.attention.sliding_window_pattern.
  int64_t sliding_window = 0;
  std::vector<bool> sliding_layers;  // per layer
  double attention_scale = 0.0;      // of q·k before the softmax; 0: 1/sqrt(head_dim)
  double attn_softcap = 0.0;   // <arch>.attn_logit_softcapping: scores c·tanh(s/c) (Gemma 2); 0: none
  double final_softcap = 0.0;  // <arch>.final_logit_softcapping: the same on the logits
  double embedding_scale = 1.0;  // token embeddings times it (Gemma: sqrt(d_model))
  Activation ffn_activation = Activation::silu;  // the gated FFN's: silu (SwiGLU), gelu_tanh (GeGLU)
  bool qkv_bias = false;    // attn_q/k/v.bias (Qwen2)
  bool qk_norm = false;     // per-head RMS norms of q and k before RoPE (Qwen3, Gemma 3)
  bool post_norms = false;  // RMS norms of the attention and FFN outputs before the residual (Gemma 2, 3)
  bool tied_output = false;  // no output.weight: the token embedding is the output projection
};

// The name before the model families: every field means what it did.
using LlamaConfig [[deprecated("use LanguageModelConfig")]] = LanguageModelConfig;

struct LanguageModelOptions {
  DType activations = DType::f32;  // f16: activations and the KV cache stored in f16
  int64_t context = 0;             // KV cache length; 0: the model's context_length capped at 4096
  // The KV cache's element types, K and V apart (llama.cpp's --cache-type-k/v): f32, f16, q8_0
  // or q4_0 (ggml's blocks of 32: 34 and 18 bytes, quantized as they are written; head dims that
  // are multiples of 32). Unset: the activations' type.
  std::optional<DType> cache_type_k, cache_type_v;
  // Quantized caches of head dims that are multiples of 64 store q, k and v rotated by an
  // orthonormal Hadamard matrix (llama.cpp's default since its PR 21038: the same scores, the
  // attention output rotated back, a channel of large keys spread over its block; q4_0 keys
  // lose far less). false: stored as they are.
  bool kv_rotation = true;
};

// "f32", "f16", "q8_0" or "q4_0" as a KV cache type; anything else is invalid_argument naming
// `option` (the flag or field that gave it) and the four names.
DType parse_kv_cache_type(std::string_view name, std::string_view option);

// What a model's KV caches take, from their allocations.
struct KvCacheInfo {
  DType type_k = DType::f32, type_v = DType::f32;
  int rotation_k = 0, rotation_v = 0;  // Hadamard blocks of the attention rotation (0: none)
  uint64_t bytes = 0;            // every cache, K and V (every sequence slot's)
  uint64_t bytes_per_token = 0;  // K and V of one token of one sequence over every layer
  // The longest context the device's memory would hold in these types beside what is loaded
  // now (the weights and other models), rounded down to a multiple of 256 where it is that
  // large; the caches' rows beyond the context (a prompt chunk's padding) counted.
  int64_t context_that_fits = 0;
};

// Greedy decoding's choice from a row of logits, made on the device (LanguageModel::append_greedy).
struct GreedyToken {
  int32_t token = -1;  // the largest logit's id (equal logits: the lowest id, as Sampler's greedy);
                       // -1 where every logit is NaN or -inf
  float logit = 0;     // its value
  // The first logit that is NaN or +-inf (-1: none) and its value, so that a caller refuses such
  // logits as it would with them in hand (generate() does).
  int32_t non_finite = -1;
  float non_finite_value = 0;
};

class LanguageModelImpl;

class LanguageModel {
 public:
  static LanguageModel load(Device& device, const std::filesystem::path& gguf,
                            const LanguageModelOptions& options = {});
  ~LanguageModel();
  LanguageModel(LanguageModel&&) noexcept;
  LanguageModel& operator=(LanguageModel&&) noexcept;

  const LanguageModelConfig& config() const;
  const GgufTokenizer& tokenizer() const;
  // The file's chat template (or why it has none) and formats by name with its BOS/EOS strings,
  // read when the model loaded: chat_templates().choose(name) is what a chat front door needs.
  const ModelChatTemplates& chat_templates() const;
  int64_t context() const;   // tokens the KV cache holds
  int64_t position() const;  // tokens in the cache now: where the next append starts
  KvCacheInfo kv_cache() const;  // its types and sizes

  // Runs `tokens` at positions [position(), position() + n) in batched passes, keeps their K/V
  // and returns the last token's logits [vocab]. More tokens than context() - position() is
  // invalid_argument naming both numbers; so is an empty list or an id outside the vocabulary.
  // A call that fails (out of memory, a lost device) leaves position() where it was.
  std::vector<float> append(std::span<const int32_t> tokens);
  // The same, with the last token's logits reduced on the device to greedy decoding's choice, so
  // that 16 bytes come back instead of the vocabulary's logits (Gemma 3: 1 MiB): the token
  // Sampler's greedy would choose from append()'s logits. Graphs of their own, compiled on the
  // first call.
  GreedyToken append_greedy(std::span<const int32_t> tokens);
  // The same, returning every token's logits [n × vocab] (row i: the prediction after token i).
  std::vector<float> append_all_logits(std::span<const int32_t> tokens);
  // Speculative decoding's verification step: runs `tokens` (the last accepted token and the
  // proposals after it, 1..kMaxVerifyTokens of them) at position() in ONE batched pass, keeps
  // their K/V and returns every token's logits [n × vocab] (row i: the prediction after token i),
  // as append_all_logits() does, from a graph of a few rows instead of a whole prompt chunk (one
  // token: the decode graph). Errors as append's, and more than kMaxVerifyTokens tokens.
  static constexpr int64_t kMaxVerifyTokens = 64;
  std::vector<float> verify(std::span<const int32_t> tokens);
  // The rows of the graph a verification of n tokens runs (padding included): 1 for one token,
  // n for 2..16, else the next of 32, 64 — what the pass costs where every row is computed.
  static int64_t verify_graph_rows(int64_t n);
  // Forgets the latest `count` tokens (0 <= count <= position()): the rejected proposals of a
  // verification. Decoding then goes on as if they had never been appended (their cache rows are
  // hidden by the key length and the masks, and overwritten by the next tokens).
  void rollback(int64_t count);
  void reset();               // position() = 0
  void truncate(int64_t n);   // forget all but the first n tokens (0 <= n <= position())
  // The context shift (llama.cpp's): forgets the tokens at [keep, keep + discard) and moves the
  // later ones down by `discard`, their keys turned to their new positions (each equals the key
  // the model would have stored there, to the cache type's rounding), so that a conversation
  // goes on without running the kept tokens again; position() -= discard. keep >= 0,
  // discard >= 1 and keep + discard <= position(), else invalid_argument naming them.
  void shift(int64_t keep, int64_t discard);

  // What one decoded token's pass executes (its graph is recorded once and replayed per token):
  // dispatches, barriers, pipeline binds and weight bytes read, counted from the recording.
  ExecutorStats decode_step_stats() const;
  // The same for one batched pass over a chunk of prompt tokens (prompt_chunk() of them, padding
  // included).
  ExecutorStats prompt_chunk_stats() const;
  int64_t prompt_chunk() const;
  // Times one decoded token's pass op by op: `token` run at position() through a copy of the
  // decode graph compiled with CompileOptions::profile on first use (GPU timestamps around every
  // op, which serializes the ops: the sum exceeds an unprofiled step's time). The token's K/V go
  // into the cache at position(), which does not move. Needs device timestamps (DeviceInfo::
  // timestamps) and a free position; else invalid_argument / unsupported saying which.
  std::vector<OpTime> profile_decode_step(int32_t token);

 private:
  explicit LanguageModel(std::unique_ptr<LanguageModelImpl> impl);
  LanguageModelImpl& impl() const;  // throws on a moved-from LanguageModel
  std::unique_ptr<LanguageModelImpl> impl_;
};

}  // namespace vkformer
