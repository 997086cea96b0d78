// `vkformer run`: one forward pass of a model directory on .npy inputs, written to an .npy file.
// encoder: encode(input); decoder: decode(input, memory); transformer and seq2seq:
// forward(input, memory). Arguments are checked against config.json before a device is opened,
// so a wrong file is named by its option and costs no weight upload.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli.hpp"
#include "io_util.hpp"
#include "model_cli.hpp"
#include "model_kind.hpp"
#include "vkformer/error.hpp"
#include "vkformer/io.hpp"

namespace vkformer::cli {

// What `vkformer run --help` says first.
constexpr const char* kRunHelp =
    "Run a model on .npy arrays and write its output as .npy. encoder: --input is the source "
    "[batch, seq, d_model]. decoder: --input is the target, --memory the encoder output. "
    "transformer: --input is the source, --target (or --memory) the target. seq2seq: --input is "
    "the source ids [batch, seq], --target (or --memory) the target ids, the output log-probabilities "
    "[batch, target seq, tgt_vocab]. Prints a summary (device, model, shapes, times).";

namespace {

using Arch = ModelConfig::Arch;

struct RunArgs {
  ModelArgs model;
  std::string input, memory, target, output;
  std::string output_dtype = "f32";
  bool causal = false;
  std::string src_mask, tgt_mask, memory_mask;
  std::string src_kpm, tgt_kpm, memory_kpm;
  int repeat = 0;
};

// An input array that does not fit the model (exit status 1); options that do not fit together
// are usage_error()s (exit status 2).
[[noreturn]] void bad(const std::string& what) { throw Error(ErrorCode::invalid_argument, what); }

// One array given on the command line, with the option and file it came from.
struct Arg {
  std::string option;
  std::string path;
  HostTensor value;
  std::string where() const { return option + " " + path; }
};

std::optional<Arg> read_arg(const std::string& option, const std::string& path) {
  if (path.empty()) return std::nullopt;
  return Arg{option, path, read_npy_for(option, path)};
}

// `dims`: -1 matches any size, every size must be at least 1.
bool dims_match(const Shape& s, const std::vector<int64_t>& dims) {
  if (s.rank() != static_cast<int>(dims.size())) return false;
  for (int i = 0; i < s.rank(); ++i)
    if (s[i] < 1 || (dims[i] >= 0 && s[i] != dims[i])) return false;
  return true;
}

std::string dims_text(const std::vector<int64_t>& dims, const std::vector<const char*>& names) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i)
    s += (i ? ", " : "") + (dims[i] >= 0 ? std::to_string(dims[i]) : std::string(names[i]));
  return s + "]";
}

// Features [batch, seq, d_model], float.
void check_features(const Arg& a, const ModelConfig& c, int64_t batch, const char* what) {
  std::vector<int64_t> dims{batch, -1, c.d_model};
  if (!is_float(a.value.dtype()) || !dims_match(a.value.shape(), dims))
    bad(a.where() + ": " + what + " must be a float array " +
        dims_text(dims, {"batch", "seq", ""}) + " (d_model " + std::to_string(c.d_model) +
        "), got " + describe(a.value));
}

// Token ids [batch, seq], integer, every id in [0, vocab), at most max_len positions.
void check_ids(const Arg& a, const ModelConfig& c, int64_t batch, int64_t vocab, const char* what) {
  std::vector<int64_t> dims{batch, -1};
  if (a.value.dtype() != DType::i32 || !dims_match(a.value.shape(), dims))
    bad(a.where() + ": " + what + " of a seq2seq model must be integer token ids " +
        dims_text(dims, {"batch", "seq"}) + ", got " + describe(a.value));
  auto ids = a.value.to_i32();
  const int64_t seq = a.value.shape()[1];
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= vocab)
      bad(a.where() + ": token id " + std::to_string(ids[i]) + " at [" +
          std::to_string(static_cast<int64_t>(i) / seq) + "," +
          std::to_string(static_cast<int64_t>(i) % seq) + "] is outside the vocabulary [0, " +
          std::to_string(vocab) + ")");
  if (seq > c.max_len)
    bad(a.where() + ": " + std::to_string(seq) + " positions, more than the model's max_len " +
        std::to_string(c.max_len) + " (the positional encoding's length)");
}

// Additive float or boolean [rows, cols].
void check_attn_mask(const Arg& a, int64_t rows, int64_t cols, const char* layout) {
  if (!dims_match(a.value.shape(), {rows, cols}))
    bad(a.where() + ": expected a float (additive) or boolean mask [" + std::to_string(rows) + ", " +
        std::to_string(cols) + "] (" + layout + "), got " + describe(a.value));
}

