// _core.Embedder: SentenceEmbedder (include/vkformer/embedder.hpp). The Python class Embedder
// (python/vkformer/embedder.py) adds sentence-transformers' encode() on top.
#include <mutex>
#include <optional>

#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "common.hpp"
#include "vkformer/embedder.hpp"
#include "vkformer/error.hpp"

namespace vkformer::py {

namespace {

// One SentenceEmbedder is used by one thread at a time: the mutex makes a second Python thread
// wait its turn (with the GIL released) instead of getting "already in use".
struct Embedder {
  std::optional<SentenceEmbedder> model;
  std::mutex mutex;
};

DType parse_float_dtype(const std::string& name, const char* what) {
  if (name == "f32" || name == "float32") return DType::f32;
  if (name == "f16" || name == "float16") return DType::f16;
  throw Error(ErrorCode::invalid_argument,
              std::string(what) + ": expected 'f32' or 'f16', got '" + name + "'");
}

const char* pool_name(PoolMode p) { return p == PoolMode::mean ? "mean" : p == PoolMode::cls ? "cls" : "max"; }

}  // namespace

void bind_embedder(nb::module_& m) {
  nb::class_<Embedder>(m, "Embedder")
      .def(
          "__init__",
          [](Embedder* self, const std::string& path, const std::string& device, const std::string& dtype,
             int64_t max_batch) {
            EmbedderOptions options;
            options.dtype = parse_float_dtype(dtype, "dtype");
            options.max_batch = max_batch;
            std::optional<SentenceEmbedder> model;
            {
              nb::gil_scoped_release release;
              model.emplace(SentenceEmbedder::load(shared_device(device), path, options));
            }
            new (self) Embedder();  // once nothing can throw
            self->model = std::move(model);
          },
          nb::arg("path"), nb::arg("device") = "", nb::arg("dtype") = "f32", nb::arg("max_batch") = 32)
      .def(
          "embed",
          [](Embedder& self, const std::vector<std::string>& texts) {
            std::optional<HostTensor> out;
            {
              nb::gil_scoped_release release;
              std::lock_guard lock(self.mutex);
              out = self.model->embed(texts);
            }
            return to_numpy(std::move(*out));
          },
          nb::arg("texts"))
      .def_prop_ro("dimension", [](Embedder& e) { return e.model->dimension(); })
      .def_prop_ro("max_seq_length", [](Embedder& e) { return e.model->max_seq_length(); })
      .def_prop_ro("pooling", [](Embedder& e) { return pool_name(e.model->pooling()); })
      .def_prop_ro("normalizes", [](Embedder& e) { return e.model->normalizes(); })
      .def_prop_ro("dtype", [](Embedder& e) { return std::string(dtype_name(e.model->dtype())); })
      .def_prop_ro("device_name", [](Embedder& e) { return e.model->device().info().name; })
      .def(
          "tokenize",
          [](Embedder& e, const std::string& text) {
            Encoding enc = e.model->tokenizer().encode(text, static_cast<size_t>(e.model->max_seq_length()));
            return std::make_pair(enc.ids, enc.tokens);
          },
          nb::arg("text"));
}

}  // namespace vkformer::py
