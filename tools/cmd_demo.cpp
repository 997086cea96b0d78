// `vkformer demo`: what vkformer does, on the chosen device, checked against an independent
// double-precision CPU reference:
//   1. multi-head masked self-attention as a graph (projection, head split, fused attention,
//      head concat, output projection), recorded once and replayed;
//   2. a whole encoder-decoder transformer (the original paper's seq2seq model): teacher-forced
//      log-probabilities, then greedy generation with a KV cache.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>

#include "cli.hpp"
#include "reference_model.hpp"
#include "synthetic_weights.hpp"
#include "vkformer/vkformer.hpp"

namespace vkformer::cli {

namespace {

using Clock = std::chrono::steady_clock;

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

std::vector<float> uniform(size_t n, float bound, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-bound, bound);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
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

void attention_demo(Device& device) {
  const int64_t b = 2, s = 128, e = 256, h = 8, dh = e / h;
  std::printf("\n1. Multi-head masked self-attention: batch %lld, sequence %lld, d_model %lld, "
              "%lld heads, causal\n",
              (long long)b, (long long)s, (long long)e, (long long)h);
  const float bound = 1.0f / std::sqrt(static_cast<float>(e));
  auto x = uniform(b * s * e, 1.0f, 1), w_in = uniform(3 * e * e, bound, 2), b_in = uniform(3 * e, 0.1f, 3),
       w_out = uniform(e * e, bound, 4), b_out = uniform(e, 0.1f, 5);

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
  ModelConfig c;
  c.arch = ModelConfig::Arch::seq2seq;
  c.d_model = 128;
  c.nhead = 4;
  c.dim_feedforward = 512;
  c.num_encoder_layers = 2;
  c.num_decoder_layers = 2;
  c.src_vocab = 1000;
  c.tgt_vocab = 1000;
  c.max_len = 256;
  c.final_norm = true;
  std::printf("\n2. Encoder-decoder transformer (the paper's seq2seq model): %lld+%lld layers, "
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
  auto* sub = app.add_subcommand(
      "demo",
      "Run multi-head masked self-attention and a whole encoder-decoder transformer (forward "
      "pass and greedy generation) on the chosen device, and compare both with a "
      "double-precision CPU reference");
  return {sub, [&globals]() {
            Device device = Device::open(globals.device_options());
            const DeviceInfo& d = device.info();
            std::printf("vkformer demo on device %u: %s (%s, %s %s, Vulkan %s)\n", d.index,
                        d.name.c_str(), d.type.c_str(), d.driver_name.c_str(),
                        d.driver_info.c_str(), d.api_version.c_str());
            attention_demo(device);
            transformer_demo(device);
            return report_validation(device) ? 1 : 0;
          }};
}

}  // namespace vkformer::cli
