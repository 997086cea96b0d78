#pragma once
#include <map>
#include <string>
#include <vector>

#include "op_attrs.hpp"
#include "vkformer/error.hpp"
#include "vkformer/graph.hpp"

namespace vkformer {

struct ValueInfo {
  Shape shape;
  DType dtype = DType::f32;
  uint32_t producer = 0;  // node index
};

struct Node {
  OpKind kind;
  std::string label;            // "scope/op" for profiles and errors
  std::vector<uint32_t> inputs; // value ids
  uint32_t output = 0;          // value id
  OpAttrs attrs;
};

class GraphImpl {
 public:
  GraphImpl();
  const uint32_t serial;  // distinct per graph, stamped on its tensors
  std::vector<ValueInfo> values;
  std::vector<Node> nodes;
  std::vector<std::pair<std::string, uint32_t>> inputs;   // in declaration order
  std::vector<std::pair<std::string, uint32_t>> outputs;
  std::map<uint32_t, HostTensor> constants;
  std::map<uint32_t, DeviceTensor> externals;
  std::map<uint32_t, uint32_t> pinned;  // value -> external value it is computed into
  std::vector<std::string> scopes;

  // Appends a node producing one new value.
  Tensor add_node(OpKind kind, const std::string& op, std::vector<uint32_t> inputs, OpAttrs attrs,
                  const Shape& shape, DType dtype);
  std::string label(const std::string& op) const;
  // Whether node n's result is a run of its input's elements in the same order, starting at
  // element *offset, so that it can alias its input instead of being computed: reshape, and head
  // splits and concatenations that move nothing (a single position or a single head, all of the
  // columns; or a single row of a split, any columns). A result written into a target (pinned)
  // is still computed.
  bool view_of_input(const Node& n, int64_t* offset) const;

  // Graph::rope_kv_cache with the first column of q, k and v in their rows
  // (src/ops/rope_kv_cache.cpp).
  RopeKvCache rope_kv_cache(Tensor q, Tensor k, Tensor v, int heads, int kv_heads, int64_t q_off,
                            int64_t k_off, int64_t v_off, Tensor cache_k, Tensor cache_v,
                            Tensor position, const RopeOptions& rope,
                            const std::optional<Tensor>& cache_slot, const KvRotation& rotation);

  // Throws unless `t` is a tensor of this graph (and still has the shape it was created with).
  void check(const Tensor& t, const std::string& op, const char* arg) const;
  bool has_name(const std::string& name) const;
};

// Throws shape_mismatch: "<label>: <detail>".
[[noreturn]] void shape_error(const std::string& label, const std::string& detail);

std::string describe(const Tensor& t);  // "[2,3,5] f32"

}  // namespace vkformer
