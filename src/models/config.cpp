// config.json: the PyTorch constructor arguments of a model, validated key by key.
#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "../io/io_util.hpp"
#include "utf8_path.hpp"
#include "vkformer/error.hpp"
#include "vkformer/model.hpp"

namespace vkformer {

namespace {

using json = nlohmann::json;

// The ranges a config's numbers must lie in, for config.json and for configs built in code.
constexpr int64_t kMaxWidth = 1 << 20;   // d_model, dim_feedforward
constexpr int64_t kMaxHeads = 4096;
constexpr int64_t kMaxLayers = 1024;
constexpr int64_t kMaxVocab = 1 << 24;
constexpr int64_t kMaxLength = 1 << 24;  // max_len

// A config is a flat object of a few dozen bytes; these bound what a hostile file can cost.
constexpr uint64_t kMaxConfigBytes = 16u << 20;
// nlohmann parses with an explicit stack, but copying or printing a value recurses once per
// level: 100,000 nested brackets would overflow the stack.
constexpr int kMaxNesting = 64;

// A value from the file for a message: scalars as written (long strings cut short), arrays and
// objects by their size, never printed whole (they may be huge).
std::string describe(const json& v) {
  if (v.is_string()) return io::quote_name(v.get_ref<const std::string&>(), 64);
  if (v.is_array()) return "an array of " + std::to_string(v.size()) + " elements";
  if (v.is_object()) return "an object of " + std::to_string(v.size()) + " keys";
  return v.dump();  // a number, true, false or null: short
}

[[noreturn]] void bad(const std::string& source, const std::string& what) {
  throw Error(ErrorCode::format, source + ": " + what);
}

int64_t get_int(const json& j, const std::string& source, const char* key, int64_t fallback,
                int64_t lo, int64_t hi, bool required) {
  auto it = j.find(key);
  if (it == j.end()) {
    if (required) bad(source, std::string("missing key \"") + key + "\"");
    return fallback;
  }
  if (!it->is_number_integer())
    bad(source, std::string("\"") + key + "\" must be an integer, got " + describe(*it));
  // Read as unsigned when it is: 18446744073709551615 as int64 would be -1.
  const bool in_range = it->is_number_unsigned()
                            ? it->get<uint64_t>() <= static_cast<uint64_t>(hi) &&
                                  static_cast<int64_t>(it->get<uint64_t>()) >= lo
                            : it->get<int64_t>() >= lo && it->get<int64_t>() <= hi;
  if (!in_range)
    bad(source, std::string("\"") + key + "\" is " + it->dump() + ", expected " +
                    std::to_string(lo) + ".." + std::to_string(hi));
  return it->get<int64_t>();
}

bool get_bool(const json& j, const std::string& source, const char* key, bool fallback) {
  auto it = j.find(key);
  if (it == j.end()) return fallback;
  if (!it->is_boolean())
    bad(source, std::string("\"") + key + "\" must be true or false, got " + describe(*it));
  return it->get<bool>();
}

}  // namespace

const char* ModelConfig::arch_name(Arch a) {
  switch (a) {
    case Arch::encoder: return "encoder";
    case Arch::decoder: return "decoder";
    case Arch::transformer: return "transformer";
    case Arch::seq2seq: return "seq2seq";
  }
  return "?";
}

ModelConfig ModelConfig::parse(const std::string& text, const std::string& source) {
  json j;
  // JSON lets a key repeat (the last one wins); in a config that hides a mistake, so it is one.
  std::vector<std::set<std::string>> keys_of_open_objects;
  std::string repeated;
  struct TooDeep {};
  auto note_keys = [&](int depth, json::parse_event_t event, json& parsed) {
    const bool opens = event == json::parse_event_t::object_start ||
                       event == json::parse_event_t::array_start;
    if (opens && depth >= kMaxNesting) throw TooDeep{};
    if (event == json::parse_event_t::object_start) keys_of_open_objects.emplace_back();
    if (event == json::parse_event_t::object_end) keys_of_open_objects.pop_back();
    if (event == json::parse_event_t::key && !keys_of_open_objects.back().insert(parsed.get<std::string>()).second &&
        repeated.empty())
      repeated = parsed.get<std::string>();
    return true;
  };
  try {
    j = json::parse(text, note_keys);
  } catch (const json::exception& e) {  // parse errors, and numbers beyond a double (1e400)
    bad(source, std::string("not valid JSON: ") + e.what());
  } catch (const TooDeep&) {
    bad(source, "arrays and objects nested more than " + std::to_string(kMaxNesting) +
                    " deep; a config is one object of numbers, strings and booleans");
  }
  if (!repeated.empty()) bad(source, "key \"" + repeated + "\" appears more than once");
  if (!j.is_object()) bad(source, "expected a JSON object");
  // Besides vkformer's keys, PyTorch constructor arguments that do not change the weights' meaning
  // (checked below), so a config may be the module's arguments as they are.
  static const std::set<std::string> known = {
      "arch", "d_model", "nhead", "dim_feedforward", "num_encoder_layers", "num_decoder_layers",
      "activation", "layer_norm_eps", "norm_first", "final_norm", "src_vocab", "tgt_vocab",
      "max_len", "dropout", "batch_first", "bias", "device", "dtype", "enable_nested_tensor",
      "mask_check"};
  for (auto& [key, value] : j.items())
    if (!known.count(key)) bad(source, "unknown key " + io::quote_name(key, 64));

  ModelConfig c;
  auto arch = j.find("arch");
  if (arch == j.end()) bad(source, "missing key \"arch\" (encoder, decoder, transformer or seq2seq)");
  const std::string a = arch->is_string() ? arch->get<std::string>() : "";
  if (a == "encoder") c.arch = Arch::encoder;
  else if (a == "decoder") c.arch = Arch::decoder;
  else if (a == "transformer") c.arch = Arch::transformer;
  else if (a == "seq2seq") c.arch = Arch::seq2seq;
  else bad(source, "\"arch\" is " + describe(*arch) + ", expected encoder, decoder, transformer or seq2seq");

  c.d_model = get_int(j, source, "d_model", 0, 1, kMaxWidth, true);
  c.nhead = get_int(j, source, "nhead", 0, 1, kMaxHeads, true);
  c.dim_feedforward = get_int(j, source, "dim_feedforward", 0, 1, kMaxWidth, true);
  if (c.d_model % c.nhead != 0)
    bad(source, "\"d_model\" " + std::to_string(c.d_model) + " is not divisible by \"nhead\" " +
                    std::to_string(c.nhead));
  c.num_encoder_layers = get_int(j, source, "num_encoder_layers", 0, 0, kMaxLayers, c.has_encoder());
  c.num_decoder_layers = get_int(j, source, "num_decoder_layers", 0, 0, kMaxLayers, c.has_decoder());
  if (c.has_encoder() && c.num_encoder_layers < 1) bad(source, "\"num_encoder_layers\" must be at least 1");
  if (c.has_decoder() && c.num_decoder_layers < 1) bad(source, "\"num_decoder_layers\" must be at least 1");

  auto act = j.find("activation");
  if (act != j.end()) {
    const std::string s = act->is_string() ? act->get<std::string>() : "";
    if (s == "relu") c.activation = Activation::relu;
    else if (s == "gelu") c.activation = Activation::gelu;
    else bad(source, "\"activation\" is " + describe(*act) + ", expected \"relu\" or \"gelu\"");
  }
  auto eps = j.find("layer_norm_eps");
  if (eps != j.end()) {
    if (!eps->is_number()) bad(source, "\"layer_norm_eps\" must be a number, got " + describe(*eps));
    double e = eps->get<double>();
    if (!(e >= 0 && e < 1)) bad(source, "\"layer_norm_eps\" is " + eps->dump() + ", expected 0 <= eps < 1");
    c.layer_norm_eps = static_cast<float>(e);
  }
  c.norm_first = get_bool(j, source, "norm_first", false);
  bool stacks_always_normed = c.arch == Arch::transformer || c.arch == Arch::seq2seq;
  c.final_norm = get_bool(j, source, "final_norm", stacks_always_normed);
  if (stacks_always_normed && !c.final_norm)
    bad(source, "\"final_norm\" must be true for \"" + a + "\": nn.Transformer always has "
                "encoder.norm and decoder.norm");
  if (!get_bool(j, source, "batch_first", true))
    bad(source, "\"batch_first\" must be true: vkformer takes [batch, seq, feature] tensors. The "
                "weights are the same either way, so set it to true and give vkformer inputs "
                "transposed from [seq, batch, feature] (x.transpose(0, 1) in PyTorch)");
  if (!get_bool(j, source, "bias", true))
    bad(source, "\"bias\" must be true: vkformer's layers have the biases of PyTorch's default "
                "bias=True");
  auto dropout = j.find("dropout");
  if (dropout != j.end() && !dropout->is_number())
    bad(source, "\"dropout\" must be a number (it is ignored at inference)");
  // Where PyTorch builds the module and which fast path it may take: nothing to do with the
  // weights. The type the model runs in is ModelOptions::dtype (vkformer run --dtype).
  for (const char* key : {"device", "dtype"}) {
    auto it = j.find(key);
    if (it != j.end() && !it->is_null() && !it->is_string())
      bad(source, std::string("\"") + key + "\" must be null or a string (it is ignored), got " +
                      describe(*it));
  }
  (void)get_bool(j, source, "enable_nested_tensor", true);  // checked for type, then ignored
  (void)get_bool(j, source, "mask_check", true);

  bool s2s = c.arch == Arch::seq2seq;
  c.src_vocab = get_int(j, source, "src_vocab", 0, s2s ? 1 : 0, kMaxVocab, s2s);
  c.tgt_vocab = get_int(j, source, "tgt_vocab", 0, s2s ? 1 : 0, kMaxVocab, s2s);
  c.max_len = get_int(j, source, "max_len", 5000, 1, kMaxLength, false);
  c.validate(source);
  return c;
}

void ModelConfig::validate(const std::string& source) const {
  auto in = [&](const char* key, int64_t v, int64_t lo, int64_t hi) {
    if (v < lo || v > hi)
      throw Error(ErrorCode::invalid_argument, source + ": " + key + " is " + std::to_string(v) +
                                                   ", expected " + std::to_string(lo) + ".." +
                                                   std::to_string(hi));
  };
  in("d_model", d_model, 1, kMaxWidth);
  in("nhead", nhead, 1, kMaxHeads);
  in("dim_feedforward", dim_feedforward, 1, kMaxWidth);
  if (d_model % nhead != 0)
    throw Error(ErrorCode::invalid_argument, source + ": d_model " + std::to_string(d_model) +
                                                 " is not divisible by nhead " + std::to_string(nhead));
  in("num_encoder_layers", num_encoder_layers, has_encoder() ? 1 : 0, kMaxLayers);
  in("num_decoder_layers", num_decoder_layers, has_decoder() ? 1 : 0, kMaxLayers);
  if (!(layer_norm_eps >= 0 && layer_norm_eps < 1))
    throw Error(ErrorCode::invalid_argument, source + ": layer_norm_eps is " +
                                                 std::to_string(layer_norm_eps) + ", expected 0 <= eps < 1");
  const bool s2s = arch == Arch::seq2seq;
  if ((arch == Arch::transformer || s2s) && !final_norm)
    throw Error(ErrorCode::invalid_argument, source + ": final_norm must be true for " +
                                                 arch_name(arch) + " (encoder.norm and decoder.norm)");
  in("src_vocab", src_vocab, s2s ? 1 : 0, kMaxVocab);
  in("tgt_vocab", tgt_vocab, s2s ? 1 : 0, kMaxVocab);
  in("max_len", max_len, 1, kMaxLength);
}

ModelConfig ModelConfig::load(const std::string& path) {
  // A regular file of bounded size: a FIFO would block, /dev/zero never end.
  io::FileBytes file =
      io::FileBytes::open(platform::path_from_utf8(path), /*try_map=*/false, kMaxConfigBytes);
  auto bytes = file.bytes();
  return parse(std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()), path);
}

std::string ModelConfig::to_json() const {
  json j;
  j["arch"] = arch_name(arch);
  j["d_model"] = d_model;
  j["nhead"] = nhead;
  j["dim_feedforward"] = dim_feedforward;
  j["num_encoder_layers"] = num_encoder_layers;
  j["num_decoder_layers"] = num_decoder_layers;
  j["activation"] = activation == Activation::gelu ? "gelu" : "relu";
  j["layer_norm_eps"] = layer_norm_eps;
  j["norm_first"] = norm_first;
  j["final_norm"] = final_norm;
  j["src_vocab"] = src_vocab;
  j["tgt_vocab"] = tgt_vocab;
  j["max_len"] = max_len;
  return j.dump(2);
}

}  // namespace vkformer
