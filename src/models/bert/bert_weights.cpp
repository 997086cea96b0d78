#include "bert/bert_weights.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <string_view>
#include <vector>

#include "../io/io_util.hpp"
#include "vkformer/error.hpp"
#include "vkformer/half.hpp"
#include "vkformer/io.hpp"

namespace vkformer::models::bert {

namespace {

bool float_dtype(const std::string& d) { return d == "F32" || d == "F16" || d == "BF16" || d == "F64"; }

// The tensors of a checkpoint, found under the prefix its names use.
class Checkpoint {
 public:
  Checkpoint(const std::filesystem::path& path, DType dtype) : file_(path), dtype_(dtype) {
    // BertModel saves "embeddings....", BertForMaskedLM and friends "bert.embeddings....".
    for (const char* p : {"", "bert."})
      if (file_.contains(std::string(p) + "embeddings.word_embeddings.weight")) prefix_ = p;
  }

  // How many encoder layers the checkpoint holds: one past the highest i of
  // "[bert.]encoder.layer.<i>.*".
  int64_t layers() const {
    const std::string stem = prefix_ + "encoder.layer.";
    int64_t n = 0;
    for (const SafetensorsEntry& e : file_.entries()) {
      std::string_view rest(e.name);
      if (!rest.starts_with(stem)) continue;
      rest.remove_prefix(stem.size());
      int64_t i = -1;
      const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), i);
      if (ec == std::errc() && end < rest.data() + rest.size() && *end == '.' && i >= 0) n = std::max(n, i + 1);
    }
    return n;
  }

  const std::string& label() const { return file_.label(); }

  // The tensor `name` (without prefix) as f32, checked to be `shape`.
  HostTensor read(const std::string& name, const Shape& shape) const {
    const std::string full = prefix_ + name;
    const SafetensorsEntry* e = file_.find(full);
    if (!e)
      throw Error(ErrorCode::format,
                  file_.label() + ": tensor '" + name + "' (shape " + shape.str() +
                      ") is missing; looked for '" + name + "' and 'bert." + name + "'");
    if (e->shape != shape)
      throw Error(ErrorCode::format, file_.label() + ": tensor '" + full + "' has shape " +
                                         e->shape.str() + ", expected " + shape.str() +
                                         " for this config.json");
    if (!float_dtype(e->dtype))
      throw Error(ErrorCode::format, file_.label() + ": tensor '" + full + "' has dtype " +
                                         e->dtype + ", expected a float type (F32, F16, BF16)");
    HostTensor t = file_.read(full, DType::f32);
    // A NaN or an infinity in a weight reaches every output it touches: embeddings of null.
    const auto* v = reinterpret_cast<const float*>(t.data());
    for (int64_t i = 0; i < t.numel(); ++i)
      if (!std::isfinite(v[i]))
        throw Error(ErrorCode::format, file_.label() + ": tensor '" + full + "' holds " +
                                           (std::isnan(v[i]) ? "NaN" : v[i] > 0 ? "+inf" : "-inf") +
                                           " at index " + std::to_string(i) + " of " +
                                           std::to_string(t.numel()) + "; weights must be finite");
    return t;
  }

  // An f16 model keeps its weights in f16: a weight beyond f16's range would become infinite.
  HostTensor stored(const std::string& name, HostTensor t) const {
    if (dtype_ == DType::f32) return t;
    const auto* v = reinterpret_cast<const float*>(t.data());
    for (int64_t i = 0; i < t.numel(); ++i)
      if (std::isfinite(v[i]) && std::isinf(half_to_float(float_to_half(v[i]))))
        throw Error(ErrorCode::unsupported,
                    file_.label() + ": tensor '" + name + "' holds " + std::to_string(v[i]) +
                        ", beyond float16's range: load this model with dtype f32");
    return t.cast(DType::f16);
  }

 private:
  SafetensorsFile file_;
  DType dtype_;
  std::string prefix_;
};

// Rows of several [n_i, k] (or [n_i]) tensors stacked into one.
HostTensor stack_rows(const std::vector<HostTensor>& parts) {
  int64_t rows = 0;
  for (auto& p : parts) rows += p.shape()[0];
  Shape s = parts[0].shape().rank() == 1 ? Shape{rows} : Shape{rows, parts[0].shape()[1]};
  HostTensor out(s, parts[0].dtype());
  size_t offset = 0;
  for (auto& p : parts) {
    std::memcpy(out.data() + offset, p.data(), p.nbytes());
    offset += p.nbytes();
  }
  return out;
}

}  // namespace

std::string layer_name(int64_t layer, const std::string& suffix) {
  return "encoder.layer." + std::to_string(layer) + "." + suffix;
}

WeightStore load_weights(Device& device, const BertConfig& c, const std::filesystem::path& path,
                         DType dtype) {
  if (!is_float(dtype)) throw Error(ErrorCode::invalid_argument, "BERT weights must be f32 or f16");
  io::check_regular_file(path);
  Checkpoint ckpt(path, dtype);
  // Before anything is read: a config that names fewer layers than the checkpoint has would
  // silently run a truncated model, one that names more would fail only at the first missing one.
  if (const int64_t layers = ckpt.layers(); layers != c.num_hidden_layers)
    throw Error(ErrorCode::format,
                ckpt.label() + ": holds " + std::to_string(layers) + " encoder layers" +
                    (layers > 0 ? " (encoder.layer.0 .. encoder.layer." + std::to_string(layers - 1) + ")"
                                : std::string()) +
                    " but config.json's num_hidden_layers is " + std::to_string(c.num_hidden_layers));
  WeightStore w;
  const int64_t h = c.hidden_size, f = c.intermediate_size;
  auto put = [&](const std::string& name, const Shape& shape) {
    w.add(name, device.upload(ckpt.stored(name, ckpt.read(name, shape))));
  };
  put("embeddings.word_embeddings.weight", {c.vocab_size, h});
  put("embeddings.position_embeddings.weight", {c.max_position_embeddings, h});
  put("embeddings.token_type_embeddings.weight", {c.type_vocab_size, h});
  put("embeddings.LayerNorm.weight", {h});
  put("embeddings.LayerNorm.bias", {h});
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    auto n = [&](const std::string& s) { return layer_name(i, s); };
    for (const char* part : {"weight", "bias"}) {
      const bool weight = part == std::string("weight");
      const Shape shape = weight ? Shape{h, h} : Shape{h};
      std::vector<HostTensor> qkv;
      for (const char* proj : {"query", "key", "value"})
        qkv.push_back(ckpt.read(n(std::string("attention.self.") + proj + "." + part), shape));
      const std::string fused = n(std::string("attention.qkv.") + part);
      w.add(fused, device.upload(ckpt.stored(fused, stack_rows(qkv))));
    }
    put(n("attention.output.dense.weight"), {h, h});
    put(n("attention.output.dense.bias"), {h});
    put(n("attention.output.LayerNorm.weight"), {h});
    put(n("attention.output.LayerNorm.bias"), {h});
    put(n("intermediate.dense.weight"), {f, h});
    put(n("intermediate.dense.bias"), {f});
    put(n("output.dense.weight"), {h, f});
    put(n("output.dense.bias"), {h});
    put(n("output.LayerNorm.weight"), {h});
    put(n("output.LayerNorm.bias"), {h});
  }
  return w;
}

}  // namespace vkformer::models::bert
