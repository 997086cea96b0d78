#pragma once
// What `vkformer bench` measures: op benchmarks (matmul, softmax, layer norm, attention) and
// block benchmarks (a BERT-base encoder layer, the 6+6-layer d_model-512 transformer, one KV-cached
// decoder step), each a graph compiled with CompileOptions::timestamps over device-resident
// random data (fixed seeds), so a run times the GPU work alone: no uploads, no downloads.
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "vkformer/device.hpp"
#include "vkformer/executor.hpp"

namespace vkformer::bench {

// Which peak a result is a fraction of: FMA GFLOP/s or copy GB/s.
enum class Bound { compute, memory };

// A benchmark ready to run: run() replays it once; its GPU time is then
// executor->last_gpu_microseconds().
struct Prepared {
  std::unique_ptr<Executor> executor;
  std::function<void()> before_each;  // optional: set inputs that change between runs
};

struct Benchmark {
  std::string name;     // the family: "matmul", "softmax", "attention", "encoder_layer", ...
  std::string variant;  // "square", "bert-base.qkv", "fused", "unfused", ...
  std::vector<std::pair<std::string, int64_t>> shape;     // in display order
  std::vector<std::pair<std::string, std::string>> params;  // "path": "fused", "causal": "true"
  DType dtype = DType::f32;
  double flops = 0;  // useful FLOPs of one run (causal attention counts unmasked pairs only)
  double bytes = 0;  // the least memory traffic one run needs (each tensor read/written once)
  Bound bound = Bound::compute;
  bool quick = false;  // in the --quick subset
  // The share of the roofline a run is expected to reach, for --max-run-seconds' prediction
  // before any benchmark of the same family and variant ran here (0: the runner's 10%).
  double expected_fraction = 0;
  // Throws ErrorCode::unsupported if the device cannot run it (a tensor too large to bind):
  // cheap, checked before anything is made. prepare() makes the data and compiles.
  std::function<void(Device&)> check;
  std::function<Prepared(Device&)> prepare;

  // "matmul/square/f32/m=1024,n=1024,k=1024": unique, and what --filter matches.
  std::string id() const;
  std::string shape_text() const;  // "m=1024 n=1024 k=1024"
};

// Every benchmark, in the order the tables list them.
std::vector<Benchmark> all_benchmarks();

}  // namespace vkformer::bench
