// SentenceEmbedder: a BERT encoder, pooling and normalization compiled per shape bucket; the
// host only tokenizes, sorts by length, pads and scatters the rows back.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "bert/bert_config.hpp"
#include "bert/bert_encoder.hpp"
#include "bert/bert_weights.hpp"
#include "checked_impl.hpp"
#include "exclusive_use.hpp"
#include "file_access.hpp"
#include "sentence_config.hpp"
#include "shape_buckets.hpp"
#include "vkformer/embedder.hpp"
#include "vkformer/error.hpp"

namespace vkformer {

namespace fs = std::filesystem;
using models::bert::BertConfig;

namespace {

// One sequence to embed: its kept tokens, unpadded.
struct Sequence {
  std::vector<int32_t> ids, type_ids;
};

std::string at(size_t row) { return "row " + std::to_string(row); }

}  // namespace

class SentenceEmbedderImpl {
 public:
  SentenceEmbedderImpl(Device d, const fs::path& dir, const EmbedderOptions& o)
      : device(std::move(d)), options(o), sentence(models::SentenceConfig::load(dir)),
        bert(BertConfig::load(sentence.encoder_dir / "config.json")),
        tokenizer(WordPieceTokenizer::load(sentence.encoder_dir)),
        weights(models::bert::load_weights(device, bert, sentence.encoder_dir / "model.safetensors",
                                           o.dtype)),
        executors(device) {
    if (options.max_batch < 1 || options.max_batch > 4096)
      throw Error(ErrorCode::invalid_argument,
                  "EmbedderOptions::max_batch must be in [1, 4096], got " + std::to_string(options.max_batch));
    // sentence-transformers' limit, else the tokenizer's, never beyond the position table.
    max_length = sentence.max_seq_length ? sentence.max_seq_length
                                         : static_cast<int64_t>(tokenizer.config().model_max_length);
    if (max_length <= 0 || max_length > bert.max_position_embeddings) max_length = bert.max_position_embeddings;
    if (max_length < 2)
      throw Error(ErrorCode::format, "max_seq_length " + std::to_string(max_length) +
                                         " cannot hold [CLS] and [SEP]");
    if (static_cast<int64_t>(tokenizer.vocab_size()) > bert.vocab_size)
      throw Error(ErrorCode::format, (sentence.encoder_dir / "config.json").string() + ": vocab_size " +
                                         std::to_string(bert.vocab_size) + " is smaller than the tokenizer's " +
                                         std::to_string(tokenizer.vocab_size()) + " tokens");
    if (sentence.lower_case && !tokenizer.config().lowercase)
      throw Error(ErrorCode::unsupported, (sentence.encoder_dir / "sentence_bert_config.json").string() +
                                              ": do_lower_case true with a cased tokenizer is not supported");
  }

  HostTensor run(const std::vector<Sequence>& seqs);

  Device device;
  EmbedderOptions options;
  models::SentenceConfig sentence;
  BertConfig bert;
  WordPieceTokenizer tokenizer;
  models::WeightStore weights;
  models::ExecutorCache executors;
  int64_t max_length = 0;
  ExclusiveUse in_use{"SentenceEmbedder"};

 private:
  Graph build(int64_t batch, int64_t length) const;

