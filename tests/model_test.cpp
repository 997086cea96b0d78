// Whole blocks and models against PyTorch: every case under tests/golden (written by
// tests/fixtures/make_golden.py with torch.nn.Transformer and friends) in f32 and f16, plus cached greedy
// and beam decoding against PyTorch's uncached decoding, and load errors that name the problem.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <thread>

#include "latch.hpp"
#include "synthetic_weights.hpp"
#include "test_device.hpp"
#include "test_util.hpp"

namespace vkformer::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// The fixtures: where the build put them, or VKFORMER_GOLDEN_DIR (binaries carried elsewhere).
const fs::path kGolden = std::getenv("VKFORMER_GOLDEN_DIR") ? std::getenv("VKFORMER_GOLDEN_DIR") : VKF_GOLDEN_DIR;

json read_json(const fs::path& p) {
  std::ifstream f(p);
  return json::parse(f);
}

// Max |got - want| over max |want|: the error relative to the output's scale.
double relative_error(const HostTensor& got, const HostTensor& want) {
  auto g = got.to_f32(), w = want.to_f32();
  double err = 0, scale = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    err = std::max(err, std::abs(static_cast<double>(g[i]) - w[i]));
    scale = std::max(scale, std::abs(static_cast<double>(w[i])));
    if (std::isnan(g[i])) return INFINITY;
  }
  return err / std::max(scale, 1e-30);
}

