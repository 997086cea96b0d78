#pragma once
// Whole transformer models with PyTorch's semantics: torch.nn.TransformerEncoder,
// TransformerDecoder and Transformer (batch_first=True), and the original paper's
// sequence-to-sequence model, loaded from a directory holding config.json and model.safetensors.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "vkformer/device.hpp"
#include "vkformer/graph.hpp"
#include "vkformer/host_tensor.hpp"

namespace vkformer {

// The PyTorch constructor arguments, as config.json holds them (README: "Model directories").
struct ModelConfig {
  enum class Arch { encoder, decoder, transformer, seq2seq };
  Arch arch = Arch::transformer;
  int64_t d_model = 512;
  int64_t nhead = 8;
  int64_t dim_feedforward = 2048;
  int64_t num_encoder_layers = 6;
  int64_t num_decoder_layers = 6;
  Activation activation = Activation::relu;  // "relu" or "gelu"
  float layer_norm_eps = 1e-5f;
  bool norm_first = false;  // pre-norm layers
  // encoder/decoder: the stack ends in a LayerNorm ("norm.weight"); transformer and seq2seq
  // always have one per stack, as nn.Transformer does.
  bool final_norm = false;
  int64_t src_vocab = 0;    // seq2seq only
  int64_t tgt_vocab = 0;    // seq2seq only
  int64_t max_len = 5000;   // seq2seq: longest sequence the positional encoding covers

  // Parses and validates; errors name the key and the file.
  static ModelConfig parse(const std::string& json_text, const std::string& source = "config.json");
  static ModelConfig load(const std::string& path);
  // The checks parse() makes, for a config built in code (Model::from_tensors and
  // parameter_shapes call it): Error(invalid_argument) naming the field and its range.
  void validate(const std::string& source = "ModelConfig") const;
  std::string to_json() const;

  bool has_encoder() const { return arch != Arch::decoder; }
  bool has_decoder() const { return arch != Arch::encoder; }
  static const char* arch_name(Arch a);
};

// Every parameter a model of this config has, with its shape, named as PyTorch's state_dict()
// names it ("encoder.layers.0.self_attn.in_proj_weight", ...), in state_dict order.
std::vector<std::pair<std::string, Shape>> parameter_shapes(const ModelConfig& config);

// Masks of one forward pass, with PyTorch's names and meanings.
struct ModelMasks {
  // encoder: causal self-attention over the source; decoder, transformer, seq2seq: causal
  // self-attention over the target (the usual generate_square_subsequent_mask).
  bool causal = false;
  // Additive float masks [Sq, Sk] (-inf = masked), or boolean (i32, nonzero = masked).
  std::optional<HostTensor> src_mask, tgt_mask, memory_mask;
  // Boolean [B, S] (i32, nonzero = ignore that position as a key).
  std::optional<HostTensor> src_key_padding_mask, tgt_key_padding_mask, memory_key_padding_mask;
};

struct ModelOptions {
  DType dtype = DType::f32;  // f16: weights and activations stored in f16, math in f32
  AttentionOptions::Path attention = AttentionOptions::Path::automatic;
};

struct GenerateOptions {
  int max_new_tokens = 32;
  int32_t bos = 1;
  int32_t eos = 2;         // -1: no end token, always generate max_new_tokens
  int beam = 1;            // 1: greedy
  float length_penalty = 0.6f;  // alpha of ((5 + len) / 6)^alpha (beam search)
};

struct GenerationStats {
  size_t tokens = 0;       // generated tokens returned
  size_t steps = 0;        // decoder steps run: one token position each (for every beam at once)
  double encode_ms = 0;    // encoder and cross-attention keys/values, once per source
  double decode_ms = 0;    // all decoder steps together (beam search: with the cache reorders)
  double ms_per_token() const { return steps ? decode_ms / static_cast<double>(steps) : 0; }
};

class ModelImpl;

// A model resident on one device. Each distinct input shape compiles its graphs once (recorded
// once) and later calls with that shape replay them.
// Use one model from one thread at a time, const methods included; distinct models may run at
// once, also on one device (README, "Threads"). encode, decode, forward or generate called while
// another thread is inside one of them throws Error(invalid_argument) instead of racing.
class Model {
 public:
  // Reads dir/config.json and dir/model.safetensors (memory-mapped). Missing, extra, mis-shaped
  // or wrongly typed tensors and bad config values give errors that name them.
  static Model load(Device device, const std::string& dir, const ModelOptions& options = {});
  // The same from a config and named host tensors (for programs that make their own weights).
  static Model from_tensors(Device device, const ModelConfig& config,
                            const std::map<std::string, HostTensor>& tensors,
                            const ModelOptions& options = {});
  ~Model();
  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;

  const ModelConfig& config() const;
  DType dtype() const;

  // encoder: src [B, S, E] -> [B, S, E]. transformer: the encoder stack (with its final norm).
  // seq2seq: src ids [B, S] (i32) -> memory [B, S, E]. Takes causal, src_mask and
  // src_key_padding_mask; any other mask set is an error (invalid_argument), not ignored.
  HostTensor encode(const HostTensor& src, const ModelMasks& masks = {});
  // decoder: tgt [B, T, E] and memory [B, S, E] -> [B, T, E]. transformer: the decoder stack.
  // Takes causal and the tgt_* and memory_* masks; a src_* mask set is an error.
  HostTensor decode(const HostTensor& tgt, const HostTensor& memory, const ModelMasks& masks = {});
  // transformer: src [B, S, E], tgt [B, T, E] -> [B, T, E] (nn.Transformer.forward).
  // seq2seq: src ids [B, S], tgt ids [B, T] -> log-probabilities [B, T, tgt_vocab].
  HostTensor forward(const HostTensor& src, const HostTensor& tgt, const ModelMasks& masks = {});

  // seq2seq: greedy (beam = 1) or beam search from one source sentence, with a KV cache.
  // Returns the generated ids after bos (ending with eos if it was produced).
  std::vector<int32_t> generate(const std::vector<int32_t>& src, const GenerateOptions& options);
  GenerationStats last_generation_stats() const;
  // How many graphs this model has compiled (and recorded) so far: one set per input shape.
  size_t compiled_graphs() const;

  Device& device() const;

 private:
  explicit Model(std::unique_ptr<ModelImpl> impl);
  ModelImpl& impl() const;  // throws on a moved-from Model
  std::unique_ptr<ModelImpl> impl_;
};

}  // namespace vkformer
