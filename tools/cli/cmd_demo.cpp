// `vkformer demo`: what vkformer does, on the chosen device:
//   1. semantic search with a real pretrained model (all-MiniLM-L6-v2, given by --embedding-model;
//      `make demo` fetches it with scripts/fetch_minilm.sh), checked against the embeddings
//      sentence-transformers computed for the same texts (tests/golden_embeddings);
// and, checked against an independent double-precision CPU reference:
//   2. multi-head masked self-attention as a graph (projection, head split, fused attention,
//      head concat, output projection), recorded once and replayed;
//   3. a whole encoder-decoder transformer (the original paper's seq2seq model): teacher-forced
//      log-probabilities, then greedy generation with a KV cache.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "cli.hpp"
#include "cli_options.hpp"
#include "io_util.hpp"
#include "llm_cli.hpp"
#include "reference_model.hpp"
#include "synthetic_weights.hpp"
#include "vkformer/embedder.hpp"
#include "vkformer/error.hpp"
#include "vkformer/io.hpp"
#include "vkformer/vkformer.hpp"

namespace vkformer::cli {

// What `vkformer demo --help` says first.
constexpr const char* kDemoHelp =
    "Run semantic search with all-MiniLM-L6-v2 (--embedding-model) against "
    "sentence-transformers' embeddings, then multi-head masked self-attention and a whole "
    "encoder-decoder transformer (forward pass and greedy generation) on the chosen device, "
    "compared with a double-precision CPU reference";

namespace {

using Clock = std::chrono::steady_clock;

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

struct Agreement {
  double max_abs = 0, scale = 0;
};

Agreement compare(const HostTensor& got, const ref::Vec& want) {
  Agreement e;
  auto g = got.to_f32();
  for (size_t i = 0; i < want.size(); ++i) {
    e.max_abs = std::max(e.max_abs, std::abs(g[i] - want[i]));
    e.scale = std::max(e.scale, std::abs(want[i]));
  }
  return e;
}

struct DemoArgs {
  std::string embedding_model;                 // "" = part 1 is not run
  std::string golden = "tests/golden_embeddings";  // texts.json + embeddings_f32.npy
  std::string llm_model;                       // "" = no chat answer (cmd_demo_llm.cpp)
  std::string llm_golden = "tests/golden_llama";
};

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// The demo corpus and queries are rows of the golden set (texts.json "demo": indices into
// "texts"), so every embedding shown has sentence-transformers' own next to it.
void embedding_demo(Device& device, const DemoArgs& args) {
  namespace fs = std::filesystem;
  const fs::path golden(args.golden);
  nlohmann::json texts_json;
  HostTensor want;
  try {
    const io::FileBytes texts_file = io::FileBytes::open(golden / "texts.json", /*try_map=*/false, 16u << 20);
    const auto bytes = texts_file.bytes();
    texts_json = nlohmann::json::parse(reinterpret_cast<const char*>(bytes.data()),
                                       reinterpret_cast<const char*>(bytes.data()) + bytes.size());
    want = read_npy(golden / "embeddings_f32.npy");
  } catch (const Error& e) {
    throw Error(e.code(), std::string("sentence-transformers' embeddings (--golden DIR; the default, "
                                      "tests/golden_embeddings, is relative to the current directory: the source tree): ") + e.what());
  }
  const auto& all = texts_json.at("texts");
  std::vector<size_t> corpus_rows = texts_json.at("demo").at("corpus").get<std::vector<size_t>>();
  std::vector<size_t> query_rows = texts_json.at("demo").at("queries").get<std::vector<size_t>>();
  std::vector<std::string> texts;
  for (size_t r : corpus_rows) texts.push_back(all.at(r).get<std::string>());
  for (size_t r : query_rows) texts.push_back(all.at(r).get<std::string>());

  auto t0 = Clock::now();
  SentenceEmbedder model = SentenceEmbedder::load(device, args.embedding_model);
  const double load_ms = ms_since(t0);
  const int64_t d = model.dimension();
  std::printf("\n1. Semantic search with a pretrained sentence-embedding model: all-MiniLM-L6-v2 "
              "(BERT, 6 layers, hidden 384, 12 heads), %zu sentences and %zu queries\n",
              corpus_rows.size(), query_rows.size());
  std::printf("   model: %s\n", args.embedding_model.c_str());
  if (want.shape().rank() != 2 || want.shape()[1] != d || want.dtype() != DType::f32 ||
      static_cast<size_t>(want.shape()[0]) != all.size())
    throw Error(ErrorCode::format, (golden / "embeddings_f32.npy").string() +
                                       ": expected f32 [texts, dimension] = " + "[" +
                                       std::to_string(all.size()) + "," + std::to_string(d) + "]");

  t0 = Clock::now();
  HostTensor e = model.embed(texts);  // compiles the executor of its shape bucket
  const double first_ms = ms_since(t0);
  t0 = Clock::now();
  e = model.embed(texts);  // replays it (one replay: a run takes ~0.7 s on lavapipe)
  const double replay_ms = ms_since(t0);
  const auto got = e.to_f32();
  const auto ref = want.to_f32();

  double max_diff = 0, min_cos = 1;
  auto row_of = [&](size_t i) { return i < corpus_rows.size() ? corpus_rows[i] : query_rows[i - corpus_rows.size()]; };
  for (size_t i = 0; i < texts.size(); ++i) {
    const float* a = &got[i * d];
    const float* b = &ref[row_of(i) * d];
    double dot = 0, aa = 0, bb = 0;
    for (int64_t k = 0; k < d; ++k) {
      max_diff = std::max(max_diff, static_cast<double>(std::abs(a[k] - b[k])));
      dot += double(a[k]) * b[k], aa += double(a[k]) * a[k], bb += double(b[k]) * b[k];
    }
    min_cos = std::min(min_cos, dot / std::sqrt(aa * bb));
  }

  // The embeddings are L2-normalized (the model's Normalize module), so a dot product is the cosine.
  const size_t n = corpus_rows.size();
  for (size_t q = 0; q < query_rows.size(); ++q) {
    const float* qv = &got[(n + q) * d];
    std::vector<double> score(n);
    for (size_t i = 0; i < n; ++i) {
      double dot = 0;
      for (int64_t k = 0; k < d; ++k) dot += double(qv[k]) * got[i * d + k];
      score[i] = dot;
    }
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return score[a] > score[b]; });
    std::printf("   query \"%s\"\n", texts[n + q].c_str());
    for (size_t r = 0; r < 3 && r < n; ++r)
      std::printf("     %.4f  %s\n", score[order[r]], texts[order[r]].c_str());
  }
  std::printf("   max |vkformer - sentence-transformers| = %.2e over %zu embeddings of %lld values "
              "(min cosine 1 - %.1e)\n",
              max_diff, texts.size(), static_cast<long long>(d), 1 - min_cos);
  std::printf("   time: load %.0f ms, first embedding of the %zu texts %.0f ms (with compilation), "
              "then %.0f ms (a replay, with tokenization and transfers)\n",
              load_ms, texts.size(), first_ms, replay_ms);
}

