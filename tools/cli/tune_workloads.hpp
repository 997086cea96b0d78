#pragma once
// What `vkformer tune` times: the shapes of a GGUF model or of the standard bench set, and one
// compiled graph (random data, GPU timestamps) per shape.
#include <memory>
#include <string>
#include <vector>

#include "tunables.hpp"
#include "vkformer/executor.hpp"

namespace vkformer::cli {

// The standard set: the shapes of `vkformer bench --quick` (so that a bench run can show the
// tuned choices are never slower there), plus on GPUs the large transformer shapes that GPUs
// are for (bench/README.md lists the benchmarks), among them f16 attention for flash attention
// and decoding steps over long caches for split-K decoding.
std::vector<kernels::TuneShape> standard_tune_shapes(bool cpu_device);

// A GGUF language model's shapes: every linear of its first block and the output projection at
// M = 1 (decoding) and at the prompt chunk (M = 64, not the output), in the weights' stored
// types with f32 activations; attention at its head counts and head size (64 queries in f32
// and f16, and one query, against 512 keys);
// RMS norm over its width. Throws format naming the file and key when the config is incomplete.
std::vector<kernels::TuneShape> model_tune_shapes(const std::string& gguf_path);

// The graph for one shape on `device`, compiled with timestamps over device-resident random data
// (fixed seeds). Throws unsupported where the device cannot run it.
std::unique_ptr<Executor> prepare_tune_shape(Device& device, const kernels::TuneShape& shape);

}  // namespace vkformer::cli
