// _core.Graph, _core.Tensor and _core.Executor: the op-level API (include/vkformer/graph.hpp,
// executor.hpp) for blocks built from numpy weights. Options that are structs in C++ are keyword
// arguments here; activations and dtypes are strings ("gelu", "f16").
#include <map>
#include <mutex>
#include <optional>

#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "common.hpp"
#include "vkformer/error.hpp"
#include "vkformer/executor.hpp"
#include "vkformer/graph.hpp"

namespace vkformer::py {

namespace {

Activation activation(const std::string& name) {
  if (name == "none") return Activation::none;
  if (name == "relu") return Activation::relu;
  if (name == "gelu") return Activation::gelu;
  if (name == "gelu_tanh") return Activation::gelu_tanh;
  if (name == "silu") return Activation::silu;
  throw Error(ErrorCode::invalid_argument,
              "activation: expected 'none', 'relu', 'gelu', 'gelu_tanh' or 'silu', got '" + name + "'");
}

Shape shape(const std::vector<int64_t>& dims) { return Shape(dims); }

struct PyExecutor {
  std::optional<Executor> executor;
  std::mutex mutex;
};

}  // namespace

void bind_graph(nb::module_& m) {
  nb::class_<Tensor>(m, "Tensor", "A symbolic tensor of a Graph: its shape and dtype, inferred when its op was added.")
      .def_prop_ro("shape", [](const Tensor& t) { return t.shape.dims(); })
      .def_prop_ro("dtype", [](const Tensor& t) { return std::string(dtype_name(t.dtype)); })
      .def("__repr__", [](const Tensor& t) {
        return "Tensor(shape=" + t.shape.str() + ", dtype=" + std::string(dtype_name(t.dtype)) + ")";
      });

  using OptT = std::optional<Tensor>;
  nb::class_<Graph>(m, "Graph",
                    "Ops on Tensors, each checking shapes as it is added (include/vkformer/graph.hpp). "
                    "Activations: none, relu, gelu, gelu_tanh, silu. Dtypes: f32, f16, i32, and the weight "
                    "types bf16 and ggml's quantized blocks (include/vkformer/quant_types.def).")
      .def(nb::init<>())
      .def(
          "input",
          [](Graph& g, const std::string& name, const std::vector<int64_t>& dims, const std::string& dtype) {
            return g.input(name, shape(dims), parse_dtype(dtype));
          },
          nb::arg("name"), nb::arg("shape"), nb::arg("dtype") = "f32")
      .def(
          "constant",
          [](Graph& g, const std::string& name, const Array& value) { return g.constant(name, to_host(value, name)); },
          nb::arg("name"), nb::arg("value"))
      .def("output", &Graph::output, nb::arg("name"), nb::arg("tensor"))
      .def(
          "matmul",
          [](Graph& g, Tensor a, Tensor b, bool transpose_b, OptT bias, float alpha, const std::string& act) {
            return g.matmul(a, b, {.transpose_b = transpose_b, .bias = bias, .alpha = alpha, .activation = activation(act)});
          },
          nb::arg("a"), nb::arg("b"), nb::arg("transpose_b") = false, nb::arg("bias") = nb::none(),
          nb::arg("alpha") = 1.0f, nb::arg("activation") = "none")
      .def(
          "linear",
          [](Graph& g, Tensor x, Tensor w, OptT bias, const std::string& act) {
            return g.linear(x, w, bias, activation(act));
          },
          nb::arg("x"), nb::arg("weight"), nb::arg("bias") = nb::none(), nb::arg("activation") = "none")
      .def("scale", &Graph::scale, nb::arg("x"), nb::arg("alpha"))
      .def(
          "softmax",
          [](Graph& g, Tensor x, float scale, bool causal, OptT mask, OptT key_padding_mask, bool log) {
            return g.softmax(x, {.scale = scale, .causal = causal, .mask = mask, .key_padding_mask = key_padding_mask,
                                 .log = log});
          },
          nb::arg("x"), nb::arg("scale") = 1.0f, nb::arg("causal") = false, nb::arg("mask") = nb::none(),
          nb::arg("key_padding_mask") = nb::none(), nb::arg("log") = false)
      .def("split_heads", &Graph::split_heads, nb::arg("x"), nb::arg("heads"), nb::arg("width") = -1,
           nb::arg("offset") = 0)
      .def("concat_heads", &Graph::concat_heads, nb::arg("x"))
      .def(
          "attention",
          [](Graph& g, Tensor q, Tensor k, Tensor v, float scale, bool causal, OptT mask, OptT key_padding_mask) {
            AttentionOptions o;
            o.scale = scale;
            o.causal = causal;
            o.mask = mask;
            o.key_padding_mask = key_padding_mask;
            return g.attention(q, k, v, o);
          },
          nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("scale") = 0.0f, nb::arg("causal") = false,
          nb::arg("mask") = nb::none(), nb::arg("key_padding_mask") = nb::none())
      .def("add", &Graph::add, nb::arg("a"), nb::arg("b"))
      .def("mul", &Graph::mul, nb::arg("a"), nb::arg("b"))
      .def("silu", &Graph::silu, nb::arg("x"))
      .def("swiglu", &Graph::swiglu, nb::arg("gate"), nb::arg("up"))
      .def("rms_norm", &Graph::rms_norm, nb::arg("x"), nb::arg("weight"), nb::arg("eps") = 1e-5f)
      .def("rms_norm_add", &Graph::rms_norm_add, nb::arg("x"), nb::arg("weight"), nb::arg("residual"),
           nb::arg("eps") = 1e-5f)
      .def("rms_norm_qk", &Graph::rms_norm_qk, nb::arg("qkv"), nb::arg("heads"), nb::arg("kv_heads"),
           nb::arg("q_weight"), nb::arg("k_weight"), nb::arg("eps") = 1e-5f)
      .def(
          "rope",
          [](Graph& g, Tensor x, bool neox, int64_t dims, double freq_base, int64_t offset) {
            RopeOptions o;
            o.style = neox ? RopeOptions::Style::neox : RopeOptions::Style::interleaved;
            o.dims = dims;
            o.freq_base = freq_base;
            o.offset = offset;
            return g.rope(x, o);
          },
          nb::arg("x"), nb::arg("neox") = false, nb::arg("dims") = -1, nb::arg("freq_base") = 10000.0,
          nb::arg("offset") = 0)
      .def("layer_norm", &Graph::layer_norm, nb::arg("x"), nb::arg("gamma"), nb::arg("beta"), nb::arg("eps") = 1e-5f)
      .def("add_layer_norm", &Graph::add_layer_norm, nb::arg("a"), nb::arg("b"), nb::arg("gamma"), nb::arg("beta"),
           nb::arg("eps") = 1e-5f)
      .def("gelu", &Graph::gelu, nb::arg("x"))
      .def("relu", &Graph::relu, nb::arg("x"))
      .def(
          "cast", [](Graph& g, Tensor x, const std::string& to) { return g.cast(x, parse_dtype(to)); }, nb::arg("x"),
          nb::arg("dtype"))
      .def("l2_normalize", &Graph::l2_normalize, nb::arg("x"), nb::arg("eps") = 1e-12f)
      .def("embedding", &Graph::embedding, nb::arg("ids"), nb::arg("table"))
      .def(
          "positional_encoding",
          [](Graph& g, Tensor x, float input_scale, int64_t offset, int64_t max_len) {
            PositionalEncodingOptions o;
            o.input_scale = input_scale;
            o.offset = offset;
            o.max_len = max_len;
            return g.positional_encoding(x, o);
          },
          nb::arg("x"), nb::arg("input_scale") = 1.0f, nb::arg("offset") = 0, nb::arg("max_len") = 5000)
      .def(
          "reshape", [](Graph& g, Tensor x, const std::vector<int64_t>& dims) { return g.reshape(x, shape(dims)); },
          nb::arg("x"), nb::arg("shape"))
      .def("copy", &Graph::copy, nb::arg("x"));

  nb::class_<PyExecutor>(m, "Executor")
      .def(
          "__init__",
          [](PyExecutor* self, const Graph& graph, const std::string& device, bool profile) {
            CompileOptions o;
            o.profile = profile;
            std::optional<Executor> executor;
            {
              nb::gil_scoped_release release;
              executor.emplace(shared_device(device), graph, o);
            }
            new (self) PyExecutor();  // once nothing can throw
            self->executor = std::move(executor);
          },
          nb::arg("graph"), nb::arg("device") = "", nb::arg("profile") = false)
      .def(
          "run",
          [](PyExecutor& self, const std::map<std::string, Array>& inputs) {
            std::map<std::string, HostTensor> host;
            for (const auto& [name, a] : inputs) host.emplace(name, to_host(a, name));
            std::map<std::string, HostTensor> out;
            {
              nb::gil_scoped_release release;
              std::lock_guard lock(self.mutex);
              out = self.executor->run(host);
            }
            nb::dict result;
            for (auto& [name, t] : out) result[nb::str(name.c_str())] = to_numpy(std::move(t));
            return result;
          },
          nb::arg("inputs"))
      .def_prop_ro("input_names", [](PyExecutor& e) { return e.executor->input_names(); })
      .def_prop_ro("output_names", [](PyExecutor& e) { return e.executor->output_names(); })
      .def("profile", [](PyExecutor& e) {
        nb::list out;
        for (const OpTime& t : e.executor->profile()) out.append(nb::make_tuple(t.op, t.microseconds));
        return out;
      })
      .def("stats", [](PyExecutor& e) {
        ExecutorStats s = e.executor->stats();
        nb::dict d;
        d["dispatches"] = s.dispatches;
        d["barriers"] = s.barriers;
        d["runs"] = s.runs;
        d["activation_bytes"] = s.activation_bytes;
        d["constant_bytes"] = s.constant_bytes;
        return d;
      });
}

}  // namespace vkformer::py