void attention_demo(Device& device) {
  const int64_t b = 2, s = 128, e = 256, h = 8, dh = e / h;
  std::printf("\n2. Multi-head masked self-attention: batch %lld, sequence %lld, d_model %lld, "
              "%lld heads, causal\n",
              (long long)b, (long long)s, (long long)e, (long long)h);
  const float bound = 1.0f / std::sqrt(static_cast<float>(e));
  auto x = ref::uniform_values(b * s * e, 1.0f, 1), w_in = ref::uniform_values(3 * e * e, bound, 2),
       b_in = ref::uniform_values(3 * e, 0.1f, 3), w_out = ref::uniform_values(e * e, bound, 4),
       b_out = ref::uniform_values(e, 0.1f, 5);

  Graph g;
  Tensor input = g.input("x", {b, s, e});
  Tensor qkv = g.linear(input, g.constant("in_proj_weight", HostTensor::from_f32({3 * e, e}, w_in)),
                        g.constant("in_proj_bias", HostTensor::from_f32({3 * e}, b_in)));
  AttentionOptions causal;
  causal.causal = true;
  Tensor heads = g.attention(g.split_heads(qkv, h, e, 0), g.split_heads(qkv, h, e, e),
                             g.split_heads(qkv, h, e, 2 * e), causal);
  g.output("y", g.linear(g.concat_heads(heads), g.constant("out_proj.weight", HostTensor::from_f32({e, e}, w_out)),
                         g.constant("out_proj.bias", HostTensor::from_f32({e}, b_out))));
  CompileOptions opts;
  opts.profile = device.info().timestamps;
  auto t0 = Clock::now();
  Executor ex(device, g, opts);
  double compile_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  ex.set_input("x", HostTensor::from_f32({b, s, e}, x));

  std::vector<double> wall, gpu;
  for (int i = 0; i < 20; ++i) {
    auto r0 = Clock::now();
    ex.run();
    wall.push_back(std::chrono::duration<double, std::milli>(Clock::now() - r0).count());
    double sum = 0;
    for (auto& op : ex.profile()) sum += op.microseconds;
    gpu.push_back(sum / 1000.0);
  }
  HostTensor y = ex.output("y");

  // The reference: the same math in double, op by op (reference/reference.cpp).
  ref::Vec xd(x.begin(), x.end()), wi(w_in.begin(), w_in.end()), bi(b_in.begin(), b_in.end()),
      wo(w_out.begin(), w_out.end()), bo(b_out.begin(), b_out.end());
  ref::Vec qkv_ref = ref::matmul(xd, wi, 1, 1, b * s, 3 * e, e, true, &bi, 1.0);
  ref::SoftmaxMasks m;
  m.scale = 1.0 / std::sqrt(static_cast<double>(dh));
  m.causal = true;
  ref::Vec att = ref::attention(ref::split_heads(qkv_ref, b, s, 3 * e, h, dh, 0),
                                ref::split_heads(qkv_ref, b, s, 3 * e, h, dh, e),
                                ref::split_heads(qkv_ref, b, s, 3 * e, h, dh, 2 * e), b, h, s, s, dh, dh, m);
  ref::Vec want = ref::matmul(ref::concat_heads(att, b, h, s, dh), wo, 1, 1, b * s, e, e, true, &bo, 1.0);
  Agreement err = compare(y, want);

  ExecutorStats st = ex.stats();
  std::printf("   graph: %zu dispatches; command buffer recorded %zu time(s), replayed %zu times "
              "(compiled in %.0f ms)\n",
              st.dispatches, st.recordings, st.runs, compile_ms);
  std::printf("   max |vkformer - CPU reference (fp64)| = %.2e   (output scale %.3f)\n", err.max_abs, err.scale);
  if (opts.profile)
    std::printf("   time per run: %.2f ms on the device (median of 20), %.2f ms wall clock with transfers\n",
                median_of(gpu), median_of(wall));
  else
    std::printf("   time per run: %.2f ms wall clock with transfers (median of 20)\n", median_of(wall));
}

