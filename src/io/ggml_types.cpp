// ggml's tensor types: block layouts (ggml-common.h) and host dequantization with ggml's
// arithmetic (ggml-quants.c dequantize_row_*; the gguf Python package's quants.py does the same).
#include <cstring>

#include "io_util.hpp"
#include "vkformer/gguf.hpp"
#include "vkformer/half.hpp"

namespace vkformer {

using io::fail;

namespace {

constexpr uint32_t QK_K = 256;

constexpr GgmlTypeInfo kTypes[] = {
    {GgmlType::F32, "F32", 1, 4, true},
    {GgmlType::F16, "F16", 1, 2, true},
    {GgmlType::Q4_0, "Q4_0", 32, 2 + 16, true},
    {GgmlType::Q4_1, "Q4_1", 32, 2 + 2 + 16, true},
    {GgmlType::Q5_0, "Q5_0", 32, 2 + 4 + 16, true},
    {GgmlType::Q5_1, "Q5_1", 32, 2 + 2 + 4 + 16, true},
    {GgmlType::Q8_0, "Q8_0", 32, 2 + 32, true},
    // ggml's block_q8_1 holds fp16 d and s (36 bytes); the gguf Python package still says 40,
    // from when they were floats.
    {GgmlType::Q8_1, "Q8_1", 32, 2 + 2 + 32, true},
    {GgmlType::Q2_K, "Q2_K", QK_K, 2 + 2 + QK_K / 16 + QK_K / 4, true},
    {GgmlType::Q3_K, "Q3_K", QK_K, 2 + QK_K / 4 + QK_K / 8 + 12, true},
    {GgmlType::Q4_K, "Q4_K", QK_K, 2 + 2 + QK_K / 2 + 12, true},
    {GgmlType::Q5_K, "Q5_K", QK_K, 2 + 2 + QK_K / 2 + QK_K / 8 + 12, true},
    {GgmlType::Q6_K, "Q6_K", QK_K, 2 + QK_K / 2 + QK_K / 4 + QK_K / 16, true},
    {GgmlType::Q8_K, "Q8_K", QK_K, 4 + QK_K + QK_K / 8, false},
    {GgmlType::IQ2_XXS, "IQ2_XXS", QK_K, 2 + QK_K / 4, false},
    {GgmlType::IQ2_XS, "IQ2_XS", QK_K, 2 + QK_K / 4 + QK_K / 32, false},
    {GgmlType::IQ3_XXS, "IQ3_XXS", QK_K, 2 + QK_K / 4 + QK_K / 8, false},
    {GgmlType::IQ1_S, "IQ1_S", QK_K, 2 + QK_K / 8 + QK_K / 16, false},
    {GgmlType::IQ4_NL, "IQ4_NL", 32, 2 + 16, false},
    {GgmlType::IQ3_S, "IQ3_S", QK_K, 2 + QK_K / 4 + QK_K / 8 + QK_K / 32 + 4, false},
    {GgmlType::IQ2_S, "IQ2_S", QK_K, 2 + QK_K / 4 + QK_K / 16, false},
    {GgmlType::IQ4_XS, "IQ4_XS", QK_K, 2 + 2 + QK_K / 2 + QK_K / 64, false},
    {GgmlType::I8, "I8", 1, 1, false},
    {GgmlType::I16, "I16", 1, 2, false},
    {GgmlType::I32, "I32", 1, 4, false},
    {GgmlType::I64, "I64", 1, 8, false},
    {GgmlType::F64, "F64", 1, 8, false},
    {GgmlType::IQ1_M, "IQ1_M", QK_K, QK_K / 8 + QK_K / 16 + QK_K / 32, false},
    {GgmlType::BF16, "BF16", 1, 2, true},
    {GgmlType::TQ1_0, "TQ1_0", QK_K, 2 + 4 * 13, false},
    {GgmlType::TQ2_0, "TQ2_0", QK_K, 2 + 64, false},
    {GgmlType::MXFP4, "MXFP4", 32, 1 + 16, false},
    {GgmlType::NVFP4, "NVFP4", 64, 4 + 32, false},
    {GgmlType::Q1_0, "Q1_0", 128, 2 + 16, false},
};

// Numbers ggml once used and removed; files with them are from old or forked tools.
const char* removed_type_name(uint32_t n) {
  switch (n) {
    case 4: return "Q4_2";
    case 5: return "Q4_3";
    case 31: return "Q4_0_4_4";
    case 32: return "Q4_0_4_8";
    case 33: return "Q4_0_8_8";
    case 36: return "IQ4_NL_4_4";
    case 37: return "IQ4_NL_4_8";
    case 38: return "IQ4_NL_8_8";
    default: return nullptr;
  }
}

uint16_t u16_at(const std::byte* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
float f16_at(const std::byte* p) { return half_to_float(u16_at(p)); }
uint8_t u8_at(const std::byte* p) { return static_cast<uint8_t>(*p); }

// a * b + c with each operation rounded to f32, as ggml's reference and numpy compute it. The
// product of two floats is exact in double, and a double sum of two floats rounded to float is
// the correctly rounded float sum; the conversions keep a compiler from fusing them into an FMA.
inline float mul_add(float a, float b, float c) {
  const auto p = static_cast<float>(static_cast<double>(a) * static_cast<double>(b));
  return static_cast<float>(static_cast<double>(p) + static_cast<double>(c));
}
inline float mul_sub(float a, float b, float c) {
  const auto p = static_cast<float>(static_cast<double>(a) * static_cast<double>(b));
  return static_cast<float>(static_cast<double>(p) - static_cast<double>(c));
}

// Q4_K / Q5_K: eight 6-bit scales and mins packed into 12 bytes (ggml's get_scale_min_k4).
void scale_min_k4(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

void block_q4_0(const std::byte* b, float* y) {
  const float d = f16_at(b);
  for (int l = 0; l < 16; ++l) {
    const uint8_t q = u8_at(b + 2 + l);
    y[l] = static_cast<float>((q & 0xF) - 8) * d;
    y[l + 16] = static_cast<float>((q >> 4) - 8) * d;
  }
}

void block_q4_1(const std::byte* b, float* y) {
  const float d = f16_at(b), m = f16_at(b + 2);
  for (int l = 0; l < 16; ++l) {
    const uint8_t q = u8_at(b + 4 + l);
    y[l] = mul_add(static_cast<float>(q & 0xF), d, m);
    y[l + 16] = mul_add(static_cast<float>(q >> 4), d, m);
  }
}

void block_q5_0(const std::byte* b, float* y) {
  const float d = f16_at(b);
  uint32_t qh;
  std::memcpy(&qh, b + 2, 4);
  for (int l = 0; l < 16; ++l) {
    const uint8_t q = u8_at(b + 6 + l);
    const int x0 = static_cast<int>((q & 0xF) | (((qh >> l) & 1) << 4)) - 16;
    const int x1 = static_cast<int>((q >> 4) | (((qh >> (l + 16)) & 1) << 4)) - 16;
    y[l] = static_cast<float>(x0) * d;
    y[l + 16] = static_cast<float>(x1) * d;
  }
}

void block_q5_1(const std::byte* b, float* y) {
  const float d = f16_at(b), m = f16_at(b + 2);
  uint32_t qh;
  std::memcpy(&qh, b + 4, 4);
  for (int l = 0; l < 16; ++l) {
    const uint8_t q = u8_at(b + 8 + l);
    const uint32_t x0 = (q & 0xF) | (((qh >> l) & 1) << 4);
    const uint32_t x1 = (q >> 4) | (((qh >> (l + 16)) & 1) << 4);
    y[l] = mul_add(static_cast<float>(x0), d, m);
    y[l + 16] = mul_add(static_cast<float>(x1), d, m);
  }
}

void block_q8_0(const std::byte* b, float* y) {
  const float d = f16_at(b);
  for (int l = 0; l < 32; ++l) y[l] = static_cast<float>(static_cast<int8_t>(u8_at(b + 2 + l))) * d;
}

void block_q8_1(const std::byte* b, float* y) {
  const float d = f16_at(b);  // b + 2 holds s = d * sum(q), which dequantization does not need
  for (int l = 0; l < 32; ++l) y[l] = static_cast<float>(static_cast<int8_t>(u8_at(b + 4 + l))) * d;
}

// Q2_K: scales[16] (4-bit scale | 4-bit min), qs[64] (2 bits), d, dmin.
void block_q2_k(const std::byte* b, float* y) {
  const auto* sc = reinterpret_cast<const uint8_t*>(b);
  const auto* qs = sc + 16;
  const float d = f16_at(b + 80), dmin = f16_at(b + 82);
  for (uint32_t e = 0; e < QK_K; ++e) {
    const uint32_t g = e / 128, j = (e / 32) % 4, l = e % 32;
    const uint8_t s = sc[e / 16];
    const float dl = d * static_cast<float>(s & 0xF), ml = dmin * static_cast<float>(s >> 4);
    const uint32_t q = (qs[g * 32 + l] >> (2 * j)) & 3;
    y[e] = mul_sub(dl, static_cast<float>(q), ml);
  }
}

// Q3_K: hmask[32], qs[64] (low 2 bits), scales[12] (16 6-bit scales), d.
void block_q3_k(const std::byte* b, float* y) {
  const auto* hmask = reinterpret_cast<const uint8_t*>(b);
  const auto* qs = hmask + 32;
  const auto* s = qs + 64;
  const float d = f16_at(b + 108);
  float dl[16];
  for (uint32_t k = 0; k < 16; ++k) {
    const uint32_t lo = (s[k % 8] >> (4 * (k / 8))) & 0xF;
    const uint32_t hi = (s[8 + k % 4] >> (2 * (k / 4))) & 3;
    dl[k] = d * static_cast<float>(static_cast<int>(lo | (hi << 4)) - 32);
  }
  for (uint32_t e = 0; e < QK_K; ++e) {
    const uint32_t g = e / 128, j = (e / 32) % 4, l = e % 32;
    const int ql = (qs[g * 32 + l] >> (2 * j)) & 3;
    const int h = (hmask[l] >> (e / 32)) & 1;  // a clear bit subtracts 4
    y[e] = dl[e / 16] * static_cast<float>(ql - (h ? 0 : 4));
  }
}

// Q4_K: d, dmin, scales[12], qs[128]; eight sub-blocks of 32.
void block_q4_k(const std::byte* b, float* y) {
  const float d = f16_at(b), dmin = f16_at(b + 2);
  const auto* scales = reinterpret_cast<const uint8_t*>(b + 4);
  const auto* qs = scales + 12;
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    scale_min_k4(j, scales, &sc, &m);
    const float dj = d * static_cast<float>(sc), mj = dmin * static_cast<float>(m);
    for (int l = 0; l < 32; ++l) {
      const uint32_t q = (qs[(j / 2) * 32 + l] >> (4 * (j % 2))) & 0xF;
      y[j * 32 + l] = mul_sub(dj, static_cast<float>(q), mj);
    }
  }
}

// Q5_K: d, dmin, scales[12], qh[32], qs[128].
void block_q5_k(const std::byte* b, float* y) {
  const float d = f16_at(b), dmin = f16_at(b + 2);
  const auto* scales = reinterpret_cast<const uint8_t*>(b + 4);
  const auto* qh = scales + 12;
  const auto* qs = qh + 32;
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    scale_min_k4(j, scales, &sc, &m);
    const float dj = d * static_cast<float>(sc), mj = dmin * static_cast<float>(m);
    for (int l = 0; l < 32; ++l) {
      const uint32_t q = ((qs[(j / 2) * 32 + l] >> (4 * (j % 2))) & 0xF) | (((qh[l] >> j) & 1) << 4);
      y[j * 32 + l] = mul_sub(dj, static_cast<float>(q), mj);
    }
  }
}

// Q6_K: ql[128] (low 4 bits), qh[64] (high 2 bits), scales[16] (int8), d.
void block_q6_k(const std::byte* b, float* y) {
  const auto* ql = reinterpret_cast<const uint8_t*>(b);
  const auto* qh = ql + 128;
  const auto* sc = reinterpret_cast<const int8_t*>(qh + 64);
  const float d = f16_at(b + 208);
  for (uint32_t e = 0; e < QK_K; ++e) {
    const uint32_t g = e / 128, r = e % 128;
    const uint32_t lo = (ql[g * 64 + r % 64] >> (4 * (r / 64))) & 0xF;
    const uint32_t hi = (qh[g * 32 + r % 32] >> (2 * (r / 32))) & 3;
    const int q = static_cast<int>(lo | (hi << 4)) - 32;
    y[e] = d * static_cast<float>(sc[e / 16]) * static_cast<float>(q);
  }
}

}  // namespace

std::span<const GgmlTypeInfo> ggml_types() { return kTypes; }

const GgmlTypeInfo* find_ggml_type(uint32_t number) {
  for (const GgmlTypeInfo& t : kTypes)
    if (static_cast<uint32_t>(t.type) == number) return &t;
  return nullptr;
}

const GgmlTypeInfo& ggml_type_info(GgmlType type) {
  if (const GgmlTypeInfo* t = find_ggml_type(static_cast<uint32_t>(type))) return *t;
  fail(ErrorCode::invalid_argument, describe_ggml_type_number(static_cast<uint32_t>(type)) +
                                        " is not a ggml type vkformer knows");
}

std::string_view ggml_type_name(GgmlType type) { return ggml_type_info(type).name; }

DType dtype_from_ggml(GgmlType type) {
  switch (type) {
    case GgmlType::F32: return DType::f32;
    case GgmlType::F16: return DType::f16;
    case GgmlType::BF16: return DType::bf16;
    case GgmlType::I32: return DType::i32;
#define VKFORMER_QUANT_TYPE(name, ggml_name, block_elements, block_bytes) \
  case GgmlType::ggml_name: return DType::name;
#include "vkformer/quant_types.def"
#undef VKFORMER_QUANT_TYPE
    default: break;  // ggml types vkformer has no dtype for
  }
  const GgmlTypeInfo* info = find_ggml_type(static_cast<uint32_t>(type));
  throw Error(ErrorCode::format,
              "ggml type " + (info ? std::string(info->name) : describe_ggml_type_number(
                                                                   static_cast<uint32_t>(type))) +
                  " has no vkformer dtype (supported: I32, " + ggml_weight_type_names() + ")");
}

GgmlType ggml_type_of(DType dtype) {
  switch (dtype) {
    case DType::f32: return GgmlType::F32;
    case DType::f16: return GgmlType::F16;
    case DType::i32: return GgmlType::I32;
    case DType::bf16: return GgmlType::BF16;
#define VKFORMER_QUANT_TYPE(name, ggml_name, block_elements, block_bytes) \
  case DType::name: return GgmlType::ggml_name;
#include "vkformer/quant_types.def"
#undef VKFORMER_QUANT_TYPE
  }
  throw Error(ErrorCode::invalid_argument, "ggml_type_of: not a dtype");
}

const char* ggml_weight_type_names() {
  static const std::string names = [] {
    std::string s = "F32, F16, BF16";
    const char* const quantized[] = {
#define VKFORMER_QUANT_TYPE(name, ggml_name, block_elements, block_bytes) #ggml_name,
#include "vkformer/quant_types.def"
#undef VKFORMER_QUANT_TYPE
    };
    const size_t n = sizeof(quantized) / sizeof(quantized[0]);
    for (size_t i = 0; i < n; ++i) s += std::string(i + 1 == n ? " or " : ", ") + quantized[i];
    return s;
  }();
  return names.c_str();
}

std::string describe_ggml_type_number(uint32_t number) {
  std::string s = "ggml type " + std::to_string(number);
  if (const GgmlTypeInfo* t = find_ggml_type(number)) return s + " (" + std::string(t->name) + ")";
  if (const char* removed = removed_type_name(number))
    return s + " (" + removed + ", removed from ggml)";
  return s + " (unknown)";
}

uint64_t ggml_row_bytes(GgmlType type, uint64_t n) {
  const GgmlTypeInfo& t = ggml_type_info(type);
  if (n % t.block_size != 0)
    fail(ErrorCode::invalid_argument, "a " + std::string(t.name) + " row of " + std::to_string(n) +
                                          " elements: not a multiple of its block size " +
                                          std::to_string(t.block_size));
  return n / t.block_size * t.block_bytes;  // no overflow: block_bytes <= 8 * block_size
}

void dequantize_row(GgmlType type, std::span<const std::byte> src, std::span<float> dst) {
  const GgmlTypeInfo& t = ggml_type_info(type);
  if (!t.dequantizable)
    fail(ErrorCode::format,
         "dequantize_row: ggml type " + std::string(t.name) +
             " cannot be converted (vkformer reads F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, "
             "Q8_1, Q2_K, Q3_K, Q4_K, Q5_K and Q6_K)");
  const uint64_t n = dst.size();
  if (n % t.block_size != 0 || src.size() != n / t.block_size * t.block_bytes)
    fail(ErrorCode::invalid_argument,
         "dequantize_row: " + std::to_string(n) + " " + std::string(t.name) + " elements need " +
             (n % t.block_size ? "a multiple of " + std::to_string(t.block_size) + " elements"
                               : std::to_string(n / t.block_size * t.block_bytes) + " bytes") +
             ", given " + std::to_string(src.size()) + " bytes");
  const std::byte* s = src.data();
  float* y = dst.data();
  switch (type) {
    case GgmlType::F32:
      if (n) std::memcpy(y, s, n * 4);
      return;
    case GgmlType::F16:
      for (uint64_t i = 0; i < n; ++i) y[i] = f16_at(s + 2 * i);
      return;
    case GgmlType::BF16:
      for (uint64_t i = 0; i < n; ++i) y[i] = bfloat16_to_float(u16_at(s + 2 * i));
      return;
    default: break;
  }
  void (*block)(const std::byte*, float*) = nullptr;
  switch (type) {
    case GgmlType::Q4_0: block = block_q4_0; break;
    case GgmlType::Q4_1: block = block_q4_1; break;
    case GgmlType::Q5_0: block = block_q5_0; break;
    case GgmlType::Q5_1: block = block_q5_1; break;
    case GgmlType::Q8_0: block = block_q8_0; break;
    case GgmlType::Q8_1: block = block_q8_1; break;
    case GgmlType::Q2_K: block = block_q2_k; break;
    case GgmlType::Q3_K: block = block_q3_k; break;
    case GgmlType::Q4_K: block = block_q4_k; break;
    case GgmlType::Q5_K: block = block_q5_k; break;
    case GgmlType::Q6_K: block = block_q6_k; break;
    default:
      fail(ErrorCode::internal, "dequantize_row: " + std::string(t.name) + " is marked convertible");
  }
  for (uint64_t i = 0; i < n / t.block_size; ++i) block(s + i * t.block_bytes, y + i * t.block_size);
}

}  // namespace vkformer