  // The weights are checked at load (bert_weights.cpp), so a NaN or an infinity here comes from
  // the arithmetic: an error, never a row of NaN that a JSON writer prints as null.
  void check_finite(const float* row, size_t text) const {
    for (int64_t j = 0; j < bert.hidden_size; ++j)
      if (!std::isfinite(row[j]))
        throw Error(ErrorCode::unsupported,
                    "SentenceEmbedder::embed: the embedding of text " + std::to_string(text) + " has " +
                        (std::isnan(row[j]) ? "NaN" : "an infinity") + " at dimension " + std::to_string(j) +
                        (options.dtype == DType::f16 ? ": the model overflows float16; load it with dtype f32"
                                                     : ": the model's arithmetic overflowed"));
  }
};

// The whole pipeline for one bucket: ids -> encoder -> pool -> (normalize) -> f32 [B, D].
Graph SentenceEmbedderImpl::build(int64_t b, int64_t s) const {
  Graph g;
  models::bert::BertInputs in{g.input("input_ids", {b, s}, DType::i32),
                              g.input("token_type_ids", {b, s}, DType::i32),
                              g.input("key_padding_mask", {b, s}, DType::i32)};
  Tensor mask = g.input("attention_mask", {b, s}, DType::i32);
  models::bert::BertEncoder encoder(g, bert, weights, options.attention);
  Tensor pooled = g.pool(encoder.build(in), mask, sentence.pooling);
  if (sentence.normalize) pooled = g.l2_normalize(pooled);
  g.output("embedding", g.cast(pooled, DType::f32));
  return g;
}

HostTensor SentenceEmbedderImpl::run(const std::vector<Sequence>& seqs) {
  const int64_t n = static_cast<int64_t>(seqs.size()), d = bert.hidden_size;
  // Longest first, so each run pads its sequences to about the same length.
  std::vector<size_t> order(seqs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return seqs[a].ids.size() > seqs[b].ids.size(); });
  HostTensor out({n, d}, DType::f32);
  auto* dst = reinterpret_cast<float*>(out.data());
  for (int64_t first = 0; first < n; first += options.max_batch) {
    const int64_t count = std::min(options.max_batch, n - first);
    const int64_t longest = static_cast<int64_t>(seqs[order[first]].ids.size());
    const int64_t b = models::bucket_batch(count, options.max_batch);
    const int64_t s = models::bucket_length(longest, max_length);
    std::vector<int32_t> ids(b * s, tokenizer.pad_id()), types(b * s, 0), mask(b * s, 0), pad(b * s, 1);
    for (int64_t r = 0; r < b; ++r) {
      if (r >= count) {  // a padding row: one kept token, so no row is fully masked
        mask[r * s] = 1, pad[r * s] = 0;
        continue;
      }
      const Sequence& q = seqs[order[first + r]];
      for (size_t t = 0; t < q.ids.size(); ++t) {
        ids[r * s + t] = q.ids[t];
        types[r * s + t] = q.type_ids[t];
        mask[r * s + t] = 1;
        pad[r * s + t] = 0;
      }
    }
    // append(), not "b" + std::to_string(b): GCC 12 warns falsely (-Wrestrict) on that form.
    Executor& ex = executors.get(std::string("b").append(std::to_string(b)).append("s").append(std::to_string(s)),
                                 [&] { return build(b, s); });
    const std::pair<const char*, std::vector<int32_t>*> feed[] = {
        {"input_ids", &ids}, {"token_type_ids", &types}, {"key_padding_mask", &pad}, {"attention_mask", &mask}};
    const auto names = ex.input_names();
    for (auto& [name, values] : feed)
      if (std::find(names.begin(), names.end(), name) != names.end())
        ex.set_input(name, HostTensor::from_i32({b, s}, *values));
    ex.run();
    HostTensor e = ex.output("embedding");
    const auto* src = reinterpret_cast<const float*>(e.data());
    for (int64_t r = 0; r < count; ++r) {
      check_finite(src + r * d, order[first + r]);
      std::memcpy(dst + order[first + r] * d, src + r * d, sizeof(float) * d);
    }
  }
  return out;
}

SentenceEmbedder::SentenceEmbedder(std::unique_ptr<SentenceEmbedderImpl> impl) : impl_(std::move(impl)) {}
SentenceEmbedder::~SentenceEmbedder() = default;
SentenceEmbedder::SentenceEmbedder(SentenceEmbedder&&) noexcept = default;
SentenceEmbedder& SentenceEmbedder::operator=(SentenceEmbedder&&) noexcept = default;

SentenceEmbedderImpl& SentenceEmbedder::impl() const {
  return checked_impl(impl_, "SentenceEmbedder", "sentence embedder");
}

SentenceEmbedder SentenceEmbedder::load(Device device, const fs::path& dir, const EmbedderOptions& options) {
  const platform::PathStatus st = platform::path_status(dir, /*follow_links=*/true);
  std::string what = "model directory '";
  what += dir.string();
  what += '\'';
  if (!st.error.empty())  // a link loop, no permission: say so rather than "does not exist"
    throw Error(ErrorCode::io, what + ": cannot access: " + st.error);
  if (st.kind == platform::FileKind::missing) throw Error(ErrorCode::io, what + " does not exist");
  if (st.kind != platform::FileKind::directory) throw Error(ErrorCode::io, what + " is not a directory");
  if (!is_float(options.dtype))
    throw Error(ErrorCode::invalid_argument, "EmbedderOptions::dtype must be f32 or f16");
  return SentenceEmbedder(std::make_unique<SentenceEmbedderImpl>(std::move(device), dir, options));
}

HostTensor SentenceEmbedder::embed(std::span<const std::string> texts) {
  ExclusiveUse::Scope one_thread(impl().in_use, "SentenceEmbedder::embed");
  if (texts.empty()) throw Error(ErrorCode::invalid_argument, "SentenceEmbedder::embed: no texts given");
  std::vector<Sequence> seqs;
  seqs.reserve(texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    try {
      Encoding e = impl().tokenizer.encode(texts[i], static_cast<size_t>(impl().max_length));
      seqs.push_back({std::move(e.ids), std::move(e.type_ids)});
    } catch (const Error& e) {
      throw Error(e.code(), "SentenceEmbedder::embed: text " + std::to_string(i) + ": " + e.what());
    }
  }
  return impl().run(seqs);
}

