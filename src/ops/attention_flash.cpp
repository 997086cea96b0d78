// Split-K flash decoding (shaders/attention_flash_decode.comp + attention_flash_combine.comp)
// and flash attention on cooperative matrices (shaders/attention_flash.comp): when each fits a
// problem and how it is emitted. The tuning (src/kernels/tuning_attention.cpp) says whether a device
// takes them and with which configuration; this file checks what the problem and the device's
// kernels allow, and records the dispatches.
#include "attention_flash.hpp"

#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "kv_cache_types.hpp"
#include "op_common.hpp"
#include "rope.hpp"
#include "windows.hpp"

namespace vkformer::ops {

using kernels::Kernel;

namespace {

// Push constants of both kernels (shaders/attention_flash.glsl).
struct FlashPush {
  uint32_t sq;
  uint32_t sk;
  uint32_t heads;
  uint32_t q_blocks;
  uint32_t groups;
  float scale;
  uint32_t d;
  uint32_t dv;
  uint32_t mask_stride[4];
  uint32_t bh_base;
  uint32_t group;
  uint32_t splits;
  uint32_t kv_batches;
  float softcap;  // AttentionOptions::softcap, read where the SOFT_CAP constant is set
  uint32_t causal_at_length;  // AttentionOptions::causal_at_key_length
};

// shaders/attention_flash_combine.comp.
struct CombinePush {
  uint32_t total_rows;
  uint32_t rows;
  uint32_t splits;
  uint32_t dv;
};

template <class Spec>
std::vector<uint32_t> spec_values(const Spec& s) {
  static_assert(sizeof(Spec) % 4 == 0 && std::is_trivially_copyable_v<Spec>);
  std::vector<uint32_t> v(sizeof(Spec) / 4);
  std::memcpy(v.data(), &s, sizeof(Spec));
  return v;
}

// The specialization constants of shaders/attention_flash.comp, in constant_id order.
struct FlashSpec {
  uint32_t workgroup;  // subgroup * warps
  uint32_t subgroup;
  uint32_t m, n, k;    // the MMA shape
  uint32_t warps, row_tiles, bc;
  uint32_t d_cap, dv_cap;
  uint32_t has_mask, has_key_padding, has_key_length, causal;
  uint32_t vec8;       // d and dv multiples of 8: 8 elements per load
  uint32_t soft_cap;
};
static_assert(sizeof(FlashSpec) == 16 * 4);

// The specialization constants of shaders/attention_flash_decode.comp, in constant_id order.
struct DecodeSpec {
  uint32_t workgroup;
  uint32_t rows;
  uint32_t tile_keys;
  uint32_t d_cap, dv_cap;
  uint32_t has_mask, has_key_padding, has_key_length, causal;
  uint32_t per_sequence;
  uint32_t soft_cap;
  uint32_t k_type, v_type;  // the _kvq variants only (kv_cache_types.hpp codes)
};
static_assert(sizeof(DecodeSpec) == 13 * 4);

constexpr uint32_t kCombineWorkgroup = 64;

Kernel flash_kernel(vk::CoopmatApi api) {
  switch (api) {
    case vk::CoopmatApi::khr: return Kernel::attention_flash_khr;
    case vk::CoopmatApi::nv: return Kernel::attention_flash_nv;
    case vk::CoopmatApi::emulated: return Kernel::attention_flash_emu;
    case vk::CoopmatApi::none: break;
  }
  throw Error(ErrorCode::internal, "flash_kernel: no kernel for cooperative matrices 'none'");
}

// What both kernels read, with their sizes per (b, KV head).
struct Shapes {
  int64_t B, H, Sq, D, Hkv, Sk, Dv, group;
  DType dtype;
  DType k_type, v_type;  // the caches' types: dtype, or others (kv_quant)
  bool kv_quant;
};

Shapes shapes(const Lowering& l, const AttentionOperands& in) {
  const Shape& qs = l.value(in.q).shape;
  const int64_t Hkv = l.value(in.k).shape[1];
  const DType dtype = l.value(in.q).dtype, k_type = l.value(in.k).dtype, v_type = l.value(in.v).dtype;
  return {qs[0], qs[1], qs[2], qs[3], Hkv, l.value(in.k).shape[2], l.value(in.v).shape[3],
          qs[1] / Hkv, dtype, k_type, v_type, kv_converted(dtype, k_type, v_type)};
}

FlashPush push_for(const Lowering& l, const AttentionOperands& in, const Shapes& s) {
  FlashPush p{};
  p.sq = static_cast<uint32_t>(s.Sq);
  p.sk = static_cast<uint32_t>(s.Sk);
  p.heads = static_cast<uint32_t>(s.H);
  p.scale = ops::attrs<AttentionAttrs>(l).scale;
  p.d = static_cast<uint32_t>(s.D);
  p.dv = static_cast<uint32_t>(s.Dv);
  p.group = static_cast<uint32_t>(s.group);
  p.kv_batches = static_cast<uint32_t>(l.value(in.k).shape[0]);
  p.softcap = ops::attrs<AttentionAttrs>(l).softcap;
  p.causal_at_length = in.causal_at_key_length;
  if (in.mask != kNoValue)
    broadcast_strides4(l.value(in.mask).shape, {s.B, s.H, s.Sq, s.Sk}, p.mask_stride);
  return p;
}

// q, k, v, mask, key padding, key_length (absent ones bound to q, never read) and `out`.
std::vector<Binding> input_bindings(const AttentionOperands& in) {
  auto or_q = [&](uint32_t v) { return Binding{v != kNoValue ? v : in.q}; };
  return {{in.q}, {in.k}, {in.v}, or_q(in.mask), or_q(in.key_padding), or_q(in.key_length)};
}

// Calls emit(first, count, bindings) per window of whole (b, KV head) slices of q, k, v and
// `out` (binding 6): one call where everything fits one binding (src/ops/windows.hpp).
template <class Emit>
void for_kv_windows(Lowering& l, const AttentionOperands& in, const Shapes& s,
                    std::vector<Binding> whole, Emit&& emit) {
  const uint64_t es = dtype_size(s.dtype);
  // With KV slots, k and v are [slots, ...] whatever q's batch, bound whole (require_whole_kv)
  // and read at each row's slot: only q and out are counted by (b, KV head).
  const uint64_t per_kv = in.kv_slot != kNoValue ? 0 : 1;
  const uint64_t item[4] = {uint64_t(s.group * s.Sq * s.D) * es, dtype_bytes(s.k_type, s.Sk * s.D) * per_kv,
                            dtype_bytes(s.v_type, s.Sk * s.Dv) * per_kv,
                            uint64_t(s.group * s.Sq * s.Dv) * es};
  const std::vector<Span> spans =
      split_spans(uint64_t(s.B * s.Hkv), {item[0], item[1], item[2], item[3]},
                  l.tuning().max_binding_bytes, window_alignment(l.info()),
                  l.node().label + ": heads of q, k, v");
  require_whole_kv(l, in, spans.size(), "attention");
  for (const Span& span : spans) {
    std::vector<Binding> bindings = whole;
    if (spans.size() > 1) {
      const size_t at[4] = {0, 1, 2, 6};
      for (size_t i = 0; i < 4; ++i)
        bindings[at[i]] = window(whole[at[i]].value, whole[at[i]].write,
                                 span.first * item[i], span.count * item[i]);
    }
    emit(span, std::move(bindings));
  }
}

// ---- Split-K flash decoding ----

// The decode kernels for caches in q's type or (kv_quant) in their own, or (rope) with a
// decoding step's rope_kv_cache inside.
Kernel decode_kernel(bool split, bool kv_quant, bool rope = false) {
  if (kv_quant) return split ? Kernel::attention_flash_decode_split_kvq : Kernel::attention_flash_decode_kvq;
  if (rope) return split ? Kernel::attention_flash_decode_split_rope : Kernel::attention_flash_decode_rope;
  return split ? Kernel::attention_flash_decode_split : Kernel::attention_flash_decode;
}

// Whether the decode kernel takes in.rope itself: its ROPE_KV variant on the device, q, k and v
// each in one binding (the kernel indexes the new row by the global (b, KV head)).
bool decode_takes_rope(const Lowering& l, const AttentionOperands& in, const Shapes& s, bool split) {
  if (!in.rope || s.kv_quant || !l.supported(decode_kernel(split, false, true), s.dtype)) return false;
  const uint64_t limit = l.tuning().max_binding_bytes;
  auto bytes = [&](uint32_t v) { return dtype_bytes(l.value(v).dtype, l.value(v).shape.numel()); };
  return bytes(in.k) <= limit && bytes(in.v) <= limit && bytes(in.out) <= limit;
}

bool decode_fits(const Lowering& l, const AttentionOperands& in, kernels::DecodeLaunch* launch) {
  const DType dtype = l.value(in.q).dtype;
  if (!kernels::decode_launch_for(l.tuning().attention.decode, l.info(), attention_problem(l, in),
                             launch))
    return false;
  const Shapes s = shapes(l, in);
  if (launch->splits == 1) return l.supported(decode_kernel(false, s.kv_quant), dtype);
  // The partial results and the output are bound whole by the second dispatch.
  const uint64_t rows = uint64_t(s.B * s.H * s.Sq);
  const uint64_t limit = l.tuning().max_binding_bytes;
  return l.supported(decode_kernel(true, s.kv_quant), dtype) &&
         l.supported(Kernel::attention_flash_combine, dtype) &&
         rows * launch->splits * uint64_t(s.Dv) * 4 <= limit &&
         rows * uint64_t(s.Dv) * dtype_size(dtype) <= limit;
}

void emit_decode(Lowering& l, AttentionOperands in, const kernels::DecodeLaunch& t) {
  const Shapes s = shapes(l, in);
  const bool split = t.splits > 1;
  const bool rope = decode_takes_rope(l, in, s, split);
  if (in.rope && !rope) emit_rope_apart(l, in);
  struct {
    FlashPush flash;
    RopeKvPush rope;
  } p{push_for(l, in, s), {}};
  static_assert(sizeof(p) <= 128);
  p.flash.splits = t.splits;
  p.flash.q_blocks = 1;
  if (rope) p.rope = rope_kv_push(l, in);
  const DecodeSpec spec{t.config.workgroup, t.rows, t.config.tile_keys, t.d_cap, t.dv_cap,
                        in.mask != kNoValue, in.key_padding != kNoValue,
                        in.key_length != kNoValue, in.causal, in.kv_slot != kNoValue,
                        p.flash.softcap > 0.0f, kv_type_code(s.k_type), kv_type_code(s.v_type)};
  std::vector<Binding> whole = input_bindings(in);
  if (rope) {  // the rotated q is the kernel's own, never written; the caches' new rows are
    for (Binding& b : whole)
      if (b.value == in.q) b.value = in.rope_in.q;
    whole[1].write = whole[2].write = true;
  }
  uint32_t part_o = kNoValue, part_ml = kNoValue;
  const int64_t pairs = s.B * s.Hkv;
  if (split) {
    part_o = l.temp({pairs, t.splits, t.rows, s.Dv}, DType::f32);
    part_ml = l.temp({pairs, t.splits, t.rows, 2}, DType::f32);
    whole.push_back({part_o, true});
    whole.push_back({part_ml, true});
  } else {
    whole.push_back({in.out, true});
    whole.push_back({whole[0].value});  // binding 7 (the split's partial maxima) unused
  }
  whole.push_back({in.kv_slot != kNoValue ? in.kv_slot : whole[0].value});  // binding 8
  if (rope) {
    const std::vector<Binding> r = rope_kv_inputs(l, in);  // bindings 9-13
    whole.insert(whole.end(), r.begin(), r.end());
  }
  const Kernel kernel = decode_kernel(split, s.kv_quant, rope);
  std::vector<uint32_t> spec_list = spec_values(spec);
  if (!s.kv_quant) spec_list.resize(spec_list.size() - 2);  // no cache types to specialize
  for_kv_windows(l, in, s, std::move(whole), [&](const Span& span, std::vector<Binding> bindings) {
    if (split) bindings[6] = {part_o, true};  // partials stay whole: indexed by global pair
    const uint64_t groups = span.count * t.splits;
    p.flash.groups = static_cast<uint32_t>(groups);
    p.flash.bh_base = static_cast<uint32_t>(span.first * s.group);
    l.dispatch(kernel, s.dtype, std::move(bindings), rope ? PushBlock::of(p) : PushBlock::of(p.flash),
               l.rows_grid(groups), spec_list);
  });
  if (!split) return;
  CombinePush c{};
  c.total_rows = static_cast<uint32_t>(pairs * t.rows);
  c.rows = t.rows;
  c.splits = t.splits;
  c.dv = static_cast<uint32_t>(s.Dv);
  l.dispatch(Kernel::attention_flash_combine, s.dtype, {{part_o}, {part_ml}, {in.out, true}},
             PushBlock::of(c), l.rows_grid(c.total_rows), {kCombineWorkgroup});
}

// ---- Flash attention on cooperative matrices ----

bool flash_fits(const Lowering& l, const AttentionOperands& in, kernels::FlashLaunch* launch) {
  if (in.kv_slot != kNoValue) return false;  // its kernel reads k and v by q's batch
  const DType dtype = l.value(in.q).dtype;
  // Caches in their own types: no KV_QUANT variant of it yet (the scalar kernels read them).
  if (kv_converted(dtype, l.value(in.k).dtype, l.value(in.v).dtype)) return false;
  return kernels::flash_launch_for(l.tuning().attention.flash, l.info(), attention_problem(l, in),
                              dtype, launch) &&
         l.supported(flash_kernel(launch->api), dtype);
}

void emit_flash(Lowering& l, AttentionOperands in, const kernels::FlashLaunch& t) {
  emit_rope_apart(l, in);
  const Shapes s = shapes(l, in);
  FlashPush p = push_for(l, in, s);
  const uint32_t q_blocks = ceil_div(s.Sq, t.br());
  p.q_blocks = q_blocks;
  p.splits = 1;
  const FlashSpec spec{t.invocations(),
                       t.subgroup,
                       t.shape.m,
                       t.shape.n,
                       t.shape.k,
                       t.config.warps,
                       t.config.row_tiles,
                       t.config.bc,
                       t.d_cap,
                       t.dv_cap,
                       in.mask != kNoValue,
                       in.key_padding != kNoValue,
                       in.key_length != kNoValue,
                       in.causal,
                       s.D % 8 == 0 && s.Dv % 8 == 0,
                       p.softcap > 0.0f};
  std::vector<Binding> whole = input_bindings(in);
  whole.push_back({in.out, true});
  for_kv_windows(l, in, s, std::move(whole), [&](const Span& span, std::vector<Binding> bindings) {
    const uint64_t groups = span.count * uint64_t(s.group) * q_blocks;
    p.groups = static_cast<uint32_t>(groups);
    p.bh_base = static_cast<uint32_t>(span.first * s.group);
    l.dispatch(flash_kernel(t.api), s.dtype, std::move(bindings), PushBlock::of(p),
               l.rows_grid(groups), spec_values(spec));
  });
}

// ---- The table ----

// One fused path: its name, when it fits (the tuning's launch and kernels the device can run)
// and how it is emitted. In order of preference: the first that fits is taken.
struct FlashPath {
  const char* name;
  bool (*fits)(const Lowering&, const AttentionOperands&);
  void (*emit)(Lowering&, const AttentionOperands&);
};

const FlashPath kFlashPaths[] = {
    {"decode",
     [](const Lowering& l, const AttentionOperands& in) {
       kernels::DecodeLaunch t;
       return decode_fits(l, in, &t);
     },
     [](Lowering& l, const AttentionOperands& in) {
       kernels::DecodeLaunch t;
       decode_fits(l, in, &t);
       emit_decode(l, in, t);
     }},
    {"flash",
     [](const Lowering& l, const AttentionOperands& in) {
       kernels::FlashLaunch t;
       return flash_fits(l, in, &t);
     },
     [](Lowering& l, const AttentionOperands& in) {
       kernels::FlashLaunch t;
       flash_fits(l, in, &t);
       emit_flash(l, in, t);
     }},
};

}  // namespace

void require_whole_kv(const Lowering& l, const AttentionOperands& in, size_t windows, const char* what) {
  if (in.kv_slot == kNoValue) return;
  const uint64_t limit = l.tuning().max_binding_bytes;
  auto bytes = [&](uint32_t v) {
    return static_cast<uint64_t>(l.value(v).shape.numel()) * dtype_size(l.value(v).dtype);
  };
  if (windows <= 1 && bytes(in.k) <= limit && bytes(in.v) <= limit) return;
  throw Error(ErrorCode::unsupported,
              l.node().label + ": " + what + " with per-sequence KV slots needs q, k " +
                  l.value(in.k).shape.str() + " and v each within one binding of device '" +
                  l.info().name + "' (" + std::to_string(limit) +
                  " bytes): fewer slots or a shorter context");
}

kernels::AttentionProblem attention_problem(const Lowering& l, const AttentionOperands& in) {
  const Shape& qs = l.value(in.q).shape;
  const Shape& ks = l.value(in.k).shape;
  return {qs[0], qs[1], qs[2], ks[2], qs[3], l.value(in.v).shape[3], ks[1]};
}

RopeKvPush rope_kv_push(const Lowering& l, const AttentionOperands& in) {
  const RopeKvCacheAttrs& a = *in.rope;
  RopeKvPush p{};
  p.q_stride = static_cast<uint32_t>(l.value(in.rope_in.q).shape[2]);
  p.k_stride = static_cast<uint32_t>(l.value(in.rope_in.k).shape[2]);
  p.v_stride = static_cast<uint32_t>(l.value(in.rope_in.v).shape[2]);
  p.q_off = static_cast<uint32_t>(a.q_offset);
  p.k_off = static_cast<uint32_t>(a.k_offset);
  p.v_off = static_cast<uint32_t>(a.v_offset);
  p.q_heads = static_cast<uint32_t>(l.value(in.rope_in.q_out).shape[1]);
  p.half_dims = static_cast<uint32_t>(a.dims / 2);
  p.base = static_cast<int32_t>(a.offset);
  p.neox = a.style == RopeOptions::Style::neox ? 1u : 0u;
  return p;
}

std::vector<Binding> rope_kv_inputs(Lowering& l, const AttentionOperands& in) {
  const RopeKvCacheAttrs a = *in.rope;  // a copy: constant() grows the tables
  require_rope_kv_position(l, a, in.rope_in.position, 1, l.value(in.k).shape[2]);
  const uint32_t table = l.constant(rope_inv_freq(a.dims, a.freq_base, a.freq_scale, a.freq_factors));
  return {{in.rope_in.q}, {in.rope_in.k}, {in.rope_in.v}, {table}, {in.rope_in.position}};
}

void emit_rope_apart(Lowering& l, AttentionOperands& in) {
  if (!in.rope) return;
  emit_rope_kv_cache(l, *in.rope, in.rope_in);
  in.rope = nullptr;
}

const char* emit_flash_paths(Lowering& l, AttentionOperands in) {
  for (const FlashPath& path : kFlashPaths)
    if (path.fits(l, in)) {
      path.emit(l, in);
      return path.name;
    }
  return nullptr;
}

}  // namespace vkformer::ops
