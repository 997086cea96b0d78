#pragma once
// What the binding's files share: numpy arrays <-> HostTensor, devices by selector, and the
// rule that every call doing device work releases the GIL (other Python threads run meanwhile).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <string>

#include "vkformer/device.hpp"
#include "vkformer/host_tensor.hpp"

namespace vkformer::py {

namespace nb = nanobind;

// Any C-contiguous CPU array; nanobind copies a non-contiguous one into this form.
using Array = nb::ndarray<nb::c_contig, nb::device::cpu>;

// float32 -> f32, float16 -> f16, float64 -> f32 (rounded), integer and bool -> i32 (checked to
// fit). `what` names the argument in errors: "src: expected ...".
HostTensor to_host(const Array& array, const std::string& what);
// The same, converted to `want` (f32 or i32) where the array holds another type.
HostTensor to_host_as(const Array& array, DType want, const std::string& what);
// A numpy array that owns a copy of the tensor (f32 -> float32, f16 -> float16, i32 -> int32).
nb::object to_numpy(HostTensor tensor);

// The device for a selector ("" = VKFORMER_DEVICE, else the default order); opened once per
// selector and shared (Device is a shared handle; opening one again costs an instance).
Device shared_device(const std::string& selector);

void bind_errors(nb::module_& m);
void bind_devices(nb::module_& m);
void bind_embedder(nb::module_& m);
void bind_llm(nb::module_& m);
void bind_model(nb::module_& m);
void bind_graph(nb::module_& m);

}  // namespace vkformer::py
