// Sentence-embedding benchmarks: the real all-MiniLM-L6-v2 (BERT, 6 layers, hidden 384, 12 heads,
// ff 1536), from text ids to normalized embeddings as SentenceEmbedder runs it (the same graph:
// BertEncoder, pooling, L2 normalization, cast to f32), at batch 32 x 128 tokens (throughput) and
// batch 1 x 16 (latency); and, in the same run, the standalone matmuls at the model's own shapes
// (matmul/minilm.*), so the model's FLOP rate can be put next to the rate its matmuls reach alone.
//
// The weights come from scripts/fetch_minilm.sh's cache (or $VKFORMER_MINILM_DIR, as the tests
// take it). The bench never fetches: without the model the benchmarks are skipped, saying so.
#include <cstdlib>
#include <filesystem>
#include <random>

#include "bert/bert_config.hpp"  // src/models
#include "bert/bert_encoder.hpp"
#include "bert/bert_weights.hpp"
#include "internal.hpp"
#include "sentence_config.hpp"
#include "vkformer/error.hpp"

namespace vkformer::bench {

namespace {

namespace fs = std::filesystem;

// all-MiniLM-L6-v2's shapes, for the FLOP counts made before anything is loaded; prepare()
// checks the config.json it loads against them.
constexpr int64_t kHidden = 384, kFf = 1536, kLayers = 6, kHeads = 12, kVocab = 30522;

// Where scripts/fetch_minilm.sh installs the model: ${VKFORMER_CACHE_DIR:-${XDG_CACHE_HOME:-
// $HOME/.cache}/vkformer}/all-MiniLM-L6-v2/model, or $VKFORMER_MINILM_DIR when set.
fs::path minilm_dir() {
  auto env = [](const char* name) -> std::string {
    const char* v = std::getenv(name);
    return v && *v ? v : "";
  };
  if (std::string d = env("VKFORMER_MINILM_DIR"); !d.empty()) return d;
  fs::path cache = env("VKFORMER_CACHE_DIR");
  if (cache.empty()) {
    fs::path base = env("XDG_CACHE_HOME");
    if (base.empty()) base = fs::path(env("HOME")) / ".cache";
    cache = base / "vkformer";
  }
  return cache / "all-MiniLM-L6-v2" / "model";
}

void require_model(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_regular_file(dir / "model.safetensors", ec))
    throw Error(ErrorCode::unsupported, "run scripts/fetch_minilm.sh: all-MiniLM-L6-v2 is not in " +
                                            dir.string() + " (vkformer bench does not fetch it)");
}

// Multiply-adds of one token through one layer's four projections, times 2.
constexpr double kLinearFlopsPerToken = 2.0 * (4.0 * kHidden * kHidden + 2.0 * kHidden * kFf);

// The whole model on `batch` sequences of `seq` tokens, none of them padding.
Benchmark sentence_embedding(int64_t batch, int64_t seq, DType dt, bool quick) {
  Benchmark b;
  b.name = "sentence_embedding";
  b.variant = "all-MiniLM-L6-v2";
  b.shape = {{"batch", batch}, {"seq", seq}};
  b.params = {{"model", "sentence-transformers/all-MiniLM-L6-v2 (scripts/fetch_minilm.sh)"},
              {"graph", "SentenceEmbedder's: BERT encoder, mean pooling, L2 normalization"},
              {"attention", "automatic"}};
  b.dtype = dt;
  const double tokens = double(batch) * seq;
  // Projections and attention (Q·Kᵀ and P·V); embeddings, norms and pooling are not counted.
  b.flops = kLayers * (tokens * kLinearFlopsPerToken + 4.0 * batch * double(seq) * seq * kHidden);
  b.bytes = (kLayers * (4.0 * kHidden * kHidden + 2.0 * kHidden * kFf) + 2.0 * tokens * kHidden) *
            dtype_size(dt);
  b.quick = quick;
  // Its matmuls reach ~45% of the FMA peak on lavapipe; without this the runner would assume
  // 10% and skip batch 32 x 128 as "over 5 s" there.
  b.expected_fraction = 0.3;
  b.check = [](Device&) { require_model(minilm_dir()); };
  b.prepare = [=](Device& d) {
    const fs::path dir = minilm_dir();
    require_model(dir);
    const models::SentenceConfig sc = models::SentenceConfig::load(dir);
    const models::bert::BertConfig c = models::bert::BertConfig::load(sc.encoder_dir / "config.json");
    if (c.hidden_size != kHidden || c.intermediate_size != kFf || c.num_hidden_layers != kLayers ||
        c.num_attention_heads != kHeads)
      throw Error(ErrorCode::format, (sc.encoder_dir / "config.json").string() +
                                         ": not all-MiniLM-L6-v2's shapes (hidden 384, ff 1536, 6 "
                                         "layers, 12 heads), which this benchmark's FLOPs count");
    if (seq > c.max_position_embeddings)
      throw Error(ErrorCode::unsupported, "sequence " + std::to_string(seq) + " is beyond the model's " +
                                              std::to_string(c.max_position_embeddings) + " positions");
    const models::WeightStore w =
        models::bert::load_weights(d, c, sc.encoder_dir / "model.safetensors", dt);
    // Token ids: [CLS], words from the vocabulary's ordinary range, [SEP]; a fixed seed.
    std::mt19937 rng(42);
    std::uniform_int_distribution<int32_t> word(1996, static_cast<int32_t>(std::min<int64_t>(c.vocab_size, kVocab) - 1));
    std::vector<int32_t> ids(batch * seq);
    for (int64_t r = 0; r < batch; ++r)
      for (int64_t t = 0; t < seq; ++t) ids[r * seq + t] = t == 0 ? 101 : t == seq - 1 ? 102 : word(rng);
    const Shape s{batch, seq};
    Graph g;
    models::bert::BertInputs in{
        g.external("input_ids", d.upload(HostTensor::from_i32(s, ids))),
        g.external("token_type_ids", d.upload(HostTensor::from_i32(s, std::vector<int32_t>(batch * seq, 0)))),
        g.external("key_padding_mask", d.upload(HostTensor::from_i32(s, std::vector<int32_t>(batch * seq, 0))))};
    Tensor mask = g.external("attention_mask", d.upload(HostTensor::from_i32(s, std::vector<int32_t>(batch * seq, 1))));
    models::bert::BertEncoder encoder(g, c, w, AttentionOptions::Path::automatic);
    Tensor pooled = g.pool(encoder.build(in), mask, sc.pooling);
    if (sc.normalize) pooled = g.l2_normalize(pooled);
    return compile(d, g, g.cast(pooled, DType::f32));
  };
  return b;
}

}  // namespace

std::vector<Benchmark> embedding_benchmarks() {
  std::vector<Benchmark> list;
  const DType dtypes[] = {DType::f32, DType::f16};
  // The model's four projections as nn.Linear runs them (weight [n, k], bias), over the tokens of
  // each benchmarked batch: what the model's matmuls would reach alone.
  for (DType dt : dtypes)
    for (int64_t tokens : {32 * 128, 1 * 16}) {
      list.push_back(linear_matmul("minilm.qkv", tokens, 3 * kHidden, kHidden, dt));
      list.push_back(linear_matmul("minilm.out", tokens, kHidden, kHidden, dt));
      list.push_back(linear_matmul("minilm.ffn1", tokens, kFf, kHidden, dt));
      list.push_back(linear_matmul("minilm.ffn2", tokens, kHidden, kFf, dt));
    }
  for (DType dt : dtypes) {
    list.push_back(sentence_embedding(32, 128, dt, false));
    list.push_back(sentence_embedding(1, 16, dt, dt == DType::f32));
  }
  return list;
}

}  // namespace vkformer::bench
