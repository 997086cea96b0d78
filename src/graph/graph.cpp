// The Graph builder's sources, sinks, views and scopes. Each op family adds its own builder
// methods in src/ops/<family>.cpp next to its lowering.
#include "graph_impl.hpp"

#include <atomic>

#include "vkformer/graph.hpp"

namespace vkformer {

void shape_error(const std::string& label, const std::string& detail) {
  throw Error(ErrorCode::shape_mismatch, label + ": " + detail);
}

std::string describe(const Tensor& t) {
  return t.shape.str() + " " + std::string(dtype_name(t.dtype));
}

static uint32_t next_graph_serial() {
  static std::atomic<uint32_t> counter{0};
  return ++counter;
}

GraphImpl::GraphImpl() : serial(next_graph_serial()) {}

Tensor GraphImpl::add_node(OpKind kind, const std::string& op, std::vector<uint32_t> in,
                           OpAttrs attrs, const Shape& shape, DType dtype) {
  if (shape.numel() == 0)
    shape_error(label(op), "result " + shape.str() + " has no elements; empty tensors are not supported");
  uint32_t value = static_cast<uint32_t>(values.size());
  uint32_t node = static_cast<uint32_t>(nodes.size());
  values.push_back({shape, dtype, node});
  nodes.push_back({kind, label(op), std::move(in), value, std::move(attrs)});
  return Tensor{value, shape, dtype, serial};
}

std::string GraphImpl::label(const std::string& op) const {
  std::string s;
  for (auto& scope : scopes) s += scope + "/";
  return s + op;
}

void GraphImpl::check(const Tensor& t, const std::string& op, const char* arg) const {
  if (!t.valid() || t.graph != serial || t.id >= values.size() || values[t.id].shape != t.shape ||
      values[t.id].dtype != t.dtype)
    throw Error(ErrorCode::invalid_argument,
                label(op) + ": argument '" + arg + "' is not a tensor of this graph");
}

bool GraphImpl::view_of_input(const Node& n, int64_t* offset) const {
  *offset = 0;
  if (n.kind != OpKind::reshape && n.kind != OpKind::split_heads && n.kind != OpKind::concat_heads)
    return false;
  if (pinned.count(n.output)) return false;
  if (n.kind == OpKind::reshape) return true;
  const Shape& in = values[n.inputs[0]].shape;
  if (n.kind == OpKind::concat_heads) return in[1] == 1 || in[2] == 1;  // [B, H, S, D]
  // split_heads: [B, S, C] -> [B, H, S, D], columns [offset, offset + width) of each row.
  const auto& a = std::get<SplitHeadsAttrs>(n.attrs);
  if (in[0] * in[1] == 1) {  // one row: its columns, whatever the heads
    *offset = a.offset;
    return true;
  }
  return (in[1] == 1 || a.heads == 1) && a.offset == 0 && a.width == in[2];
}

bool GraphImpl::has_name(const std::string& name) const {
  for (auto& [n, v] : inputs)
    if (n == name) return true;
  for (auto& [n, v] : outputs)
    if (n == name) return true;
  return false;
}

Graph::Graph() : impl_(std::make_unique<GraphImpl>()) {}
Graph::~Graph() = default;
Graph::Graph(Graph&&) noexcept = default;
Graph& Graph::operator=(Graph&&) noexcept = default;

static GraphImpl& checked(const std::unique_ptr<GraphImpl>& impl) {
  if (!impl)
    throw Error(ErrorCode::invalid_argument,
                "Graph: this graph was moved from; build on the Graph it was moved to");
  return *impl;
}

GraphImpl& Graph::impl() { return checked(impl_); }
const GraphImpl& Graph::impl() const { return checked(impl_); }

static void check_name(const GraphImpl& g, const std::string& name, const char* what) {
  if (name.empty())
    throw Error(ErrorCode::invalid_argument, std::string(what) + ": a name is required");
  if (g.has_name(name))
    throw Error(ErrorCode::invalid_argument,
                std::string(what) + ": the name '" + name + "' is already used in this graph");
}

Tensor Graph::input(const std::string& name, const Shape& shape, DType dtype) {
  check_name(impl(), name, "input");
  Tensor t = impl().add_node(OpKind::input, "input:" + name, {}, {}, shape, dtype);
  impl().inputs.emplace_back(name, t.id);
  return t;
}

Tensor Graph::constant(const std::string& name, HostTensor value) {
  Tensor t = impl().add_node(OpKind::constant, "constant:" + name, {}, {}, value.shape(),
                             value.dtype());
  impl().constants.emplace(t.id, std::move(value));
  return t;
}

Tensor Graph::external(const std::string& name, DeviceTensor tensor) {
  if (!tensor.valid())
    throw Error(ErrorCode::invalid_argument, "external '" + name + "': empty device tensor");
  Tensor t = impl().add_node(OpKind::external, "external:" + name, {}, {}, tensor.shape(),
                             tensor.dtype());
  impl().externals.emplace(t.id, std::move(tensor));
  return t;
}

void Graph::output(const std::string& name, Tensor t) {
  impl().check(t, "output:" + name, "t");
  check_name(impl(), name, "output");
  impl().outputs.emplace_back(name, t.id);
}

void Graph::output_to(Tensor t, const Tensor& target) {
  const std::string op = "output_to";
  impl().check(t, op, "t");
  impl().check(target, op, "target");
  if (!impl().externals.count(target.id))
    shape_error(impl().label(op), "the target must be a tensor made by Graph::external");
  if (t.shape != target.shape || t.dtype != target.dtype)
    shape_error(impl().label(op), "value is " + describe(t) + " but the target is " +
                                      describe(target));
  const Node& producer = impl().nodes[impl().values[t.id].producer];
  if (producer.kind == OpKind::input || producer.kind == OpKind::constant ||
      producer.kind == OpKind::external || producer.kind == OpKind::reshape)
    shape_error(impl().label(op), "only the result of a computing op can be written into a target");
  if (impl().pinned.count(t.id))
    shape_error(impl().label(op), "this value is already written into another target");
  impl().pinned[t.id] = target.id;
}

Tensor Graph::reshape(Tensor x, const Shape& shape) {
  const std::string op = "reshape";
  impl().check(x, op, "x");
  // Quantized weights are read only by the ops made for them (linear/matmul, embedding).
  if (is_quantized(x.dtype))
    shape_error(impl().label(op), "x is " + describe(x) +
                                      ": quantized tensors can only be the weight of "
                                      "linear/matmul or the table of embedding");
  if (shape.numel() != x.shape.numel())
    shape_error(impl().label(op), "cannot reshape " + describe(x) + " to " + shape.str() +
                                      ": element counts differ");
  return impl().add_node(OpKind::reshape, op, {x.id}, {}, shape, x.dtype);
}

Graph::Scope::Scope(Graph& g, const std::string& name) : graph_(&g.impl()) {
  graph_->scopes.push_back(name);
}
// Popped from the state the name was pushed onto, also when the Graph was moved inside the scope
// (a graph built in a function and returned while a scope is open).
Graph::Scope::~Scope() { graph_->scopes.pop_back(); }

}  // namespace vkformer
