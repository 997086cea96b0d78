// vkformer._core: the C++ library bound with nanobind. The public Python API is in
// python/vkformer/*.py, which wraps these classes (keyword arguments, numpy conveniences,
// streaming); this module stays a thin, typed layer over include/vkformer/.
#include "common.hpp"

NB_MODULE(_core, m) {
  namespace nb = nanobind;
  m.doc() = "vkformer's C++ library (use the vkformer package, not this module)";
  // Models and devices left alive when the interpreter exits are freed by the OS; nanobind's
  // leak report would only alarm users of the REPL.
  nb::set_leak_warnings(false);
  vkformer::py::bind_errors(m);
  vkformer::py::bind_devices(m);
  vkformer::py::bind_embedder(m);
  vkformer::py::bind_llm(m);
  vkformer::py::bind_model(m);
  vkformer::py::bind_graph(m);
}
