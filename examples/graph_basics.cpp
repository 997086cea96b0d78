// The README's example: build a graph, compile it for a device once, run it.
//   y = gelu(x + bias), x: [2, 4], bias: [4] (broadcast over the rows)
#include <cstdio>
#include <vector>
#include <vkformer/vkformer.hpp>

int main() {
  using namespace vkformer;
  try {
    // VKFORMER_DEVICE if set, else the first of discrete, integrated, virtual, cpu.
    Device device = Device::open();

    Graph g;
    Tensor x = g.input("x", {2, 4});
    Tensor bias = g.input("bias", {4});
    g.output("y", g.gelu(g.add(x, bias)));

    // Plans memory, creates pipelines and records the command buffer, once.
    Executor executor(device, g);

    std::vector<float> xs = {-2, -1, 0, 1, 2, 3, 4, 5};
    std::vector<float> bs = {0.5f, 0.5f, -0.5f, -0.5f};
    auto outputs = executor.run({{"x", HostTensor::from_f32({2, 4}, xs)},
                                 {"bias", HostTensor::from_f32({4}, bs)}});

    const HostTensor& y = outputs.at("y");
    std::printf("device: %s\ny %s:", device.info().name.c_str(), y.shape().str().c_str());
    for (float v : y.to_f32()) std::printf(" %.4f", v);
    std::printf("\n");
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