HostTensor SentenceEmbedder::embed_ids(std::span<const std::vector<int32_t>> ids) {
  ExclusiveUse::Scope one_thread(impl().in_use, "SentenceEmbedder::embed_ids");
  const std::string call = "SentenceEmbedder::embed_ids: ";
  if (ids.empty()) throw Error(ErrorCode::invalid_argument, call + "no sequences given");
  std::vector<Sequence> seqs;
  for (size_t r = 0; r < ids.size(); ++r) {
    const int64_t len = static_cast<int64_t>(ids[r].size());
    if (len < 1 || len > impl().max_length)
      throw Error(ErrorCode::invalid_argument, call + "sequence " + std::to_string(r) + " has " +
                                                   std::to_string(len) + " ids; 1 to max_seq_length " +
                                                   std::to_string(impl().max_length) + " are allowed");
    for (size_t t = 0; t < ids[r].size(); ++t)
      if (ids[r][t] < 0 || ids[r][t] >= impl().bert.vocab_size)
        throw Error(ErrorCode::invalid_argument,
                    call + "sequence " + std::to_string(r) + ", position " + std::to_string(t) +
                        ": id " + std::to_string(ids[r][t]) + " is outside the vocabulary [0, " +
                        std::to_string(impl().bert.vocab_size) + ")");
    seqs.push_back({ids[r], std::vector<int32_t>(ids[r].size(), 0)});
  }
  return impl().run(seqs);
}

HostTensor SentenceEmbedder::embed_ids(const HostTensor& input_ids, const HostTensor& attention_mask,
                                       const HostTensor* token_type_ids) {
  ExclusiveUse::Scope one_thread(impl().in_use, "SentenceEmbedder::embed_ids");
  const std::string call = "SentenceEmbedder::embed_ids: ";
  auto check = [&](const HostTensor& t, const char* name) {
    if (t.dtype() != DType::i32 || t.shape().rank() != 2)
      throw Error(ErrorCode::shape_mismatch, call + name + " must be i32 [batch, seq], got " +
                                                 t.shape().str() + " " + std::string(dtype_name(t.dtype())));
    if (t.shape() != input_ids.shape())
      throw Error(ErrorCode::shape_mismatch, call + name + " is " + t.shape().str() +
                                                 ", input_ids is " + input_ids.shape().str());
  };
  check(input_ids, "input_ids");
  check(attention_mask, "attention_mask");
  if (token_type_ids) check(*token_type_ids, "token_type_ids");
  const int64_t n = input_ids.shape()[0], s = input_ids.shape()[1];
  if (n == 0 || s == 0) throw Error(ErrorCode::invalid_argument, call + "empty batch " + input_ids.shape().str());
  const auto ids = input_ids.to_i32(), mask = attention_mask.to_i32();
  const auto types = token_type_ids ? token_type_ids->to_i32() : std::vector<int32_t>(ids.size(), 0);
  const BertConfig& c = impl().bert;
  std::vector<Sequence> seqs(n);
  for (int64_t r = 0; r < n; ++r) {
    int64_t first = s, last = -1;
    for (int64_t t = 0; t < s; ++t)
      if (mask[r * s + t]) first = std::min(first, t), last = t;
    if (last < 0) throw Error(ErrorCode::invalid_argument, call + at(r) + " of attention_mask keeps no token");
    if (first != 0 || last + 1 != std::count_if(&mask[r * s], &mask[r * s] + s, [](int32_t m) { return m != 0; }))
      throw Error(ErrorCode::unsupported,
                  call + at(r) + " of attention_mask is not 1s then 0s (right padding); left or "
                                 "inner padding is not supported");
    if (last + 1 > impl().max_length)
      throw Error(ErrorCode::invalid_argument, call + at(r) + " keeps " + std::to_string(last + 1) +
                                                   " tokens, more than max_seq_length " +
                                                   std::to_string(impl().max_length));
    for (int64_t t = 0; t <= last; ++t) {
      const int32_t id = ids[r * s + t], type = types[r * s + t];
      if (id < 0 || id >= c.vocab_size)
        throw Error(ErrorCode::invalid_argument, call + "input_ids " + at(r) + ", position " +
                                                     std::to_string(t) + ": id " + std::to_string(id) +
                                                     " is outside [0, " + std::to_string(c.vocab_size) + ")");
      if (type < 0 || type >= c.type_vocab_size)
        throw Error(ErrorCode::invalid_argument, call + "token_type_ids " + at(r) + ", position " +
                                                     std::to_string(t) + ": " + std::to_string(type) +
                                                     " is outside [0, " + std::to_string(c.type_vocab_size) + ")");
      seqs[r].ids.push_back(id);
      seqs[r].type_ids.push_back(type);
    }
  }
  return impl().run(seqs);
}

const WordPieceTokenizer& SentenceEmbedder::tokenizer() const { return impl().tokenizer; }
int64_t SentenceEmbedder::dimension() const { return impl().bert.hidden_size; }
int64_t SentenceEmbedder::max_seq_length() const { return impl().max_length; }
PoolMode SentenceEmbedder::pooling() const { return impl().sentence.pooling; }
bool SentenceEmbedder::normalizes() const { return impl().sentence.normalize; }
DType SentenceEmbedder::dtype() const { return impl().options.dtype; }
size_t SentenceEmbedder::compiled_executors() const { return impl().executors.compiled(); }
Device& SentenceEmbedder::device() const { return impl().device; }

}  // namespace vkformer