void transformer_demo(Device& device) {
  const ModelConfig c = ref::demo_seq2seq_config();
  std::printf("\n3. Encoder-decoder transformer (the paper's seq2seq model): %lld+%lld layers, "
              "d_model %lld, %lld heads, feed-forward %lld, vocabularies %lld/%lld\n",
              (long long)c.num_encoder_layers, (long long)c.num_decoder_layers, (long long)c.d_model,
              (long long)c.nhead, (long long)c.dim_feedforward, (long long)c.src_vocab,
              (long long)c.tgt_vocab);
  auto weights = ref::synthetic_weights(c);
  Model model = Model::from_tensors(device, c, weights);
  ref::ReferenceModel reference(c, weights);

  // Teacher-forced log-probabilities of a batch.
  const int64_t b = 2, s = 16, t = 12;
  std::mt19937 rng(7);
  std::vector<int32_t> src(b * s), tgt(b * t);
  for (auto& v : src) v = static_cast<int32_t>(3 + rng() % (c.src_vocab - 3));
  for (auto& v : tgt) v = static_cast<int32_t>(3 + rng() % (c.tgt_vocab - 3));
  auto t0 = Clock::now();
  HostTensor logp = model.forward(HostTensor::from_i32({b, s}, src), HostTensor::from_i32({b, t}, tgt));
  double forward_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  Agreement err = compare(logp, reference.log_probs(src, tgt, b, s, t));
  std::printf("   log-probabilities [%lld, %lld, %lld]: max |vkformer - CPU reference (fp64)| = %.2e "
              "(scale %.2f), %.0f ms with compilation\n",
              (long long)b, (long long)t, (long long)c.tgt_vocab, err.max_abs, err.scale, forward_ms);

  // Greedy generation of one source sentence.
  std::vector<int32_t> sentence(src.begin(), src.begin() + s);
  GenerateOptions o;
  o.max_new_tokens = 24;
  o.eos = -1;
  model.generate(sentence, o);  // compiles the cached-decoder graphs
  auto tokens = model.generate(sentence, o);
  GenerationStats stats = model.last_generation_stats();
  double margin = 0;
  auto expected = reference.greedy(sentence, o.max_new_tokens, o.bos, o.eos, &margin);
  size_t same = 0;
  for (size_t i = 0; i < std::min(tokens.size(), expected.size()); ++i) same += tokens[i] == expected[i];
  std::printf("   greedy generation with a KV cache, %zu tokens: %zu/%zu identical to the CPU "
              "reference's uncached decoding (smallest top-2 gap %.1e)\n",
              tokens.size(), same, expected.size(), margin);
  std::printf("     vkformer :");
  for (auto v : tokens) std::printf(" %d", v);
  std::printf("\n     reference:");
  for (auto v : expected) std::printf(" %d", v);
  std::printf("\n   time: encoder + cross-attention keys/values %.2f ms, then %.2f ms per token "
              "(%zu tokens, every step a replay)\n",
              stats.encode_ms, stats.ms_per_token(), stats.steps);
}

}  // namespace