// Boolean [batch, seq], true = ignore that key.
void check_padding_mask(const Arg& a, int64_t batch, int64_t seq, const char* layout) {
  if (a.value.dtype() != DType::i32 || !dims_match(a.value.shape(), {batch, seq}))
    bad(a.where() + ": expected a boolean mask [" + std::to_string(batch) + ", " +
        std::to_string(seq) + "] (" + layout + "; true = ignore), got " + describe(a.value));
}

// What --input and --memory are for each architecture.
const char* memory_help(Arch arch) {
  switch (arch) {
    case Arch::decoder: return "the encoder output [batch, source seq, d_model]";
    case Arch::transformer: return "the target [batch, target seq, d_model]";
    case Arch::seq2seq: return "the target token ids [batch, target seq]";
    case Arch::encoder: break;
  }
  return "";
}

// A mask's summary: integer masks are the boolean ones (any integer or bool .npy, nonzero = masked).
std::string describe_mask(const HostTensor& t) {
  return t.dtype() == DType::i32 ? "boolean " + t.shape().str() : describe(t);
}

struct Prepared {
  Arg input;
  std::optional<Arg> memory;
  ModelMasks masks;
  std::vector<std::pair<std::string, std::string>> mask_lines;  // name, description
};

Prepared prepare(const RunArgs& args, const ModelConfig& c) {
  const char* arch = ModelConfig::arch_name(c.arch);
  // Which options apply, before any file is read.
  if (c.arch == Arch::encoder && !args.memory.empty())
    usage_error("--memory is for decoder, transformer and seq2seq models; " + args.model.dir +
        " is an encoder, which takes --input alone");
  // transformer and seq2seq: the second array is the target, so --target names it too.
  const bool takes_target = c.arch == Arch::transformer || c.arch == Arch::seq2seq;
  if (!args.target.empty() && !takes_target)
    usage_error("--target is for transformer and seq2seq models; " + args.model.dir + " is " +
        (c.arch == Arch::decoder ? "a decoder, whose target is --input (and the encoder output --memory)"
                                 : "an encoder, which takes --input alone"));
  if (!args.target.empty() && !args.memory.empty())
    usage_error(std::string("--target and --memory both name the target of a ") + arch +
        " model; give one of them");
  const std::string second_option = args.target.empty() ? "--memory" : "--target";
  const std::string& second_path = args.target.empty() ? args.memory : args.target;
  if (c.arch != Arch::encoder && second_path.empty())
    usage_error(std::string("a ") + arch + " model needs " + (takes_target ? "--target (or --memory)" : "--memory") +
        ": " + memory_help(c.arch));
  struct MaskOption {
    const char* option;
    const std::string& path;
    bool encoder_side;
  };
  for (const MaskOption& m : {MaskOption{"--src-mask", args.src_mask, true},
                              MaskOption{"--src-key-padding-mask", args.src_kpm, true},
                              MaskOption{"--tgt-mask", args.tgt_mask, false},
                              MaskOption{"--tgt-key-padding-mask", args.tgt_kpm, false},
                              MaskOption{"--memory-mask", args.memory_mask, false},
                              MaskOption{"--memory-key-padding-mask", args.memory_kpm, false}}) {
    if (m.path.empty()) continue;
    if (m.encoder_side && c.arch == Arch::decoder)
      usage_error(std::string(m.option) + " is for a source sequence; a decoder model has none (its "
                                  "--input is the target)");
    if (!m.encoder_side && c.arch == Arch::encoder)
      usage_error(std::string(m.option) + " is for a target or memory; an encoder model has neither");
  }

  Prepared p{*read_arg("--input", args.input), read_arg(second_option, second_path), {}, {}};
  // Sequence lengths: S (source, keys of the encoder and of cross-attention), T (target).
  int64_t s = 0, t = 0;
  switch (c.arch) {
    case Arch::encoder:
      check_features(p.input, c, -1, "the encoder input");
      s = p.input.value.shape()[1];
      break;
    case Arch::decoder:
      check_features(p.input, c, -1, "the decoder input (target)");
      t = p.input.value.shape()[1];
      check_features(*p.memory, c, p.input.value.shape()[0], "the memory (encoder output)");
      s = p.memory->value.shape()[1];
      break;
    case Arch::transformer:
      check_features(p.input, c, -1, "the source");
      s = p.input.value.shape()[1];
      check_features(*p.memory, c, p.input.value.shape()[0], "the target");
      t = p.memory->value.shape()[1];
      break;
    case Arch::seq2seq:
      check_ids(p.input, c, -1, c.src_vocab, "the source");
      s = p.input.value.shape()[1];
      check_ids(*p.memory, c, p.input.value.shape()[0], c.tgt_vocab, "the target");
      t = p.memory->value.shape()[1];
      break;
  }
  const int64_t b = p.input.value.shape()[0];

  auto attn = [&](const char* option, const std::string& path, std::optional<HostTensor>& slot,
                  int64_t rows, int64_t cols, const char* layout, const char* name) {
    auto a = read_arg(option, path);
    if (!a) return;
    check_attn_mask(*a, rows, cols, layout);
    p.mask_lines.emplace_back(name, describe_mask(a->value) + " (" + a->path + ")");
    slot = std::move(a->value);
  };
  auto padding = [&](const char* option, const std::string& path, std::optional<HostTensor>& slot,
                     int64_t seq, const char* layout, const char* name) {
    auto a = read_arg(option, path);
    if (!a) return;
    check_padding_mask(*a, b, seq, layout);
    p.mask_lines.emplace_back(name, describe_mask(a->value) + " (" + a->path + ")");
    slot = std::move(a->value);
  };
  ModelMasks& m = p.masks;
  attn("--src-mask", args.src_mask, m.src_mask, s, s, "source, source", "src_mask");
  attn("--tgt-mask", args.tgt_mask, m.tgt_mask, t, t, "target, target", "tgt_mask");
  attn("--memory-mask", args.memory_mask, m.memory_mask, t, s, "target, source", "memory_mask");
  padding("--src-key-padding-mask", args.src_kpm, m.src_key_padding_mask, s, "batch, source",
          "src_key_padding_mask");
  padding("--tgt-key-padding-mask", args.tgt_kpm, m.tgt_key_padding_mask, t, "batch, target",
          "tgt_key_padding_mask");
  padding("--memory-key-padding-mask", args.memory_kpm, m.memory_key_padding_mask, s,
          "batch, source", "memory_key_padding_mask");
  m.causal = args.causal || c.arch == Arch::seq2seq;
  if (m.causal)
    p.mask_lines.emplace_back("causal", c.arch == Arch::encoder ? "over the source"
                                        : c.arch == Arch::seq2seq ? "over the target (always, seq2seq)"
                                                                  : "over the target");
  return p;
}

