#pragma once
// The option set-up the subcommands share, declared once: a command names its options through
// these instead of spelling out CLI11's chains (placeholder, range check, required) each time, so
// that one kind of option reads, checks and shows in --help alike in every command.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "cli.hpp"

namespace vkformer::cli {

// An integer option whose value is checked strictly within [lo, hi] (whole_number_in, cli.hpp);
// `type` is its placeholder in --help ("N", "K", ...).
template <class T>
CLI::Option* add_whole_number(CLI::App& sub, const std::string& names, T& target, int64_t lo, int64_t hi,
                              const std::string& help, const std::string& type = "N") {
  return sub.add_option(names, target, help)->check(whole_number_in(lo, hi))->type_name(type);
}

// A GGUF model file: `vkformer chat -m FILE.gguf`, `serve --model`, `demo --llm-model`.
template <class Path>  // std::string or std::filesystem::path
CLI::Option* add_gguf_option(CLI::App& sub, const std::string& names, Path& path, const std::string& help) {
  return sub.add_option(names, path, help)->type_name("FILE.gguf");
}

// The model directory a command cannot run without (`-m,--model DIR`).
inline CLI::Option* add_model_dir_option(CLI::App& sub, std::string& dir, const std::string& help) {
  return sub.add_option("-m,--model", dir, help)->required()->type_name("DIR");
}

// A file the command writes its results to as JSON (`bench --json FILE`, `tune --json FILE`).
inline CLI::Option* add_json_file_option(CLI::App& sub, std::string& path, const std::string& help) {
  return sub.add_option("--json", path, help)->type_name("FILE");
}

// The texts of `embed` and `tokenize`: positional TEXT arguments and --file F, one text a line;
// `verb` says what the command does with them ("embed", "tokenize").
inline void add_text_inputs(CLI::App& sub, std::vector<std::string>& texts, std::string& file,
                            const std::string& verb) {
  sub.add_option("texts", texts, "Texts to " + verb)->type_name("TEXT");
  sub.add_option("--file", file, "Also " + verb + " each line of this UTF-8 file")->type_name("F");
}
// Those texts in order, each checked to be UTF-8 (errors name the argument or --file's line); none
// at all is a UsageError. Defined in cmd_embed.cpp.
std::vector<std::string> read_texts(const std::vector<std::string>& args, const std::string& file);

}  // namespace vkformer::cli
