#include "llama/llama_config.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <string>
#include <string_view>

#include "vkformer/error.hpp"

namespace vkformer::models::llama {

namespace {

[[noreturn]] void bad(const GgufFile& f, const std::string& key, const std::string& why) {
  throw Error(ErrorCode::format, f.label() + ": " + key + " " + why);
}

// A positive integer key; `fallback` < 0 makes it required.
int64_t positive(const GgufFile& f, const std::string& key, int64_t fallback = -1) {
  if (!f.has(key)) {
    if (fallback < 0) bad(f, key, "is missing (a llama model needs it)");
    return fallback;
  }
  const int64_t v = f.get_int(key);
  if (v < 1 || v > (int64_t{1} << 31)) bad(f, key, "is " + std::to_string(v) + ", expected 1..2^31");
  return v;
}

// The tensors a llama block has (llama_weights.cpp reads each), and those outside the blocks.
constexpr std::array<std::string_view, 9> kBlockTensors = {
    "attn_norm.weight", "attn_q.weight",   "attn_k.weight", "attn_v.weight", "attn_output.weight",
    "ffn_norm.weight",  "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"};
constexpr std::array<std::string_view, 3> kModelTensors = {"token_embd.weight", "output_norm.weight",
                                                           "output.weight"};

// The block index of "blk.<i>.<suffix>" (digits without a leading zero), or -1 with `suffix`
// untouched for another name.
int64_t block_of(std::string_view name, std::string_view* suffix) {
  if (!name.starts_with("blk.")) return -1;
  name.remove_prefix(4);
  const size_t dot = name.find('.');
  if (dot == std::string_view::npos || dot == 0 || (dot > 1 && name[0] == '0')) return -1;
  int64_t i = -1;
  const auto [end, ec] = std::from_chars(name.data(), name.data() + dot, i);
  if (ec != std::errc() || end != name.data() + dot) return -1;
  *suffix = name.substr(dot + 1);
  return i;
}

// What the tensors say against what the metadata says, before anything is sized by the metadata
// (a block_count of 10^9 once planned 9 * 10^9 tensors and ran out of memory): the blocks are
// blk.0 .. blk.<block_count - 1>, each complete, every tensor is one this architecture uses (one
// it does not would be silently ignored, computing another model), and the tokenizer has one
// token per row of token_embd.weight, as llama.cpp requires (its n_vocab sizes that tensor).
// Shapes and types are llama_weights.cpp's to check.
void check_tensors(const GgufFile& f, const LlamaConfig& c) {
  int64_t blocks = 0;
  const GgufTensorInfo* unknown = nullptr;
  for (const GgufTensorInfo& t : f.tensors()) {
    std::string_view suffix;
    const int64_t i = block_of(t.name, &suffix);
    const bool known = i >= 0 ? std::find(kBlockTensors.begin(), kBlockTensors.end(), suffix) != kBlockTensors.end()
                              : std::find(kModelTensors.begin(), kModelTensors.end(), t.name) != kModelTensors.end();
    if (!known && !unknown) unknown = &t;
    if (i >= 0) blocks = std::max(blocks, i + 1);
  }
  if (c.n_layers != blocks)
    bad(f, c.architecture + ".block_count",
        "is " + std::to_string(c.n_layers) + " but the file's tensors are those of " + std::to_string(blocks) +
            (blocks == 1 ? " block" : " blocks") +
            (blocks > 0 ? " (blk.0 .. blk." + std::to_string(blocks - 1) + ")" : std::string()));
  // A missing tensor first: a misspelt one is also an unknown one, and missing says more.
  for (int64_t i = 0; i < blocks; ++i)
    for (std::string_view suffix : kBlockTensors) {
      const std::string name = "blk." + std::to_string(i) + "." + std::string(suffix);
      if (!f.find_tensor(name))
        throw Error(ErrorCode::format, f.label() + ": tensor " + name + " is missing (the file has blocks blk.0 .. blk." +
                                           std::to_string(blocks - 1) + ")");
    }
  if (unknown)
    throw Error(ErrorCode::unsupported,
                f.label() + ": tensor " + unknown->name + " is not one a " + c.architecture +
                    " model uses (blocks hold blk.N." + std::string(kBlockTensors[0]) + " ... blk.N." +
                    std::string(kBlockTensors.back()) +
                    "; besides them token_embd, output_norm and output); vkformer would ignore it");
  if (const GgufValue* tokens = f.find("tokenizer.ggml.tokens"); tokens && tokens->is_array()) {
    const uint64_t n = tokens->size();
    if (n != static_cast<uint64_t>(c.vocab_size))
      bad(f, "tokenizer.ggml.tokens",
          "has " + std::to_string(n) + " tokens but token_embd.weight has " + std::to_string(c.vocab_size) +
              " rows, one per token: the tokenizer and the weights are of different models");
  }
}

}  // namespace

LlamaConfig read_config(const GgufFile& f) {
  LlamaConfig c;
  c.architecture = std::string(f.get_string("general.architecture"));
  if (c.architecture != "llama")
    throw Error(ErrorCode::format, f.label() + ": general.architecture is '" + c.architecture +
                                       "'; supported: " + kSupportedArchitectures);
  const std::string a = c.architecture + ".";
  c.n_layers = positive(f, a + "block_count");
  c.d_model = positive(f, a + "embedding_length");
  c.n_heads = positive(f, a + "attention.head_count");
  c.n_kv_heads = positive(f, a + "attention.head_count_kv", c.n_heads);
  c.d_ff = positive(f, a + "feed_forward_length");
  c.context_length = positive(f, a + "context_length");
  if (c.n_heads % c.n_kv_heads != 0)
    bad(f, a + "attention.head_count_kv",
        "is " + std::to_string(c.n_kv_heads) + ", which does not divide the " +
            std::to_string(c.n_heads) + " query heads");
  const int64_t default_head_dim = c.d_model % c.n_heads == 0 ? c.d_model / c.n_heads : 0;
  c.head_dim = positive(f, a + "attention.key_length", default_head_dim);
  if (c.head_dim == 0)
    bad(f, a + "embedding_length", "is " + std::to_string(c.d_model) + ", not a multiple of the " +
                                       std::to_string(c.n_heads) + " heads");
  if (positive(f, a + "attention.value_length", c.head_dim) != c.head_dim)
    bad(f, a + "attention.value_length", "differs from the key length " + std::to_string(c.head_dim) +
                                             " (not supported)");
  if (c.head_dim % 2 != 0) bad(f, a + "attention.key_length", "is odd; rotary embeddings rotate pairs");
  c.rope_dims = positive(f, a + "rope.dimension_count", c.head_dim);
  if (c.rope_dims > c.head_dim || c.rope_dims % 2 != 0)
    bad(f, a + "rope.dimension_count", "is " + std::to_string(c.rope_dims) +
                                           ", expected an even number <= the head size " +
                                           std::to_string(c.head_dim));
  c.rms_eps = f.get_float_or(a + "attention.layer_norm_rms_epsilon", 1e-5);
  if (!(c.rms_eps > 0 && c.rms_eps < 1))
    bad(f, a + "attention.layer_norm_rms_epsilon", "is " + std::to_string(c.rms_eps) + ", expected (0, 1)");
  c.rope_base = f.get_float_or(a + "rope.freq_base", 10000.0);
  if (!(c.rope_base > 1))
    bad(f, a + "rope.freq_base", "is " + std::to_string(c.rope_base) + ", expected > 1");
  const std::string_view scaling = f.get_string_or(a + "rope.scaling.type", "none");
  if (scaling != "none")
    bad(f, a + "rope.scaling.type", "is '" + std::string(scaling) + "'; only 'none' is supported");
  const double freq_scale = f.get_float_or(a + "rope.scale_linear", 1.0);
  if (freq_scale != 1.0)
    bad(f, a + "rope.scale_linear", "is " + std::to_string(freq_scale) + "; only 1 is supported");
  c.rope_style = LlamaConfig::RopeStyle::interleaved;  // llama.cpp's LLAMA_ROPE_TYPE_NORM

  const GgufTensorInfo& embd = f.tensor("token_embd.weight");
  c.vocab_size = static_cast<int64_t>(embd.n_dims == 2 ? embd.ne[1] : 0);
  if (c.vocab_size < 1)
    throw Error(ErrorCode::format, f.label() + ": tensor token_embd.weight has shape " +
                                       embd.shape().str() + ", expected [vocab, " +
                                       std::to_string(c.d_model) + "]");
  if (f.has(a + "vocab_size") && f.get_int(a + "vocab_size") != c.vocab_size)
    bad(f, a + "vocab_size", "is " + std::to_string(f.get_int(a + "vocab_size")) +
                                 " but token_embd.weight has " + std::to_string(c.vocab_size) + " rows");
  c.tied_output = f.find_tensor("output.weight") == nullptr;
  check_tensors(f, c);
  return c;
}

}  // namespace vkformer::models::llama
