#include "reference_model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "vkformer/error.hpp"

namespace vkformer::ref {

ReferenceModel::ReferenceModel(const ModelConfig& config,
                               const std::map<std::string, HostTensor>& weights)
    : c_(config) {
  for (auto& [name, t] : weights) {
    auto f = t.to_f32();
    w_[name] = Vec(f.begin(), f.end());
  }
}

const Vec& ReferenceModel::w(const std::string& name) const {
  auto it = w_.find(name);
  if (it == w_.end()) throw Error(ErrorCode::invalid_argument, "reference model: no weight " + name);
  return it->second;
}

Vec ReferenceModel::add(const Vec& a, const Vec& b) const {
  Vec out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = a[i] + b[i];
  return out;
}

Vec ReferenceModel::linear_rows(const Vec& x, int64_t rows, const Vec& weight, const Vec& bias,
                                int64_t out, int64_t in) const {
  return matmul(x, weight, 1, 1, rows, out, in, /*transpose_b=*/true, &bias, 1.0);
}

Vec ReferenceModel::linear(const Vec& x, int64_t rows, const std::string& p) const {
  const Vec& wt = w(p + ".weight");
  const Vec& bias = w(p + ".bias");
  int64_t out = static_cast<int64_t>(bias.size());
  return linear_rows(x, rows, wt, bias, out, static_cast<int64_t>(wt.size()) / out);
}

Vec ReferenceModel::norm(const std::string& p, const Vec& x, int64_t rows) const {
  return layer_norm(x, rows, c_.d_model, w(p + ".weight"), w(p + ".bias"), c_.layer_norm_eps);
}

// nn.MultiheadAttention: packed in_proj rows [Wq; Wk; Wv], heads of d_model / nhead, scores
// scaled by 1/sqrt(head_dim), masks added before the softmax, out_proj after the concat.
Vec ReferenceModel::attention(const std::string& p, const Vec& xq, int64_t b, int64_t sq,
                              const Vec& xkv, int64_t sk, bool causal,
                              const std::vector<int32_t>& key_padding) const {
  const int64_t e = c_.d_model, h = c_.nhead, dh = e / h;
  const Vec& in_w = w(p + ".in_proj_weight");
  const Vec& in_b = w(p + ".in_proj_bias");
  auto part = [&](const Vec& v, int64_t i, int64_t n) { return Vec(v.begin() + i * n, v.begin() + (i + 1) * n); };
  Vec q = linear_rows(xq, b * sq, part(in_w, 0, e * e), part(in_b, 0, e), e, e);
  Vec k = linear_rows(xkv, b * sk, part(in_w, 1, e * e), part(in_b, 1, e), e, e);
  Vec v = linear_rows(xkv, b * sk, part(in_w, 2, e * e), part(in_b, 2, e), e, e);
  SoftmaxMasks m;
  m.scale = 1.0 / std::sqrt(static_cast<double>(dh));
  m.causal = causal;
  m.key_padding = key_padding.empty() ? nullptr : &key_padding;
  Vec heads = ref::attention(split_heads(q, b, sq, e, h, dh, 0), split_heads(k, b, sk, e, h, dh, 0),
                             split_heads(v, b, sk, e, h, dh, 0), b, h, sq, sk, dh, dh, m);
  return linear(concat_heads(heads, b, h, sq, dh), b * sq, p + ".out_proj");
}

Vec ReferenceModel::feed_forward(const std::string& p, const Vec& x, int64_t rows) const {
  Vec hidden = linear(x, rows, p + ".linear1");
  for (auto& v : hidden) v = c_.activation == Activation::gelu ? gelu(v) : relu(v);
  return linear(hidden, rows, p + ".linear2");
}

Vec ReferenceModel::encoder(const Vec& x0, int64_t b, int64_t s,
                            const std::vector<int32_t>& key_padding) const {
  const std::string prefix = encoder_prefix();
  Vec x = x0;
  const int64_t rows = b * s;
  for (int64_t i = 0; i < c_.num_encoder_layers; ++i) {
    std::string p = prefix + "layers." + std::to_string(i);
    auto sa = [&](const Vec& y) { return attention(p + ".self_attn", y, b, s, y, s, false, key_padding); };
    auto ff = [&](const Vec& y) { return feed_forward(p, y, rows); };
    if (c_.norm_first) {
      x = add(x, sa(norm(p + ".norm1", x, rows)));
      x = add(x, ff(norm(p + ".norm2", x, rows)));
    } else {
      x = norm(p + ".norm1", add(x, sa(x)), rows);
      x = norm(p + ".norm2", add(x, ff(x)), rows);
    }
  }
  return c_.final_norm ? norm(prefix + "norm", x, rows) : x;
}

Vec ReferenceModel::decoder(const Vec& y0, int64_t b, int64_t t, const Vec& memory, int64_t s,
                            const std::vector<int32_t>& memory_key_padding) const {
  const std::string prefix = decoder_prefix();
  Vec x = y0;
  const int64_t rows = b * t;
  for (int64_t i = 0; i < c_.num_decoder_layers; ++i) {
    std::string p = prefix + "layers." + std::to_string(i);
    auto sa = [&](const Vec& y) { return attention(p + ".self_attn", y, b, t, y, t, true, {}); };
    auto ca = [&](const Vec& y) {
      return attention(p + ".multihead_attn", y, b, t, memory, s, false, memory_key_padding);
    };
    auto ff = [&](const Vec& y) { return feed_forward(p, y, rows); };
    if (c_.norm_first) {
      x = add(x, sa(norm(p + ".norm1", x, rows)));
      x = add(x, ca(norm(p + ".norm2", x, rows)));
      x = add(x, ff(norm(p + ".norm3", x, rows)));
    } else {
      x = norm(p + ".norm1", add(x, sa(x)), rows);
      x = norm(p + ".norm2", add(x, ca(x)), rows);
      x = norm(p + ".norm3", add(x, ff(x)), rows);
    }
  }
  return c_.final_norm ? norm(prefix + "norm", x, rows) : x;
}

Vec ReferenceModel::embed(const std::string& table, const std::vector<int32_t>& ids, int64_t b,
                          int64_t s) const {
  const int64_t d = c_.d_model;
  Vec x = embedding(ids, w(table), d);
  const double scale = std::sqrt(static_cast<double>(d));
  for (int64_t i = 0; i < b * s; ++i)
    for (int64_t j = 0; j < d; ++j)
      x[i * d + j] = x[i * d + j] * scale + positional_encoding(i % s, j, d);
  return x;
}

Vec ReferenceModel::log_probs(const std::vector<int32_t>& src, const std::vector<int32_t>& tgt,
                              int64_t b, int64_t s, int64_t t) const {
  Vec memory = encoder(embed("src_embed.weight", src, b, s), b, s);
  Vec y = decoder(embed("tgt_embed.weight", tgt, b, t), b, t, memory, s);
  Vec logits = linear(y, b * t, "generator");
  const int64_t v = c_.tgt_vocab;
  for (int64_t r = 0; r < b * t; ++r) {
    double* row = logits.data() + r * v;
    double mx = *std::max_element(row, row + v), sum = 0;
    for (int64_t j = 0; j < v; ++j) sum += std::exp(row[j] - mx);
    for (int64_t j = 0; j < v; ++j) row[j] = row[j] - mx - std::log(sum);
  }
  return logits;
}

std::vector<int32_t> ReferenceModel::greedy(const std::vector<int32_t>& src, int steps, int32_t bos,
                                            int32_t eos, double* min_margin) const {
  const int64_t s = static_cast<int64_t>(src.size()), v = c_.tgt_vocab;
  Vec memory = encoder(embed("src_embed.weight", src, 1, s), 1, s);
  std::vector<int32_t> ys = {bos}, out;
  double margin = std::numeric_limits<double>::infinity();
  for (int step = 0; step < steps; ++step) {
    const int64_t t = static_cast<int64_t>(ys.size());
    Vec y = decoder(embed("tgt_embed.weight", ys, 1, t), 1, t, memory, s);
    Vec last(y.end() - c_.d_model, y.end());
    Vec logits = linear(last, 1, "generator");
    auto best = std::max_element(logits.begin(), logits.begin() + v);
    double top = *best, second = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < v; ++j)
      if (logits.begin() + j != best) second = std::max(second, logits[j]);
    margin = std::min(margin, top - second);  // log-softmax preserves differences
    int32_t token = static_cast<int32_t>(best - logits.begin());
    out.push_back(token);
    ys.push_back(token);
    if (token == eos) break;
  }
  if (min_margin) *min_margin = margin;
  return out;
}

std::string ReferenceModel::encoder_prefix() const {
  switch (c_.arch) {
    case ModelConfig::Arch::transformer: return "encoder.";
    case ModelConfig::Arch::seq2seq: return "transformer.encoder.";
    default: return "";
  }
}

std::string ReferenceModel::decoder_prefix() const {
  switch (c_.arch) {
    case ModelConfig::Arch::transformer: return "decoder.";
    case ModelConfig::Arch::seq2seq: return "transformer.decoder.";
    default: return "";
  }
}

}  // namespace vkformer::ref
