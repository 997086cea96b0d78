// Model: weights loaded once onto the device; one compiled graph per input shape for encode,
// decode and forward, with PyTorch's argument conventions and checks that name the argument.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <set>
#include <tuple>

#include "../io/io_util.hpp"
#include "cached_decoder.hpp"
#include "checked_impl.hpp"
#include "file_access.hpp"
#include "model_impl.hpp"
#include "utf8_path.hpp"
#include "vkformer/error.hpp"
#include "vkformer/half.hpp"
#include "vkformer/io.hpp"

namespace vkformer {

using models::AttentionMasks;
using models::BlockBuilder;

namespace {

std::string list(const std::vector<std::string>& names, size_t max = 8) {
  std::string s;
  for (size_t i = 0; i < names.size() && i < max; ++i) s += (i ? ", " : "") + names[i];
  if (names.size() > max) s += ", ... (" + std::to_string(names.size() - max) + " more)";
  return s;
}

// Where the file's names are the expected ones with a prefix too many or too few (a lone layer
// saved without "layers.0.", a stack saved from inside a bigger module), says which prefix.
template <typename Have>
std::string prefix_hint(const std::vector<std::string>& missing, const Have& have) {
  const std::string& want = missing.front();
  for (auto& [name, info] : have) {
    if (name.size() > want.size() && name.ends_with(want) && name[name.size() - want.size() - 1] == '.')
      return ". The file's names carry a prefix this config does not expect: '" +
             name.substr(0, name.size() - want.size()) + "' (as in '" + name +
             "'); save the state_dict of the module that matches \"arch\", or strip the prefix";
    if (want.size() > name.size() && want.ends_with(name) && want[want.size() - name.size() - 1] == '.') {
      std::string prefix = want.substr(0, want.size() - name.size());
      return ". The file's names lack the prefix '" + prefix + "' (it has '" + name + "')" +
             (prefix.ends_with("layers.0.")
                  ? ": a single layer saved alone? Save it as a stack of one layer, its names "
                    "prefixed with 'layers.0.' (tools/export_torch.py does this)"
                  : "");
    }
  }
  return "";
}

// Rows [begin, end) of a 1-D or 2-D host tensor.
HostTensor rows(const HostTensor& t, int64_t begin, int64_t end) {
  Shape s = t.shape().rank() == 1 ? Shape{end - begin} : Shape{end - begin, t.shape()[1]};
  HostTensor out(s, t.dtype());
  size_t row_bytes = t.nbytes() / static_cast<size_t>(t.shape()[0]);
  std::memcpy(out.data(), t.data() + begin * row_bytes, out.nbytes());
  return out;
}

bool loadable_dtype(const std::string& d) { return d == "F32" || d == "F16" || d == "BF16"; }

// An f16 model stores its weights in f16: a finite weight beyond f16's range would become an
// infinity there (and NaN outputs), so it is an error that names it.
void require_half_range(const HostTensor& weights, const std::string& source, const std::string& name) {
  const auto* v = reinterpret_cast<const float*>(weights.data());
  for (int64_t i = 0; i < weights.numel(); ++i)
    if (std::isfinite(v[i]) && std::isinf(half_to_float(float_to_half(v[i]))))
      throw Error(ErrorCode::unsupported,
                  source + ": tensor '" + name + "' holds " + std::to_string(v[i]) + " at element " +
                      std::to_string(i) + ", beyond float16's largest value 65504: load this model "
                      "with dtype f32");
}

[[noreturn]] void bad_argument(const std::string& call, const std::string& what) {
  throw Error(ErrorCode::shape_mismatch, call + ": " + what);
}

// Checks that `t` is [dims...] where -1 matches anything; `what` names it in the message.
void expect_shape(const std::string& call, const char* what, const HostTensor& t,
                  std::vector<int64_t> dims, const char* layout) {
  bool ok = t.shape().rank() == static_cast<int>(dims.size());
  for (size_t i = 0; ok && i < dims.size(); ++i) ok = dims[i] < 0 || t.shape()[static_cast<int>(i)] == dims[i];
  if (!ok) {
    std::string want = "[";
    for (size_t i = 0; i < dims.size(); ++i) {
      if (i) want += ",";
      want += dims[i] < 0 ? std::string("?") : std::to_string(dims[i]);
    }
    bad_argument(call, std::string(what) + " must be " + layout + " " + want + "], got " + t.shape().str());
  }
}

void expect_float(const std::string& call, const char* what, const HostTensor& t) {
  if (!is_float(t.dtype()))
    bad_argument(call, std::string(what) + " must be float32 or float16, got " +
                           std::string(dtype_name(t.dtype())));
}

void expect_ids(const std::string& call, const char* what, const HostTensor& t) {
  if (t.dtype() != DType::i32)
    bad_argument(call, std::string(what) + " must hold integer token ids, got " +
                           std::string(dtype_name(t.dtype())));
}

// Boolean masks arrive as i32 0/1: for additive masks nonzero becomes -inf.
HostTensor additive_mask(const HostTensor& m, DType dtype) {
  if (is_float(m.dtype())) return m.cast(dtype);
  auto v = m.to_i32();
  std::vector<float> f(v.size());
  for (size_t i = 0; i < v.size(); ++i) f[i] = v[i] ? -std::numeric_limits<float>::infinity() : 0.0f;
  return HostTensor::from_f32(m.shape(), f, dtype);
}

// The masks of one attention as graph inputs, plus what to feed them.
struct MaskInputs {
  const std::string& call;
  Graph& g;
  Feed& feed;
  DType dtype;
  std::string key;  // which masks are present, for the executor key