Command add_demo_command(CLI::App& app, const GlobalOptions& globals) {
  auto* sub = app.add_subcommand("demo", kDemoHelp);
  auto args = std::make_shared<DemoArgs>();
  sub->add_option("--embedding-model", args->embedding_model,
                  "all-MiniLM-L6-v2's directory, as scripts/fetch_minilm.sh prints it (make demo "
                  "passes it); without it the semantic search is left out")
      ->type_name("DIR");
  sub->add_option("--golden", args->golden,
                  "sentence-transformers' embeddings of the demo texts (default: "
                  "tests/golden_embeddings, from the source tree)")
      ->type_name("DIR");
  add_gguf_option(*sub, "--llm-model", args->llm_model,
                  "SmolLM2-135M-Instruct's GGUF, as scripts/fetch_smollm2.sh prints it (make demo "
                  "passes it): a greedy chat answer after the semantic search");
  sub->add_option("--llm-golden", args->llm_golden,
                  "The float64 reference's answers (default: tests/golden_llama)")
      ->type_name("DIR");
  return {sub, [&globals, args]() {
            Device device = Device::open(globals.device_options());
            const DeviceInfo& d = device.info();
            std::printf("vkformer demo on device %u: %s (%s, %s %s, Vulkan %s)\n", d.index,
                        d.name.c_str(), d.type.c_str(), d.driver_name.c_str(),
                        d.driver_info.c_str(), d.api_version.c_str());
            if (args->embedding_model.empty())
              std::printf("\n1. Semantic search with all-MiniLM-L6-v2: left out (no --embedding-model; "
                          "`make demo` fetches the model with scripts/fetch_minilm.sh and passes it)\n");
            else
              embedding_demo(device, *args);
            if (!args->llm_model.empty()) llm_demo(device, args->llm_model, args->llm_golden);
            attention_demo(device);
            transformer_demo(device);
            return report_validation(device) ? 1 : 0;
          }};
}

}  // namespace vkformer::cli
