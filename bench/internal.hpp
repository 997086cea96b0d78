#pragma once
// Shared by the benchmark definitions (benchmarks.cpp: ops, blocks.cpp: blocks).
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

std::vector<Benchmark> block_benchmarks();

}  // namespace vkformer::bench