  std::optional<Tensor> additive(const char* name, const std::optional<HostTensor>& m, int64_t sq,
                                 int64_t sk) {
    if (!m) return {};
    expect_shape(call, name, *m, {sq, sk}, "[target, source]");
    feed.emplace_back(name, additive_mask(*m, dtype));
    key += std::string(name) + ";";
    return g.input(name, {sq, sk}, dtype);
  }
  std::optional<Tensor> padding(const char* name, const std::optional<HostTensor>& m, int64_t b,
                                int64_t s) {
    if (!m) return {};
    expect_shape(call, name, *m, {b, s}, "[batch, seq]");
    if (m->dtype() != DType::i32)
      bad_argument(call, std::string(name) + " must be boolean (true = ignore), got " +
                             std::string(dtype_name(m->dtype())));
    feed.emplace_back(name, *m);
    key += std::string(name) + ";";
    return g.input(name, {b, s}, DType::i32);
  }
};

}  // namespace

ModelImpl::ModelImpl(Device d, ModelConfig c, ModelOptions o)
    : device(std::move(d)), config(std::move(c)), options(o) {
  if (!is_float(options.dtype))
    throw Error(ErrorCode::invalid_argument, "model dtype must be f32 or f16");
}

ModelImpl::~ModelImpl() = default;

void ModelImpl::load_weights(
    const std::vector<std::tuple<std::string, std::string, Shape>>& available,
    const std::function<HostTensor(const std::string&, DType)>& read, const std::string& source) {
  auto expected = parameter_shapes(config);
  std::map<std::string, std::pair<std::string, Shape>> have;
  for (auto& [name, dtype, shape] : available) have[name] = {dtype, shape};
  std::vector<std::string> missing, extra;
  std::set<std::string> wanted;
  for (auto& [name, shape] : expected) {
    wanted.insert(name);
    if (!have.count(name)) missing.push_back(name);
  }
  for (auto& [name, info] : have)
    if (!wanted.count(name)) extra.push_back(name);
  const std::string arch = ModelConfig::arch_name(config.arch);
  const std::string a_arch = (config.arch == ModelConfig::Arch::encoder ? "an " : "a ") + arch;
  if (!missing.empty())
    throw Error(ErrorCode::format, source + " lacks " + std::to_string(missing.size()) +
                                       " tensor(s) that " + a_arch + " with this config has: " +
                                       list(missing) + prefix_hint(missing, have));
  if (!extra.empty())
    throw Error(ErrorCode::format, source + " has " + std::to_string(extra.size()) +
                                       " tensor(s) that " + a_arch +
                                       " with this config does not have: " + list(extra));
  for (auto& [name, shape] : expected) {
    auto& [dtype, got] = have[name];
    if (got != shape)
      throw Error(ErrorCode::format, source + ": tensor '" + name + "' has shape " + got.str() +
                                         ", expected " + shape.str() + " for this config");
    if (!loadable_dtype(dtype))
      throw Error(ErrorCode::format, source + ": tensor '" + name + "' has dtype " + dtype +
                                         ", expected F32, F16 or BF16");
  }
  const int64_t e = config.d_model;
  for (auto& [name, shape] : expected) {
    HostTensor t = read(name, options.dtype == DType::f16 ? DType::f32 : options.dtype);
    if (options.dtype == DType::f16) {
      require_half_range(t, source, name);
      t = t.cast(DType::f16);
    }
    // Cross-attention takes Q from the decoder and K, V from the memory: keep both parts.
    if (name.find("multihead_attn.in_proj_") != std::string::npos) {
      std::string base = name.substr(0, name.rfind(".in_proj_"));
      bool weight = name.ends_with("weight");
      weights.add(base + (weight ? ".q_weight" : ".q_bias"), device.upload(rows(t, 0, e)));
      weights.add(base + (weight ? ".kv_weight" : ".kv_bias"), device.upload(rows(t, e, 3 * e)));
    }
    weights.add(name, device.upload(t));
  }
}

Executor& ModelImpl::executor(const std::string& key, const std::function<Graph()>& build) {
  auto it = executors.find(key);
  if (it != executors.end()) return *it->second;
  Graph g = build();
  auto ex = std::make_unique<Executor>(device, g);
  return *(executors[key] = std::move(ex));
}

HostTensor ModelImpl::run(Executor& ex, const Feed& feed) {
  for (auto& [name, value] : feed) ex.set_input(name, value);
  ex.run();
  return ex.output("out");
}

Model::Model(std::unique_ptr<ModelImpl> impl) : impl_(std::move(impl)) {}
Model::~Model() = default;
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;

ModelImpl& Model::impl() const { return checked_impl(impl_, "Model", "model"); }

Model Model::load(Device device, const std::string& dir, const ModelOptions& options) {
  namespace fs = std::filesystem;
  fs::path root = platform::path_from_utf8(dir);  // UTF-8 on every platform
  // A link loop or a name the system refuses is a bad path, not a crash.
  const platform::PathStatus st = platform::path_status(root, /*follow_links=*/true);
  if (st.kind != platform::FileKind::directory)
    throw Error(ErrorCode::io, "model directory '" + dir + "' " +
                                   (!st.error.empty()                        ? "cannot be reached: " + st.error
                                    : st.kind == platform::FileKind::missing ? "does not exist"
                                                                             : "is not a directory"));
  ModelConfig config = ModelConfig::load((root / "config.json").string());
  fs::path weights_path = root / "model.safetensors";
  io::check_regular_file(weights_path);
  SafetensorsFile file(weights_path);
  std::vector<std::tuple<std::string, std::string, Shape>> available;
  for (auto& entry : file.entries()) available.emplace_back(entry.name, entry.dtype, entry.shape);
  auto impl = std::make_unique<ModelImpl>(std::move(device), config, options);
  impl->load_weights(available, [&](const std::string& n, DType t) { return file.read(n, t); },
                     weights_path.string());
  return Model(std::move(impl));
}

Model Model::from_tensors(Device device, const ModelConfig& config,
                          const std::map<std::string, HostTensor>& tensors,
                          const ModelOptions& options) {
  std::vector<std::tuple<std::string, std::string, Shape>> available;
  for (auto& [name, t] : tensors)
    available.emplace_back(name, t.dtype() == DType::f16 ? "F16" : t.dtype() == DType::f32 ? "F32" : "I32",
                           t.shape());
  auto impl = std::make_unique<ModelImpl>(std::move(device), config, options);
  impl->load_weights(available, [&](const std::string& n, DType t) { return tensors.at(n).cast(t); },
                     "the given tensors");
  return Model(std::move(impl));
}

const ModelConfig& Model::config() const { return impl().config; }
DType Model::dtype() const { return impl().options.dtype; }
Device& Model::device() const { return impl().device; }
GenerationStats Model::last_generation_stats() const { return impl().stats; }
size_t Model::compiled_graphs() const {
  return impl().executors.size() + impl().decoders.size() * 3;  // prepare, step, reorder
}

namespace {

std::string shape_key(const HostTensor& t) { return t.shape().str(); }

// The encoder-side input: embedded ids for seq2seq, features otherwise.
Tensor source_input(BlockBuilder& b, Graph& g, const ModelConfig& c, const HostTensor& src, DType dt) {
  if (c.arch == ModelConfig::Arch::seq2seq)
    return b.embed("src_embed.weight", g.input("src", src.shape(), DType::i32));
  return g.input("src", src.shape(), dt);
}

Tensor target_input(BlockBuilder& b, Graph& g, const ModelConfig& c, const HostTensor& tgt, DType dt) {
  if (c.arch == ModelConfig::Arch::seq2seq)
    return b.embed("tgt_embed.weight", g.input("tgt", tgt.shape(), DType::i32));
  return g.input("tgt", tgt.shape(), dt);
}

const char* encoder_prefix(const ModelConfig& c) {
  switch (c.arch) {
    case ModelConfig::Arch::transformer: return "encoder.";
    case ModelConfig::Arch::seq2seq: return "transformer.encoder.";
    default: return "";
  }
}

const char* decoder_prefix(const ModelConfig& c) {
  switch (c.arch) {
    case ModelConfig::Arch::transformer: return "decoder.";
    case ModelConfig::Arch::seq2seq: return "transformer.decoder.";
    default: return "";
  }
}

void check_source(const std::string& call, const ModelConfig& c, const HostTensor& src) {
  if (c.arch == ModelConfig::Arch::seq2seq) {
    expect_ids(call, "src", src);
    expect_shape(call, "src", src, {-1, -1}, "[batch, seq] ids");
  } else {
    expect_float(call, "src", src);
    expect_shape(call, "src", src, {-1, -1, c.d_model}, "[batch, seq, d_model]");
  }
}

void check_target(const std::string& call, const ModelConfig& c, const HostTensor& tgt) {
  if (c.arch == ModelConfig::Arch::seq2seq) {
    expect_ids(call, "tgt", tgt);
    expect_shape(call, "tgt", tgt, {-1, -1}, "[batch, seq] ids");
  } else {
    expect_float(call, "tgt", tgt);
    expect_shape(call, "tgt", tgt, {-1, -1, c.d_model}, "[batch, seq, d_model]");
  }
}

// A mask the call has no attention for is a mistake to report, not one to ignore.
void reject_masks(const std::string& call, const ModelMasks& masks, bool source_side, const char* takes) {
  const std::pair<const char*, bool> given[] = {
      {"src_mask", masks.src_mask.has_value()},
      {"src_key_padding_mask", masks.src_key_padding_mask.has_value()},
      {"tgt_mask", masks.tgt_mask.has_value()},
      {"tgt_key_padding_mask", masks.tgt_key_padding_mask.has_value()},
      {"memory_mask", masks.memory_mask.has_value()},
      {"memory_key_padding_mask", masks.memory_key_padding_mask.has_value()}};
  for (size_t i = 0; i < std::size(given); ++i) {
    const bool is_source = i < 2;
    if (given[i].second && is_source != source_side)
      throw Error(ErrorCode::invalid_argument, call + ": " + given[i].first + " does not apply here; " +
                                                   call + " takes " + takes);
  }
}

}  // namespace

HostTensor Model::encode(const HostTensor& src, const ModelMasks& masks) {
  const std::string call = "Model::encode";
  ExclusiveUse::Scope one_thread(impl().in_use, "Model::encode");
  const ModelConfig& c = impl().config;
  if (!c.has_encoder())
    throw Error(ErrorCode::invalid_argument, call + ": a decoder model has no encoder");
  reject_masks(call, masks, true, "src_mask and src_key_padding_mask");
  check_source(call, c, src);
  const int64_t b = src.shape()[0], s = src.shape()[1];
  const DType dt = impl().options.dtype;
  Feed feed{{"src", src}};
  // Graph construction happens only for a new key, but the feed is built every call.
  Graph g;
  MaskInputs in{call, g, feed, dt};
  AttentionMasks self{masks.causal, in.additive("src_mask", masks.src_mask, s, s),
                      in.padding("src_key_padding_mask", masks.src_key_padding_mask, b, s)};
  std::string key = "encode" + shape_key(src) + (masks.causal ? "causal;" : "") + in.key;
  Executor& ex = impl().executor(key, [&] {
    BlockBuilder blocks(g, c, impl().weights, impl().options.attention);
    g.output("out", blocks.encoder_stack(encoder_prefix(c), source_input(blocks, g, c, src, dt), self));
    return std::move(g);
  });
  return impl().run(ex, feed);
}

HostTensor Model::decode(const HostTensor& tgt, const HostTensor& memory, const ModelMasks& masks) {
  const std::string call = "Model::decode";
  ExclusiveUse::Scope one_thread(impl().in_use, "Model::decode");
  const ModelConfig& c = impl().config;
  if (!c.has_decoder())
    throw Error(ErrorCode::invalid_argument, call + ": an encoder model has no decoder");
  reject_masks(call, masks, false,
               "tgt_mask, tgt_key_padding_mask, memory_mask and memory_key_padding_mask");
  check_target(call, c, tgt);
  expect_float(call, "memory", memory);
  expect_shape(call, "memory", memory, {tgt.shape()[0], -1, c.d_model}, "[batch, source seq, d_model]");
  const int64_t b = tgt.shape()[0], t = tgt.shape()[1], s = memory.shape()[1];
  const DType dt = impl().options.dtype;
  const bool s2s = c.arch == ModelConfig::Arch::seq2seq;
  Feed feed{{"tgt", tgt}, {"memory", memory}};
  Graph g;
  MaskInputs in{call, g, feed, dt};
  AttentionMasks self{masks.causal || s2s, in.additive("tgt_mask", masks.tgt_mask, t, t),
                      in.padding("tgt_key_padding_mask", masks.tgt_key_padding_mask, b, t)};
  AttentionMasks cross{false, in.additive("memory_mask", masks.memory_mask, t, s),
                       in.padding("memory_key_padding_mask", masks.memory_key_padding_mask, b, s)};
  std::string key = "decode" + shape_key(tgt) + shape_key(memory) + (self.causal ? "causal;" : "") + in.key;
  Executor& ex = impl().executor(key, [&] {
    BlockBuilder blocks(g, c, impl().weights, impl().options.attention);
    Tensor mem = g.input("memory", memory.shape(), dt);
    Tensor y = blocks.decoder_stack(decoder_prefix(c), target_input(blocks, g, c, tgt, dt), mem, self, cross);
    g.output("out", s2s ? blocks.generator(y) : y);
    return std::move(g);
  });
  return impl().run(ex, feed);
}

HostTensor Model::forward(const HostTensor& src, const HostTensor& tgt, const ModelMasks& masks) {
  const std::string call = "Model::forward";
  ExclusiveUse::Scope one_thread(impl().in_use, "Model::forward");
  const ModelConfig& c = impl().config;
  const bool s2s = c.arch == ModelConfig::Arch::seq2seq;
  if (c.arch != ModelConfig::Arch::transformer && !s2s)
    throw Error(ErrorCode::invalid_argument,
                call + ": needs a transformer or seq2seq model; use encode() or decode()");
  check_source(call, c, src);
  check_target(call, c, tgt);
  if (src.shape()[0] != tgt.shape()[0])
    bad_argument(call, "src and tgt batch sizes differ: " + src.shape().str() + " vs " + tgt.shape().str());
  const int64_t b = src.shape()[0], s = src.shape()[1], t = tgt.shape()[1];
  const DType dt = impl().options.dtype;
  Feed feed{{"src", src}, {"tgt", tgt}};
  Graph g;
  MaskInputs in{call, g, feed, dt};
  AttentionMasks enc{false, in.additive("src_mask", masks.src_mask, s, s),
                     in.padding("src_key_padding_mask", masks.src_key_padding_mask, b, s)};
  AttentionMasks self{masks.causal || s2s, in.additive("tgt_mask", masks.tgt_mask, t, t),
                      in.padding("tgt_key_padding_mask", masks.tgt_key_padding_mask, b, t)};
  // seq2seq: the source padding also hides padded memory positions unless given otherwise.
  const auto& memory_kpm = masks.memory_key_padding_mask || !s2s ? masks.memory_key_padding_mask
                                                                  : masks.src_key_padding_mask;
  AttentionMasks cross{false, in.additive("memory_mask", masks.memory_mask, t, s),
                       in.padding("memory_key_padding_mask", memory_kpm, b, s)};
  std::string key = "forward" + shape_key(src) + shape_key(tgt) + (self.causal ? "causal;" : "") + in.key;
  Executor& ex = impl().executor(key, [&] {
    BlockBuilder blocks(g, c, impl().weights, impl().options.attention);
    Tensor memory = blocks.encoder_stack(encoder_prefix(c), source_input(blocks, g, c, src, dt), enc);
    Tensor y = blocks.decoder_stack(decoder_prefix(c), target_input(blocks, g, c, tgt, dt), memory, self, cross);
    g.output("out", s2s ? blocks.generator(y) : y);
    return std::move(g);
  });
  return impl().run(ex, feed);
}

}  // namespace vkformer
