#include "cached_decoder.hpp"

namespace vkformer::models {

CachedDecoder::CachedDecoder(ModelImpl& m, int64_t rows, int64_t src_len, int64_t max_steps)
    : model_(m), rows_(rows), src_len_(src_len), max_steps_(max_steps) {
  const ModelConfig& c = m.config;
  const DType dt = m.options.dtype;
  const int64_t h = c.nhead, dh = c.d_model / c.nhead, layers = c.num_decoder_layers;
  for (int64_t l = 0; l < layers; ++l) {
    self_k_.push_back(m.device.allocate({rows, h, max_steps, dh}, dt));
    self_v_.push_back(m.device.allocate({rows, h, max_steps, dh}, dt));
    cross_k_.push_back(m.device.allocate({rows, h, src_len, dh}, dt));
    cross_v_.push_back(m.device.allocate({rows, h, src_len, dh}, dt));
  }
  auto layer = [](int64_t l) { return "transformer.decoder.layers." + std::to_string(l); };

  {  // prepare: encoder, then each layer's cross-attention K/V straight into its cache
    Graph g;
    BlockBuilder b(g, c, m.weights, m.options.attention);
    Tensor memory = b.encoder_stack("transformer.encoder.",
                                    b.embed("src_embed.weight", g.input("src", {rows, src_len}, DType::i32)),
                                    {});
    for (int64_t l = 0; l < layers; ++l) {
      auto [k, v] = b.cross_keys_values(layer(l) + ".multihead_attn", memory);
      g.output_to(k, g.external("cross_k" + std::to_string(l), cross_k_[l]));
      g.output_to(v, g.external("cross_v" + std::to_string(l), cross_v_[l]));
    }
    prepare_ = std::make_unique<Executor>(m.device, g);
  }
  {  // step: one token per row at `position`, attending `key_length` cached positions
    Graph g;
    BlockBuilder b(g, c, m.weights, m.options.attention);
    Tensor position = g.input("position", {1}, DType::i32);
    Tensor key_length = g.input("key_length", {1}, DType::i32);
    Tensor x = b.embed("tgt_embed.weight", g.input("tokens", {rows, 1}, DType::i32), position);
    std::vector<LayerCache> caches;
    std::vector<std::pair<Tensor, Tensor>> cross;
    for (int64_t l = 0; l < layers; ++l) {
      std::string n = std::to_string(l);
      caches.push_back({g.external("self_k" + n, self_k_[l]), g.external("self_v" + n, self_v_[l])});
      cross.emplace_back(g.external("cross_k" + n, cross_k_[l]), g.external("cross_v" + n, cross_v_[l]));
    }
    Tensor y = b.decoder_stack_step("transformer.decoder.", x, caches, cross, position, key_length);
    g.output("log_probs", b.generator(y));
    step_ = std::make_unique<Executor>(m.device, g);
  }
  if (rows > 1) {  // reorder: cache row r <- row parents[r], through a temporary
    Graph g;
    Tensor parents = g.input("parents", {rows}, DType::i32);
    auto gather = [&](const std::string& name, const DeviceTensor& cache) {
      Tensor t = g.external(name, cache);
      Tensor flat = g.reshape(t, {rows, t.shape.numel() / rows});
      g.output_to(g.copy(g.reshape(g.embedding(parents, flat), t.shape)), t);
    };
    for (int64_t l = 0; l < layers; ++l) {
      gather("self_k" + std::to_string(l), self_k_[l]);
      gather("self_v" + std::to_string(l), self_v_[l]);
    }
    reorder_ = std::make_unique<Executor>(m.device, g);
  }
}

void CachedDecoder::prepare(const HostTensor& src_ids) {
  prepare_->set_input("src", src_ids);
  prepare_->run();
}

std::vector<float> CachedDecoder::step(const std::vector<int32_t>& tokens, int64_t position) {
  step_->set_input("tokens", HostTensor::from_i32({rows_, 1}, tokens));
  step_->set_input("position", HostTensor::from_i32({1}, std::vector<int32_t>{static_cast<int32_t>(position)}));
  step_->set_input("key_length",
                   HostTensor::from_i32({1}, std::vector<int32_t>{static_cast<int32_t>(position + 1)}));
  step_->run();
  return step_->output("log_probs").to_f32();
}

void CachedDecoder::reorder(const std::vector<int32_t>& parents) {
  if (!reorder_) return;
  reorder_->set_input("parents", HostTensor::from_i32({rows_}, parents));
  reorder_->run();
}

}  // namespace vkformer::models
