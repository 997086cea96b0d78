// Uses vkformer through its installed package: lists the devices, then runs one op on the chosen
// one, which also shows that the kernels' SPIR-V came along in the installed library.
#include <cstdio>
#include <vkformer/vkformer.hpp>

int main() {
  try {
    auto devices = vkformer::Device::enumerate();
    std::printf("%zu Vulkan device(s)\n", devices.size());

    vkformer::Device device = vkformer::Device::open();
    vkformer::Graph g;
    auto a = g.input("a", {3});
    auto b = g.input("b", {3});
    g.output("sum", g.add(a, b));
    vkformer::Executor executor(device, g);
    float av[] = {1, 2, 3}, bv[] = {10, 20, 30};
    auto out = executor.run({{"a", vkformer::HostTensor::from_f32({3}, av)},
                             {"b", vkformer::HostTensor::from_f32({3}, bv)}});
    auto sum = out.at("sum").to_f32();
    std::printf("on %s: [1,2,3] + [10,20,30] = [%g,%g,%g]\n", device.info().name.c_str(), sum[0],
                sum[1], sum[2]);
    return sum[0] == 11 && sum[1] == 22 && sum[2] == 33 ? 0 : 1;
  } catch (const vkformer::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