// Before anything runs: an --output that exists must be a regular file (the write replaces it
// by a rename, so a link or /dev/null would be replaced, not written to), and must not be one of
// the inputs, compared as files (device and inode), so a link or another spelling is caught.
void check_output(const RunArgs& args) {
  io::check_output_path(args.output, "--output");
  const std::pair<const char*, const std::string*> inputs[] = {
      {"--input", &args.input},         {"--memory", &args.memory},
      {"--target", &args.target},       {"--src-mask", &args.src_mask},
      {"--tgt-mask", &args.tgt_mask},   {"--memory-mask", &args.memory_mask},
      {"--src-key-padding-mask", &args.src_kpm}, {"--tgt-key-padding-mask", &args.tgt_kpm},
      {"--memory-key-padding-mask", &args.memory_kpm}};
  for (auto [option, path] : inputs)
    if (!path->empty() && io::same_file(*path, args.output))
      usage_error("--output " + args.output + " is the same file as " + option + " " + *path +
          ": writing the output would overwrite that input");
}

int run_command(const RunArgs& args, const GlobalOptions& globals) {
  check_output(args);
  // A GGUF or BERT model: name the command that fits.
  require_model_kind("run", args.model.dir, model_kind(args.model.dir));
  const ModelConfig config = args.model.config();
  Prepared p = prepare(args, config);

  Device device = Device::open(globals.device_options());
  auto t_load = Clock::now();
  Model model = Model::load(device, args.model.dir, args.model.options());
  const double load_ms = ms_since(t_load);

  auto call = [&] {
    switch (config.arch) {
      case Arch::encoder: return model.encode(p.input.value, p.masks);
      case Arch::decoder: return model.decode(p.input.value, p.memory->value, p.masks);
      case Arch::transformer:
      case Arch::seq2seq: break;
    }
    return model.forward(p.input.value, p.memory->value, p.masks);
  };
  auto t_first = Clock::now();
  HostTensor out = call();
  const double first_ms = ms_since(t_first);
  std::vector<double> replays;
  for (int i = 0; i < args.repeat; ++i) {
    auto t = Clock::now();
    call();
    replays.push_back(ms_since(t));
  }

  const bool f16_out = args.output_dtype == "f16";
  try {
    write_npy(args.output, out, f16_out ? NpyType::float16 : NpyType::float32);
  } catch (const Error& e) {
    throw Error(e.code(), std::string("--output: ") + e.what());
  }

  auto row = [](const std::string& key, const std::string& value) {
    std::printf("%-11s %s\n", key.c_str(), value.c_str());
  };
  const DeviceInfo& d = device.info();
  row("device", std::to_string(d.index) + ": " + d.name);
  row("model", args.model.dir + ": " + describe(config) + "; " +
                   std::string(dtype_name(model.dtype())) + " on the device");
  const bool s2s = config.arch == Arch::seq2seq;
  const char* input_name = config.arch == Arch::decoder ? "tgt" : "src";
  const char* memory_name = config.arch == Arch::decoder ? "memory" : "tgt";
  row("input", std::string(input_name) + " " + describe(p.input.value) + " (" + p.input.path + ")");
  if (p.memory)
    row("memory", std::string(memory_name) + " " + describe(p.memory->value) + " (" + p.memory->path + ")");
  for (auto& [name, text] : p.mask_lines) row("mask", name + " " + text);
  row("output", out.shape().str() + (s2s ? " log-probabilities" : "") + ", written as " +
                    (f16_out ? "float16" : "float32") + " to " + args.output);
  row("load", format_ms(load_ms) + " (config, weights to the device)");
  row("first run", format_ms(first_ms) + " (compiles and records the graph, then runs it)");
  if (!replays.empty()) {
    std::vector<double> sorted = replays;
    std::sort(sorted.begin(), sorted.end());
    size_t n = sorted.size();
    double median = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
    row("replays", std::to_string(n) + ", median " + format_ms(median) + " (min " +
                       format_ms(sorted.front()) + ", max " + format_ms(sorted.back()) + ")");
  }
  std::fflush(stdout);
  return report_validation(device) ? 1 : 0;
}

}  // namespace

