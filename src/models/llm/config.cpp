#include "llm/config.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <string>
#include <string_view>

#include "vkformer/error.hpp"

namespace vkformer::models::llm {

namespace {

[[noreturn]] void bad(const GgufFile& f, const std::string& key, const std::string& why) {
  throw Error(ErrorCode::format, f.label() + ": " + key + " " + why);
}

// A positive integer key; `fallback` < 0 makes it required.
int64_t positive(const GgufFile& f, const std::string& key, int64_t fallback = -1) {
  if (!f.has(key)) {
    if (fallback < 0) bad(f, key, "is missing (the model needs it)");
    return fallback;
  }
  const int64_t v = f.get_int(key);
  if (v < 1 || v > (int64_t{1} << 31)) bad(f, key, "is " + std::to_string(v) + ", expected 1..2^31");
  return v;
}

// The tensors outside the blocks; rope_freqs only where the file has it (Llama 3.1).
constexpr std::array<std::string_view, 4> kModelTensors = {"token_embd.weight", "output_norm.weight",
                                                           "output.weight", "rope_freqs.weight"};

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
// blk.0 .. blk.<block_count - 1>, each complete, every tensor is one this family uses (one it
// does not would be silently ignored, computing another model), and the tokenizer has one token
// per row of token_embd.weight, as llama.cpp requires (its n_vocab sizes that tensor). Shapes and
// types are weights.cpp's to check.
void check_tensors(const GgufFile& f, const LanguageModelConfig& c) {
  // The suffixes a block has (block_tensors with i = 0, "blk.0." cut off).
  std::vector<std::string> block_suffixes;
  for (const TensorSpec& t : block_tensors(c, 0)) block_suffixes.push_back(t.name.substr(6));
  int64_t blocks = 0;
  const GgufTensorInfo* unknown = nullptr;
  for (const GgufTensorInfo& t : f.tensors()) {
    std::string_view suffix;
    const int64_t i = block_of(t.name, &suffix);
    const bool known = i >= 0 ? std::find(block_suffixes.begin(), block_suffixes.end(), suffix) != block_suffixes.end()
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
    for (const std::string& suffix : block_suffixes) {
      const std::string name = "blk." + std::to_string(i) + "." + suffix;
      if (!f.find_tensor(name))
        throw Error(ErrorCode::format, f.label() + ": tensor " + name + " is missing (the file has blocks blk.0 .. blk." +
                                           std::to_string(blocks - 1) + ")");
    }
  if (unknown)
    throw Error(ErrorCode::unsupported,
                f.label() + ": tensor " + unknown->name + " is not one a " + c.architecture +
                    " model uses (blocks hold blk.N." + block_suffixes.front() + " ... blk.N." +
                    block_suffixes.back() +
                    "; besides them token_embd, output_norm, output and rope_freqs); vkformer would ignore it");
  if (const GgufValue* tokens = f.find("tokenizer.ggml.tokens"); tokens && tokens->is_array()) {
    const uint64_t n = tokens->size();
    if (n != static_cast<uint64_t>(c.vocab_size))
      bad(f, "tokenizer.ggml.tokens",
          "has " + std::to_string(n) + " tokens but token_embd.weight has " + std::to_string(c.vocab_size) +
              " rows, one per token: the tokenizer and the weights are of different models");
  }
}

// A soft-capping value: absent or 0 is none.
double soft_cap(const GgufFile& f, const std::string& key) {
  const double v = f.get_float_or(key, 0.0);
  if (!std::isfinite(v) || v < 0) bad(f, key, "is " + std::to_string(v) + ", expected >= 0 (0: none)");
  return v;
}

// Which layers slide: <arch>.attention.sliding_window_pattern (one bool per layer) where the file
// has it, else the family's pattern.
std::vector<bool> sliding_layers(const GgufFile& f, const LanguageModelConfig& c, const Family& fam) {
  std::vector<bool> out(static_cast<size_t>(c.n_layers), false);
  if (c.sliding_window == 0) return out;
  const std::string key = c.architecture + ".attention.sliding_window_pattern";
  if (const GgufValue* v = f.find(key)) {
    if (!v->is_array() || v->array_type(key) != GgufValueType::boolean ||
        v->size(key) != static_cast<uint64_t>(c.n_layers))
      bad(f, key, "is " + v->describe() + ", expected " + std::to_string(c.n_layers) + " bools (one per block)");
    const std::span<const std::byte> bytes = v->array_bytes(key);
    for (size_t i = 0; i < out.size(); ++i) out[i] = bytes[i] != std::byte{0};
    return out;
  }
  for (size_t i = 0; i < out.size(); ++i) {
    switch (fam.sliding) {
      case SlidingLayers::all: out[i] = true; break;
      case SlidingLayers::even: out[i] = i % 2 == 0; break;
      case SlidingLayers::five_of_six: out[i] = i % 6 != 5; break;
    }
  }
  return out;
}

}  // namespace

const Family& family_of(const LanguageModelConfig& c) {
  const Family* fam = find_family(c.architecture);
  if (!fam) throw Error(ErrorCode::invalid_argument, "no model family '" + c.architecture + "'");
  return *fam;
}

std::vector<TensorSpec> block_tensors(const LanguageModelConfig& c, int64_t i) {
  const Family& fam = family_of(c);
  const int64_t d = c.d_model, hd = c.head_dim, ff = c.d_ff, q = c.n_heads * hd, kv = c.n_kv_heads * hd;
  const std::string b = "blk." + std::to_string(i) + ".";
  std::vector<TensorSpec> t = {{b + "attn_norm.weight", {d}}};
  if (fam.fused_qkv) {
    t.push_back({b + "attn_qkv.weight", {q + 2 * kv, d}});
  } else {
    t.push_back({b + "attn_q.weight", {q, d}});
    t.push_back({b + "attn_k.weight", {kv, d}});
    t.push_back({b + "attn_v.weight", {kv, d}});
  }
  if (c.qkv_bias) {
    t.push_back({b + "attn_q.bias", {q}});
    t.push_back({b + "attn_k.bias", {kv}});
    t.push_back({b + "attn_v.bias", {kv}});
  }
  if (c.qk_norm) {
    t.push_back({b + "attn_q_norm.weight", {hd}});
    t.push_back({b + "attn_k_norm.weight", {hd}});
  }
  t.push_back({b + "attn_output.weight", {d, q}});
  if (c.post_norms) t.push_back({b + "post_attention_norm.weight", {d}});
  t.push_back({b + "ffn_norm.weight", {d}});
  if (fam.fused_gate_up) {
    t.push_back({b + "ffn_up.weight", {2 * ff, d}});
  } else {
    t.push_back({b + "ffn_gate.weight", {ff, d}});
    t.push_back({b + "ffn_up.weight", {ff, d}});
  }
  t.push_back({b + "ffn_down.weight", {d, ff}});
  if (c.post_norms) t.push_back({b + "post_ffw_norm.weight", {d}});
  return t;
}

LanguageModelConfig read_config(const GgufFile& f) {
  LanguageModelConfig c;
  c.architecture = std::string(f.get_string("general.architecture"));
  const Family* fam = find_family(c.architecture);
  if (!fam)
    throw Error(ErrorCode::format, f.label() + ": general.architecture is '" + c.architecture +
                                       "'; supported: " + supported_architectures());
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
  // RoPE scaling: linear (positions divided by the factor) or none; YaRN and longrope would need
  // their own frequency and attention corrections, which vkformer lacks.
  const std::string_view scaling = f.get_string_or(a + "rope.scaling.type", "none");
  double factor = f.get_float_or(a + "rope.scale_linear", 1.0);  // the older key
  if (scaling == "linear") {
    factor = f.get_float_or(a + "rope.scaling.factor", factor);
  } else if (scaling != "none") {
    throw Error(ErrorCode::unsupported, f.label() + ": " + a + "rope.scaling.type is '" + std::string(scaling) +
                                            "'; vkformer supports 'none' and 'linear'");
  }
  if (!(factor > 0) || !std::isfinite(factor))
    bad(f, scaling == "linear" ? a + "rope.scaling.factor" : a + "rope.scale_linear",
        "is " + std::to_string(factor) + ", expected > 0");
  c.rope_freq_scale = 1.0 / factor;
  if (const double attn_factor = f.get_float_or(a + "rope.scaling.attn_factor", 1.0); attn_factor != 1.0)
    throw Error(ErrorCode::unsupported, f.label() + ": " + a + "rope.scaling.attn_factor is " +
                                            std::to_string(attn_factor) + "; vkformer supports only 1");
  c.rope_style = fam->rope_style;
  c.rope_freq_factors = f.find_tensor("rope_freqs.weight") != nullptr;
  c.rope_base_sliding = f.get_float_or(a + "rope.freq_base_swa", fam->rope_base_sliding);
  if (c.rope_base_sliding != 0 && !(c.rope_base_sliding > 1))
    bad(f, a + "rope.freq_base_swa", "is " + std::to_string(c.rope_base_sliding) + ", expected > 1");

  const int64_t window = f.has(a + "attention.sliding_window") ? f.get_int(a + "attention.sliding_window") : 0;
  if (window < 0 || window > (int64_t{1} << 31))
    bad(f, a + "attention.sliding_window", "is " + std::to_string(window) + ", expected 0 (none) .. 2^31");
  c.sliding_window = window;
  c.attn_softcap = soft_cap(f, a + "attn_logit_softcapping");
  c.final_softcap = soft_cap(f, a + "final_logit_softcapping");
  c.embedding_scale = fam->scale_embedding ? std::sqrt(static_cast<double>(c.d_model)) : 1.0;
  c.ffn_activation = fam->ffn_activation;
  c.qkv_bias = fam->qkv_bias;
  c.qk_norm = fam->qk_norm;
  c.post_norms = fam->post_norms;
  c.attention_scale = f.get_float_or(a + "attention.scale", 0.0);
  if (c.attention_scale == 0 && fam->attention_scale) c.attention_scale = fam->attention_scale(c);
  if (c.attention_scale < 0 || !std::isfinite(c.attention_scale))
    bad(f, a + "attention.scale", "is " + std::to_string(c.attention_scale) + ", expected > 0");

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
  c.sliding_layers = sliding_layers(f, c, *fam);  // after the check: n_layers is the tensors'

  return c;
}

}  // namespace vkformer::models::llm