// A fresh temporary directory per use, removed at scope exit.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& name) {
    path = fs::temp_directory_path() / ("vkformer_test_" + name + "_" + std::to_string(vkformer::testing::process_id()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

// The model directory of a case; synthetic-weight cases are written out first.
fs::path model_dir(const std::string& name, const json& meta, std::unique_ptr<TempDir>& keep) {
  fs::path dir = kGolden / name;
  if (meta["weights"] != "synthetic") return dir;
  keep = std::make_unique<TempDir>(name);
  ModelConfig config = ModelConfig::load((dir / "config.json").string());
  auto weights = ref::synthetic_weights(config);
  std::vector<std::pair<std::string, HostTensor>> ordered(weights.begin(), weights.end());
  write_safetensors(keep->path / "model.safetensors", ordered);
  fs::copy_file(dir / "config.json", keep->path / "config.json");
  return keep->path;
}

struct GoldenCase {
  std::string name;
  DType dtype;
};

std::string case_name(const ::testing::TestParamInfo<GoldenCase>& info) {
  return info.param.name + "_" + std::string(dtype_name(info.param.dtype));
}

class GoldenTest : public DeviceTestWithParam<GoldenCase> {};

TEST_P(GoldenTest, MatchesPyTorch) {
  const auto& [name, dtype] = GetParam();
  const fs::path dir = kGolden / name;
  json meta = read_json(dir / "case.json");
  std::unique_ptr<TempDir> synthetic;
  ModelOptions options;
  options.dtype = dtype;
  Model model = Model::load(device(), model_dir(name, meta, synthetic).string(), options);

  auto in = [&](const char* key) { return read_npy(dir / meta["inputs"][key].get<std::string>()); };
  auto has = [&](const char* key) { return meta["inputs"].contains(key); };
  ModelMasks masks;
  auto causal_or = [&](const char* key, std::optional<HostTensor>& slot) {
    if (!has(key)) return;
    if (meta["inputs"][key] == "causal")
      masks.causal = true;
    else
      slot = in(key);
  };
  causal_or("src_mask", masks.src_mask);
  causal_or("tgt_mask", masks.tgt_mask);
  causal_or("memory_mask", masks.memory_mask);
  if (has("src_key_padding_mask")) masks.src_key_padding_mask = in("src_key_padding_mask");
  if (has("tgt_key_padding_mask")) masks.tgt_key_padding_mask = in("tgt_key_padding_mask");
  if (has("memory_key_padding_mask")) masks.memory_key_padding_mask = in("memory_key_padding_mask");

  HostTensor out;
  switch (model.config().arch) {
    case ModelConfig::Arch::encoder: out = model.encode(in("src"), masks); break;
    case ModelConfig::Arch::decoder: out = model.decode(in("tgt"), in("memory"), masks); break;
    case ModelConfig::Arch::transformer: out = model.forward(in("src"), in("tgt"), masks); break;
    case ModelConfig::Arch::seq2seq:
      out = model.forward(in("src_ids"), in("tgt_ids"), masks);
      break;
  }
  HostTensor expected = read_npy(dir / meta["expected"].get<std::string>());
  ASSERT_EQ(out.shape(), expected.shape());
  // fp32: within 1e-4 of the output's scale; f16 storage: within 2e-2.
  const double tolerance = dtype == DType::f32 ? 1e-4 : 2e-2;
  double err = relative_error(out, expected);
  std::printf("[ golden ] %-42s %s max error / max |output| = %.3g\n", name.c_str(),
              std::string(dtype_name(dtype)).c_str(), err);
  EXPECT_LE(err, tolerance);
}

std::vector<GoldenCase> golden_cases() {
  std::vector<GoldenCase> cases;
  std::vector<std::string> names;
  // Model cases are the directories with a config.json (tests/golden also holds other data,
  // such as the tokenizer corpus).
  for (auto& e : fs::directory_iterator(kGolden))
    if (fs::exists(e.path() / "config.json")) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  for (auto& n : names)
    for (DType t : {DType::f32, DType::f16}) cases.push_back({n, t});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(PyTorch, GoldenTest, ::testing::ValuesIn(golden_cases()), case_name);

// Cached greedy and beam decoding give exactly the tokens of PyTorch's uncached decoding.
TEST_F(DeviceTest, DecodingMatchesPyTorchTokens) {
  const fs::path dir = kGolden / "seq2seq_small";
  json meta = read_json(dir / "case.json");
  const json& d = meta["decoding"];
  Model model = Model::load(device(), dir.string());
  for (const json& r : d["results"]) {
    std::vector<int32_t> src = r["src"].get<std::vector<int32_t>>();
    GenerateOptions o;
    o.max_new_tokens = d["steps"];
    o.bos = d["bos"];
    o.length_penalty = d["alpha"];
    struct Run {
      const char* key;
      int beam;
      int32_t eos;
    };
    for (Run run : {Run{"greedy", 1, -1}, Run{"greedy_eos", 1, d["eos"]}, Run{"beam", d["beam"], -1},
                    Run{"beam_eos", d["beam"], d["eos"]}}) {
      o.beam = run.beam;
      o.eos = run.eos;
      auto tokens = model.generate(src, o);
      EXPECT_EQ(tokens, r[run.key].get<std::vector<int32_t>>())
          << run.key << " for source " << r["src"].dump();
    }
  }
  // 32 steps of beam search reordered the caches on the device; nothing more was compiled for a
  // second source of the same length.
  size_t graphs = model.compiled_graphs();
  GenerateOptions o;
  o.max_new_tokens = d["steps"];
  o.beam = d["beam"];
  model.generate({7, 8, 9, 10}, o);
  EXPECT_EQ(model.compiled_graphs(), graphs);
  EXPECT_GT(model.last_generation_stats().tokens, 0u);
}

// Models of their own on one shared device, loaded and generating in two threads at once, give
// PyTorch's tokens, as one model alone does (README, "Threads"). The second thread takes the
// sources in reverse order, so the two run different graphs at the same time; each searches with
// beams for one source (beams are slow with the GPU kernels on a CPU device).
TEST_F(DeviceTest, ModelsInTwoThreadsGeneratePyTorchTokensAtOnce) {
  const fs::path dir = kGolden / "seq2seq_small";
  json meta = read_json(dir / "case.json");
  const json& d = meta["decoding"];
  std::vector<json> results(d["results"].begin(), d["results"].end());
  constexpr int kThreads = 2;
  Latch start(kThreads);
  std::vector<std::string> failures(kThreads);
  auto work = [&](int t) {
    Model model = Model::load(device(), dir.string());
    for (size_t i = 0; i < results.size(); ++i) {
      const size_t which = t == 0 ? i : results.size() - 1 - i;
      const json& r = results[which];
      GenerateOptions o;
      o.max_new_tokens = d["steps"];
      o.bos = d["bos"];
      o.eos = -1;
      o.length_penalty = d["alpha"];
      for (auto [key, beam] : {std::pair<const char*, int>{"greedy", 1}, {"beam", d["beam"]}}) {
        if (beam > 1 && which != static_cast<size_t>(t)) continue;
        o.beam = beam;
        auto tokens = model.generate(r["src"].get<std::vector<int32_t>>(), o);
        if (tokens != r[key].get<std::vector<int32_t>>())
          failures[t] += std::string(key) + " differs for source " + r["src"].dump() + "; ";
        if (model.last_generation_stats().tokens != tokens.size())
          failures[t] += std::string(key) + ": last_generation_stats is another call's; ";
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      start.arrive_and_wait();  // both load and generate at the same time
      try {
        work(t);
      } catch (const std::exception& e) {
        failures[t] += std::string("threw: ") + e.what();
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], "") << "thread " << t;
}

// ------------------------------------------------------------------------------- load errors

void expect_load_error(Device& device, const fs::path& dir, ErrorCode code, const std::string& needle) {
  EXPECT_TRUE(fails_with([&] { Model::load(device, dir.string()); }, code, needle));
}

class LoadErrorTest : public DeviceTest {
 protected:
  void SetUp() override {
    tmp = std::make_unique<TempDir>("load");
    config = ModelConfig::load((kGolden / "encoder_post_relu_b1_s1" / "config.json").string());
    SafetensorsFile file(kGolden / "encoder_post_relu_b1_s1" / "model.safetensors");
    for (auto& e : file.entries()) tensors.emplace_back(e.name, file.read(e.name));
  }
  void write(const std::vector<std::pair<std::string, HostTensor>>& t, const std::string& cfg) {
    write_safetensors(tmp->path / "model.safetensors", t);
    std::ofstream(tmp->path / "config.json") << cfg;
  }
  std::unique_ptr<TempDir> tmp;
  ModelConfig config;
  std::vector<std::pair<std::string, HostTensor>> tensors;
};

TEST_F(LoadErrorTest, NamesMissingExtraMisshapedAndMistypedTensors) {
  auto t = tensors;
  t.erase(t.begin() + 3);
  write(t, config.to_json());
  expect_load_error(device(), tmp->path, ErrorCode::format, tensors[3].first);

  t = tensors;
  t.emplace_back("layers.0.surprise", HostTensor({2}, DType::f32));
  write(t, config.to_json());
  expect_load_error(device(), tmp->path, ErrorCode::format, "layers.0.surprise");

  t = tensors;
  for (auto& [n, v] : t)
    if (n == "layers.1.linear1.weight") v = HostTensor({64, 31}, DType::f32);
  write(t, config.to_json());
  expect_load_error(device(), tmp->path, ErrorCode::format, "'layers.1.linear1.weight' has shape [64,31], expected [64,32]");

  t = tensors;
  for (auto& [n, v] : t)
    if (n == "layers.0.norm1.bias") v = HostTensor({32}, DType::i32);
  write(t, config.to_json());
  expect_load_error(device(), tmp->path, ErrorCode::format, "'layers.0.norm1.bias' has dtype I32");
}

TEST_F(LoadErrorTest, NamesBadConfigValues) {
  struct Bad {
    std::string edit_key;
    json value;
    std::string needle;
  };
  for (const Bad& b : {Bad{"nhead", 5, "not divisible"}, Bad{"activation", "swish", "\"activation\""},
                       Bad{"arch", "rnn", "\"arch\""}, Bad{"d_model", -3, "\"d_model\""},
                       Bad{"layer_norm_eps", "tiny", "layer_norm_eps"}, Bad{"colour", 1, "unknown key"},
                       Bad{"num_encoder_layers", 1.5, "num_encoder_layers"}}) {
    json cfg = json::parse(config.to_json());
    cfg[b.edit_key] = b.value;
    write(tensors, cfg.dump());
    expect_load_error(device(), tmp->path, ErrorCode::format, b.needle);
  }
  write(tensors, "{\"arch\": \"encoder\", ");
  expect_load_error(device(), tmp->path, ErrorCode::format, "not valid JSON");
  expect_load_error(device(), tmp->path / "nowhere", ErrorCode::io, "does not exist");
}

TEST_F(LoadErrorTest, NamesThatMissOrCarryAStackPrefixSaySo) {
  // A lone nn.TransformerEncoderLayer's state_dict: the names of layer 0 without "layers.0.".
  json one = json::parse(config.to_json());
  one["num_encoder_layers"] = 1;
  std::vector<std::pair<std::string, HostTensor>> lone, prefixed;
  for (auto& [n, v] : tensors) {
    if (n.starts_with("layers.0.")) lone.emplace_back(n.substr(9), v);
    prefixed.emplace_back("encoder." + n, v);
  }
  write(lone, one.dump());
  expect_load_error(device(), tmp->path, ErrorCode::format, "that an encoder with this config has");
  expect_load_error(device(), tmp->path, ErrorCode::format,
                    "lack the prefix 'layers.0.' (it has 'self_attn.in_proj_weight'): a single layer "
                    "saved alone?");
  // A stack saved from inside a bigger module (nn.Transformer's encoder.*).
  write(prefixed, config.to_json());
  expect_load_error(device(), tmp->path, ErrorCode::format,
                    "carry a prefix this config does not expect: 'encoder.'");
}

TEST_F(LoadErrorTest, PyTorchArgumentsThatDoNotChangeTheWeightsAreAccepted) {
  json cfg = json::parse(config.to_json());
  cfg["device"] = nullptr;
  cfg["dtype"] = "torch.float32";
  cfg["enable_nested_tensor"] = true;
  cfg["mask_check"] = false;
  cfg["bias"] = true;
  cfg["batch_first"] = true;
  write(tensors, cfg.dump());
  Model model = Model::load(device(), tmp->path.string());
  EXPECT_EQ(model.config().d_model, config.d_model);

  struct Bad {
    std::string key;
    json value;
    std::string needle;
  };
  for (const Bad& b : {Bad{"batch_first", false, "set it to true and give vkformer inputs transposed"},
                       Bad{"bias", false, "\"bias\" must be true"},
                       Bad{"device", 3, "\"device\" must be null or a string"},
                       Bad{"enable_nested_tensor", "yes", "\"enable_nested_tensor\" must be true or false"}}) {
    json c = json::parse(config.to_json());
    c[b.key] = b.value;
    write(tensors, c.dump());
    expect_load_error(device(), tmp->path, ErrorCode::format, b.needle);
  }
}

TEST_F(LoadErrorTest, NumbersBeyondADoubleAndRepeatedKeysAreConfigErrors) {
  write(tensors, "{\"arch\": \"encoder\", \"layer_norm_eps\": 1e400}");
  expect_load_error(device(), tmp->path, ErrorCode::format, "config.json: not valid JSON");
  std::string twice = config.to_json();
  twice.insert(twice.find('{') + 1, "\"d_model\": 16, ");
  write(tensors, twice);
  expect_load_error(device(), tmp->path, ErrorCode::format, "config.json: key \"d_model\" appears more than once");
}

// A config built in code gets the checks config.json gets, before anything is sized from it.
TEST_F(DeviceTest, ConfigsBuiltInCodeAreValidatedLikeConfigFiles) {
  const ModelConfig base{.arch = ModelConfig::Arch::encoder, .d_model = 8, .nhead = 2, .dim_feedforward = 16,
                         .num_encoder_layers = 1};
  struct Bad {
    std::function<void(ModelConfig&)> edit;
    std::string needle;
  };
  for (const Bad& b : std::vector<Bad>{
           {[](ModelConfig& c) { c.num_encoder_layers = 1000000000; }, "num_encoder_layers is 1000000000, expected 1..1024"},
           {[](ModelConfig& c) { c.nhead = 3; }, "d_model 8 is not divisible by nhead 3"},
           {[](ModelConfig& c) { c.nhead = 0; }, "nhead is 0"},
           {[](ModelConfig& c) { c.d_model = -8; }, "d_model is -8"},
           {[](ModelConfig& c) { c.layer_norm_eps = std::nanf(""); }, "layer_norm_eps is nan"},
           {[](ModelConfig& c) { c.arch = ModelConfig::Arch::seq2seq; c.num_decoder_layers = 1; c.final_norm = true; },
            "src_vocab is 0, expected 1.."}}) {
    ModelConfig c = base;
    b.edit(c);
    EXPECT_TRUE(fails_with([&] { parameter_shapes(c); }, ErrorCode::invalid_argument, b.needle));
    EXPECT_TRUE(fails_with([&] { Model::from_tensors(device(), c, {}); }, ErrorCode::invalid_argument, b.needle));
  }
  EXPECT_FALSE(parameter_shapes(base).empty());
}

TEST_F(DeviceTest, GenerateRejectsAnEosOutsideTheVocabularyAndANonFiniteLengthPenalty) {
  Model model = Model::load(device(), (kGolden / "seq2seq_small").string());
  auto expect = [&](GenerateOptions o, const std::string& needle) {
    EXPECT_TRUE(fails_with([&] { model.generate({5, 17, 3}, o); }, ErrorCode::invalid_argument, needle));
  };
  GenerateOptions o;
  o.eos = -7;
  expect(o, "eos -7 is outside the target vocabulary");
  o.eos = 1000;
  expect(o, "eos 1000 is outside the target vocabulary");
  o = {};
  o.beam = 2;
  o.length_penalty = std::nanf("");
  expect(o, "length_penalty is nan, expected a finite number");
  o = {};
  o.eos = -1;  // no end token: allowed
  o.max_new_tokens = 2;
  EXPECT_EQ(model.generate({5, 17, 3}, o).size(), 2u);
}

TEST_F(LoadErrorTest, AnF16ModelRefusesWeightsBeyondFloat16) {
  auto t = tensors;
  for (auto& [n, v] : t)
    if (n == "layers.0.linear1.weight") {
      auto values = v.to_f32();
      values[5] = 70000.0f;  // an f16 infinity; 65504 is the largest f16
      v = HostTensor::from_f32(v.shape(), values);
    }
  write(t, config.to_json());
  ModelOptions f16;
  f16.dtype = DType::f16;
  EXPECT_TRUE(fails_with([&] { Model::load(device(), tmp->path.string(), f16); }, ErrorCode::unsupported,
                         "tensor 'layers.0.linear1.weight' holds 70000.000000 at element 5, "
                         "beyond float16's largest value 65504"));
  EXPECT_EQ(Model::load(device(), tmp->path.string()).dtype(), DType::f32);  // f32 holds it
}

TEST_F(LoadErrorTest, TruncatedWeightsAreAnErrorNotACrash) {
  write(tensors, config.to_json());
  fs::path p = tmp->path / "model.safetensors";
  auto size = fs::file_size(p);
  for (auto cut : {size - 1, size / 2, uint64_t{100}, uint64_t{7}, uint64_t{0}}) {
    fs::resize_file(p, cut);
    expect_load_error(device(), tmp->path, ErrorCode::format, "model.safetensors");
    write(tensors, config.to_json());
  }
}

TEST_F(DeviceTest, BadInputsNameTheArgument) {
  Model model = Model::load(device(), (kGolden / "transformer_post_relu_b3_s11_t7").string());
  HostTensor src({2, 5, 32}, DType::f32), tgt({2, 4, 32}, DType::f32);
  auto expect = [](auto&& fn, const std::string& needle) {
    try {
      fn();
      ADD_FAILURE() << "expected an error mentioning '" << needle << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect([&] { model.forward(HostTensor({2, 5, 16}, DType::f32), tgt); }, "src must be [batch, seq, d_model] [?,?,32], got [2,5,16]");
  expect([&] { model.forward(src, HostTensor({3, 4, 32}, DType::f32)); }, "batch sizes differ");
  ModelMasks m;
  m.src_key_padding_mask = HostTensor({2, 4}, DType::i32);
  expect([&] { model.forward(src, tgt, m); }, "src_key_padding_mask must be [batch, seq] [2,5], got [2,4]");
  m = {};
  m.tgt_mask = HostTensor({4, 5}, DType::f32);
  expect([&] { model.forward(src, tgt, m); }, "tgt_mask must be [target, source] [4,4], got [4,5]");
  expect([&] { model.generate({1, 2}, {}); }, "needs a seq2seq model");
  // encode() and decode() refuse the masks of the other side instead of ignoring them.
  m = {};
  m.tgt_mask = HostTensor({4, 4}, DType::f32);
  expect([&] { model.encode(src, m); }, "Model::encode: tgt_mask does not apply here; Model::encode takes src_mask");
  m = {};
  m.src_key_padding_mask = HostTensor({2, 5}, DType::i32);
  expect([&] { model.decode(tgt, src, m); }, "Model::decode: src_key_padding_mask does not apply here");
  EXPECT_EQ(model.forward(src, tgt).shape(), (Shape{2, 4, 32}));
}

TEST_F(DeviceTest, AMovedFromModelSaysSo) {
  Model model = Model::load(device(), (kGolden / "encoder_post_relu_b1_s1").string());
  Model moved = std::move(model);
  auto expect_moved_from = [](const std::function<void()>& fn) {
    EXPECT_TRUE(fails_with(fn, ErrorCode::invalid_argument, "this model was moved from"));
  };
  expect_moved_from([&] { model.config(); });
  expect_moved_from([&] { model.encode(HostTensor({1, 1, 32}, DType::f32)); });
  expect_moved_from([&] { model.generate({1}, {}); });
  EXPECT_EQ(moved.config().d_model, 32);
}

}  // namespace
}  // namespace vkformer::testing