Command add_run_command(CLI::App& app, const GlobalOptions& globals) {
  auto* sub = app.add_subcommand("run", kRunHelp);
  auto args = std::make_shared<RunArgs>();
  add_model_options(*sub, args->model);
  sub->add_option("--input", args->input,
                  "Source (encoder, transformer; token ids for seq2seq) or target (decoder) .npy")
      ->required()
      ->type_name("X.npy");
  sub->add_option("--memory", args->memory,
                  "decoder: the encoder output [batch, source seq, d_model]; transformer: the "
                  "target [batch, target seq, d_model]; seq2seq: the target ids [batch, target "
                  "seq]. Required for these, refused for an encoder")
      ->type_name("M.npy");
  sub->add_option("--target", args->target,
                  "transformer and seq2seq: the target, the same as --memory for these models "
                  "(refused for an encoder or a decoder)")
      ->type_name("T.npy");
  sub->add_option("--output", args->output, "Where to write the output .npy")
      ->required()
      ->type_name("Y.npy");
  sub->add_option("--output-dtype", args->output_dtype,
                  "Element type of the written output: f32 (float32) or f16 (float16), whatever "
                  "--dtype is (default: f32)")
      ->check(CLI::IsMember({"f32", "f16"}).description(""))
      ->type_name("f32|f16");
  sub->add_flag("--causal", args->causal,
                "Causal self-attention: over the source for an encoder, over the target for a "
                "decoder or transformer (PyTorch's generate_square_subsequent_mask); seq2seq is "
                "always causal");
  sub->add_option("--src-mask", args->src_mask,
                  "Encoder self-attention mask [source, source]: float (added to the scores, "
                  "-inf = masked) or boolean (true = masked)")
      ->type_name("F.npy");
  sub->add_option("--tgt-mask", args->tgt_mask,
                  "Decoder self-attention mask [target, target], float or boolean as --src-mask; "
                  "combines with --causal")
      ->type_name("F.npy");
  sub->add_option("--memory-mask", args->memory_mask,
                  "Cross-attention mask [target, source], float or boolean as --src-mask")
      ->type_name("F.npy");
  sub->add_option("--src-key-padding-mask", args->src_kpm,
                  "Boolean [batch, source]: true = that source position is padding, no query "
                  "attends to it (seq2seq: also hides it from cross-attention unless "
                  "--memory-key-padding-mask is given)")
      ->type_name("P.npy");
  sub->add_option("--tgt-key-padding-mask", args->tgt_kpm,
                  "Boolean [batch, target]: true = padding target position")
      ->type_name("P.npy");
  sub->add_option("--memory-key-padding-mask", args->memory_kpm,
                  "Boolean [batch, source]: true = cross-attention ignores that memory position")
      ->type_name("P.npy");
  sub->add_option("--repeat", args->repeat,
                  "After the first run (which compiles and records the graph), replay it N more "
                  "times and print the median time (default: 0)")
      ->check(CLI::Range(0, 1000000).description(""))
      ->type_name("N");
  return {sub, [&globals, args]() { return run_command(*args, globals); }};
}

}  // namespace vkformer::cli
