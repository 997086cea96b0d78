// _core.Model: PyTorch-shaped transformer models (include/vkformer/model.hpp) with numpy arrays in
// and out. Masks come as a dict keyed by PyTorch's argument names; python/vkformer/model.py turns
// keyword arguments into it.
#include <map>
#include <mutex>
#include <optional>

#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "common.hpp"
#include "vkformer/error.hpp"
#include "vkformer/model.hpp"

namespace vkformer::py {

namespace {

struct PyModel {
  std::optional<Model> model;
  std::mutex mutex;  // one call at a time: Model refuses a second thread, Python waits instead
};

// A float mask stays float (additive); a bool or integer mask is boolean (nonzero = masked).
HostTensor mask_tensor(const Array& a, const std::string& name) {
  HostTensor h = to_host(a, name);
  return h.dtype() == DType::f16 ? h.cast(DType::f32) : h;
}

ModelMasks masks_from(bool causal, const std::map<std::string, Array>& given) {
  ModelMasks m;
  m.causal = causal;
  for (const auto& [name, array] : given) {
    std::optional<HostTensor>* slot = name == "src_mask"                  ? &m.src_mask
                                      : name == "tgt_mask"                ? &m.tgt_mask
                                      : name == "memory_mask"             ? &m.memory_mask
                                      : name == "src_key_padding_mask"    ? &m.src_key_padding_mask
                                      : name == "tgt_key_padding_mask"    ? &m.tgt_key_padding_mask
                                      : name == "memory_key_padding_mask" ? &m.memory_key_padding_mask
                                                                          : nullptr;
    if (!slot)
      throw Error(ErrorCode::invalid_argument,
                  "unknown mask '" + name + "': expected src_mask, tgt_mask, memory_mask, src_key_padding_mask, "
                  "tgt_key_padding_mask or memory_key_padding_mask");
    *slot = mask_tensor(array, name);
  }
  return m;
}

// Token ids for seq2seq models (i32), values in the model's dtype otherwise.
HostTensor input(const PyModel& self, const Array& a, const std::string& what) {
  if (self.model->config().arch == ModelConfig::Arch::seq2seq) return to_host_as(a, DType::i32, what);
  return to_host_as(a, self.model->dtype(), what);
}

template <class F>
nb::object run(PyModel& self, F&& f) {
  std::optional<HostTensor> out;
  {
    nb::gil_scoped_release release;
    std::lock_guard lock(self.mutex);
    out = f();
  }
  return to_numpy(out->dtype() == DType::f32 ? std::move(*out) : out->cast(DType::f32));
}

}  // namespace

void bind_model(nb::module_& m) {
  using Masks = std::map<std::string, Array>;
  nb::class_<PyModel>(m, "Model")
      .def(
          "__init__",
          [](PyModel* self, const std::string& path, const std::string& device, const std::string& dtype) {
            if (dtype != "f32" && dtype != "f16")
              throw Error(ErrorCode::invalid_argument, "dtype: expected 'f32' or 'f16', got '" + dtype + "'");
            ModelOptions options;
            options.dtype = dtype == "f16" ? DType::f16 : DType::f32;
            std::optional<Model> model;
            {
              nb::gil_scoped_release release;
              model.emplace(Model::load(shared_device(device), path, options));
            }
            new (self) PyModel();  // once nothing can throw
            self->model = std::move(model);
          },
          nb::arg("path"), nb::arg("device") = "", nb::arg("dtype") = "f32")
      .def(
          "encode",
          [](PyModel& self, const Array& src, bool causal, const Masks& masks) {
            HostTensor s = input(self, src, "src");
            ModelMasks mm = masks_from(causal, masks);
            return run(self, [&] { return self.model->encode(s, mm); });
          },
          nb::arg("src"), nb::arg("causal"), nb::arg("masks"))
      .def(
          "decode",
          [](PyModel& self, const Array& tgt, const Array& memory, bool causal, const Masks& masks) {
            HostTensor t = input(self, tgt, "tgt");
            HostTensor mem = to_host_as(memory, self.model->dtype(), "memory");
            ModelMasks mm = masks_from(causal, masks);
            return run(self, [&] { return self.model->decode(t, mem, mm); });
          },
          nb::arg("tgt"), nb::arg("memory"), nb::arg("causal"), nb::arg("masks"))
      .def(
          "forward",
          [](PyModel& self, const Array& src, const Array& tgt, bool causal, const Masks& masks) {
            HostTensor s = input(self, src, "src");
            HostTensor t = input(self, tgt, "tgt");
            ModelMasks mm = masks_from(causal, masks);
            return run(self, [&] { return self.model->forward(s, t, mm); });
          },
          nb::arg("src"), nb::arg("tgt"), nb::arg("causal"), nb::arg("masks"))
      .def(
          "generate",
          [](PyModel& self, const std::vector<int32_t>& src, int max_new_tokens, int32_t bos, int32_t eos, int beam,
             float length_penalty) {
            GenerateOptions o;
            o.max_new_tokens = max_new_tokens;
            o.bos = bos;
            o.eos = eos;
            o.beam = beam;
            o.length_penalty = length_penalty;
            nb::gil_scoped_release release;
            std::lock_guard lock(self.mutex);
            return self.model->generate(src, o);
          },
          nb::arg("src"), nb::arg("max_new_tokens"), nb::arg("bos"), nb::arg("eos"), nb::arg("beam"),
          nb::arg("length_penalty"))
      .def_prop_ro("config_json", [](PyModel& self) { return self.model->config().to_json(); })
      .def_prop_ro("dtype", [](PyModel& self) { return std::string(dtype_name(self.model->dtype())); });
}

}  // namespace vkformer::py
