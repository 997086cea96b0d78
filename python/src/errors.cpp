// vkformer::Error -> Python: vkformer.Error (a RuntimeError) with the library's message and its
// code as `.code`, raised as the subclass for that code so callers can catch what they expect
// (InvalidArgumentError is also a ValueError, FileError an OSError, OutOfMemoryError a
// MemoryError).
#include <array>
#include <utility>

#include "common.hpp"
#include "vkformer/error.hpp"

namespace vkformer::py {

namespace {

struct ErrorClass {
  ErrorCode code;
  const char* code_name;  // `.code`: the enumerator's name, as a program would spell it
  const char* name;
  PyObject* extra_base;  // a builtin exception it also is, or null
  PyObject* type = nullptr;
};

std::array<ErrorClass, 10>& classes() {
  static std::array<ErrorClass, 10> c = {{
      {ErrorCode::invalid_argument, "invalid_argument", "InvalidArgumentError", PyExc_ValueError},
      {ErrorCode::shape_mismatch, "shape_mismatch", "ShapeMismatchError", PyExc_ValueError},
      {ErrorCode::device_not_found, "device_not_found", "DeviceNotFoundError", nullptr},
      {ErrorCode::unsupported, "unsupported", "UnsupportedError", nullptr},
      {ErrorCode::out_of_memory, "out_of_memory", "OutOfMemoryError", PyExc_MemoryError},
      {ErrorCode::device_lost, "device_lost", "DeviceLostError", nullptr},
      {ErrorCode::vulkan, "vulkan", "VulkanError", nullptr},
      {ErrorCode::io, "io", "FileError", PyExc_OSError},
      {ErrorCode::format, "format", "FormatError", PyExc_ValueError},
      {ErrorCode::internal, "internal", "InternalError", nullptr},
  }};
  return c;
}

PyObject* base_error = nullptr;

void raise(const Error& e) {
  PyObject* type = base_error;
  const char* code = "internal";
  for (const ErrorClass& c : classes())
    if (c.code == e.code()) type = c.type, code = c.code_name;
  nb::object instance = nb::borrow(type)(nb::str(e.what()));
  instance.attr("code") = nb::str(code);
  PyErr_SetObject(type, instance.ptr());
}

}  // namespace

void bind_errors(nb::module_& m) {
  base_error = PyErr_NewExceptionWithDoc(
      "vkformer.Error",
      "Every failure vkformer reports: the library's message (what, where, expected vs got) and "
      "`code`, one of 'invalid_argument', 'shape_mismatch', 'device_not_found', 'unsupported', "
      "'out_of_memory', 'device_lost', 'vulkan', 'io', 'format', 'internal'.",
      PyExc_RuntimeError, nullptr);
  m.attr("Error") = nb::handle(base_error);
  for (ErrorClass& c : classes()) {
    nb::object bases = c.extra_base ? nb::make_tuple(nb::handle(base_error), nb::handle(c.extra_base))
                                    : nb::make_tuple(nb::handle(base_error));
    std::string qualified = std::string("vkformer.") + c.name;
    c.type = PyErr_NewException(qualified.c_str(), bases.ptr(), nullptr);
    m.attr(c.name) = nb::handle(c.type);
  }
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const Error& e) {
      raise(e);
    }
  });
}

}  // namespace vkformer::py
