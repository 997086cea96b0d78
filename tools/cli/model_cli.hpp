#pragma once
// What `vkformer run` and `vkformer generate` share: the --model and --dtype options, checking a
// model directory before a device is opened, and errors that name the option a file came from.
#include <CLI/CLI.hpp>
#include <chrono>
#include <string>

#include "vkformer/host_tensor.hpp"
#include "vkformer/model.hpp"

namespace vkformer::cli {

struct ModelArgs {
  std::string dir;            // --model DIR
  std::string dtype = "f32";  // --dtype f32|f16

  // config.json of --model, read and checked without a device; errors say "--model".
  ModelConfig config() const;
  ModelOptions options() const;
};

// Adds --model (required) and --dtype to a command.
void add_model_options(CLI::App& sub, ModelArgs& args);

// "encoder, 2 layers, d_model 32, 4 heads, feed-forward 64, relu, post-norm".
std::string describe(const ModelConfig& config);
// "float32 [3,7,32]", "integer [2,6]": what an array holds, as a user would call it.
std::string describe(const HostTensor& tensor);

// read_npy, with the option in front of any error: "--input x.npy: cannot open: ...".
HostTensor read_npy_for(const std::string& option, const std::string& path);

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point start);
// "12.3 ms", "1.23 s".
std::string format_ms(double ms);

}  // namespace vkformer::cli
