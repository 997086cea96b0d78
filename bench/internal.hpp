#pragma once
// Shared by the benchmark definitions (benchmarks.cpp: ops, blocks.cpp: blocks, embedding.cpp:
// a real sentence-embedding model).
#include <string>
#include <vector>

#include "benchmarks.hpp"
#include "vkformer/graph.hpp"

namespace vkformer::bench {

// Throws ErrorCode::unsupported, worded as the executor words it, if a tensor is larger than
// the device can bind: checked before any data is made, so skipping costs nothing.
void require_bindable(Device& device, const Shape& shape, DType dtype, const std::string& what);
// Skips a benchmark (unsupported) whose tensor is larger than one allocation.
void require_allocatable(Device& device, const Shape& shape, DType dtype, const std::string& what);
// Writes `result` into a device tensor (no download) and compiles with timestamps.
Prepared compile(Device& device, Graph& graph, Tensor result);

// out = x·Wᵀ + bias as nn.Linear computes it (W is [n, k]), in the "matmul" family.
Benchmark linear_matmul(const std::string& variant, int64_t m, int64_t n, int64_t k, DType dt,
                        bool quick = false);

std::vector<Benchmark> block_benchmarks();
// all-MiniLM-L6-v2 from scripts/fetch_minilm.sh's cache, and matmuls at its shapes (embedding.cpp).
std::vector<Benchmark> embedding_benchmarks();
// Linear layers with quantized weights at SmolLM2-135M's shapes, and f32 ones to compare (quant.cpp).
std::vector<Benchmark> quant_benchmarks();

}  // namespace vkformer::bench
