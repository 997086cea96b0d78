// Quantized weights read through a texel buffer, for the CPU-device matmul kernels
// (matmul_wq_texel.comp, matmul_wq_vec.comp). The kernel declares `uniform usamplerBuffer W`
// viewed as 16-byte texels (R32G32B32A32_UINT) of the weight's raw bytes and includes this after
// it. One W_<type> of include/vkformer/quant_types.def is defined (block layouts as in
// weights.glsl).
//
// Why 16-byte texels: lavapipe fetches one with eight plain 16-byte loads and a transpose, while
// a 4-byte texel costs a gather (vpgatherdd), which took 60% of the time of the mat-vec that read
// W as R32_UINT words. A block's words start at any word of a texel (rows of 18-, 20-, 22- or
// 34-byte blocks start at any word), so each lane realigns the words it fetched with two selects
// per word.
#ifndef VKF_WQ_TEXEL_GLSL
#define VKF_WQ_TEXEL_GLSL

// A block is BLOCK_HW halfwords; BW words starting at the one holding its first halfword cover
// it at either halfword parity. NQ words of quantized values follow the header. The k-quants are
// read a 32-element sub-block at a time (block b is sub-block b % 8 of super-block b / 8,
// SUPER_HW halfwords).
#if defined(W_Q8_0)
#define BLOCK_HW 17u
#define BW 9u
#define NQ 8u
#elif defined(W_Q4_0)
#define BLOCK_HW 9u
#define BW 5u
#define NQ 4u
#elif defined(W_Q4_1)
#define BLOCK_HW 10u  // always word aligned: rows are whole words
#define BW 5u
#define NQ 4u
#elif defined(W_Q5_0)
#define BLOCK_HW 11u
#define BW 6u
#elif defined(W_Q4_K)
#define SUPER_HW 72u  // 144 bytes: 9 whole texels, and rows are whole super-blocks
#define W_K_QUANT 1
#elif defined(W_Q5_K)
#define SUPER_HW 88u  // 176 bytes: 11 whole texels: the header, 2 of high bits, 8 of nibbles
#define W_K_QUANT 1
#elif defined(W_Q6_K)
#define SUPER_HW 105u
#define W_K_QUANT 1
#else
#error "define one W_<type> of include/vkformer/quant_types.def"
#endif

// The first halfword of row n of a weight with K columns is n * row_hw(K).
#ifdef W_K_QUANT
uint row_hw(uint k) { return (k / 256u) * SUPER_HW; }
#else
uint row_hw(uint k) { return (k / 32u) * BLOCK_HW; }
#endif

// Words w0 .. w0 + 8 of W into fw. Callers that use fewer words fetch fewer texels (the unused
// fetches are dead code).
uint fw[9];
#ifdef WQ_LAST
// The kernel sets w_last = textureSize(W) - 1 once, at its start: a textureSize() per fetch
// costs lavapipe much more compilation (and a query per call).
int w_last;
#endif
void fetch_words(uint w0) {
  const uint t0 = w0 >> 2, s = w0 & 3u;
  // Texels past the view hold no wanted word; the clamp keeps the fetch in bounds.
#ifdef WQ_LAST
  const int last = w_last;
#else
  const int last = textureSize(W) - 1;
#endif
  uint u[12];
  [[unroll]] for (uint i = 0; i < 3u; ++i) {
    const uvec4 v = texelFetch(W, min(int(t0 + i), last));
    u[4 * i] = v.x;
    u[4 * i + 1] = v.y;
    u[4 * i + 2] = v.z;
    u[4 * i + 3] = v.w;
  }
  const bool two = (s & 2u) != 0u, one = (s & 1u) != 0u;
  uint a[10];
  [[unroll]] for (uint j = 0; j < 10u; ++j) a[j] = two ? u[j + 2] : u[j];
  [[unroll]] for (uint j = 0; j < 9u; ++j) fw[j] = one ? a[j + 1] : a[j];
}

// The halfword at `h` (any parity).
uint fetch_half(uint h) {
  fetch_words(h >> 1);
  return (fw[0] >> ((h & 1u) << 4)) & 0xffffu;
}

// The 8 words of 32 bytes starting at halfword h (any parity), into q8.
uint q8[8];
void fetch_32_bytes(uint h) {
  fetch_words(h >> 1);
  const bool odd = (h & 1u) != 0u;
  [[unroll]] for (uint g = 0; g < 8u; ++g) q8[g] = odd ? (fw[g] >> 16) | (fw[g + 1] << 16) : fw[g];
}

#ifdef WQ_BLOCKS
// With WQ_BLOCKS defined (a constant): blocks decoded for raw sums (matmul_wq_vec.comp,
// matmul_wq_rows.comp). load_block(j, row, b) puts block b of the row starting at halfword `row`
// into slot j < WQ_BLOCKS: its raw words (qw) and scales, value = bd · q + bm per half of the
// block (q6_k scales its halves apart); quant(j, e) is the quantized value q of its element e.
#if defined(W_Q6_K) || defined(W_Q5_K)
#define QW 16u
#elif defined(W_Q8_0) || defined(W_Q4_K)
#define QW 8u
#elif defined(W_Q5_0)
#define QW 5u
#else
#define QW 4u
#endif
uint qw[WQ_BLOCKS * QW];
float bd[WQ_BLOCKS * 2], bm[WQ_BLOCKS * 2];

void set_scale(uint j, float d, float m) {
  bd[2 * j] = d;
  bd[2 * j + 1] = d;
  bm[2 * j] = m;
  bm[2 * j + 1] = m;
}

#if defined(W_Q4_K) || defined(W_Q5_K)
// qw[at..at+7] = the words of two texels shifted right by `shift` (a sub-block's nibbles or high
// bits in the low bits of each byte; the kernels mask what they use).
void put_shifted(uint at, uvec4 a, uvec4 b, uint shift) {
  [[unroll]] for (uint g = 0; g < 4u; ++g) {
    qw[at + g] = a[g] >> shift;
    qw[at + 4u + g] = b[g] >> shift;
  }
}
#endif

void load_block(uint j, uint row, uint b) {
#if defined(W_Q4_K) || defined(W_Q5_K)
  // Super-blocks are whole texels: the header, (q5_k) 2 of high bits, 8 of nibbles.
  const uint sb = (row + (b / 8u) * SUPER_HW) >> 3, s = b % 8u;
  const uvec4 header = texelFetch(W, int(sb));
  const vec2 dm = unpackHalf2x16(header.x);
  const uint s0 = header.y, s1 = header.z, s2 = header.w;
  // ggml's get_scale_min_k4 on the 12 scale bytes s0..s2, for sub-block s (uniform).
  uint sc, mn;
  if (s < 4u) {
    sc = (s0 >> (8u * s)) & 63u;
    mn = (s1 >> (8u * s)) & 63u;
  } else {
    const uint hi = (s2 >> (8u * (s - 4u))) & 0xffu;
    sc = (hi & 0xfu) | (((s0 >> (8u * (s - 4u))) >> 6 & 3u) << 4);
    mn = (hi >> 4) | (((s1 >> (8u * (s - 4u))) >> 6 & 3u) << 4);
  }
  set_scale(j, dm.x * float(sc), -(dm.y * float(mn)));
#if defined(W_Q5_K)
  const uint nibbles = sb + 3u;
  const uvec4 h0 = texelFetch(W, int(sb + 1u)), h1 = texelFetch(W, int(sb + 2u));
  put_shifted(j * QW + 8u, h0, h1, s);
#else
  const uint nibbles = sb + 1u;
#endif
  const uvec4 q0 = texelFetch(W, int(nibbles + 2u * (s / 2u)));
  const uvec4 q1 = texelFetch(W, int(nibbles + 1u + 2u * (s / 2u)));
  const uint shift = 4u * (s & 1u);
  put_shifted(j * QW, q0, q1, shift);
#elif defined(W_Q6_K)
  const uint sb = row + (b / 8u) * SUPER_HW, s = b % 8u, h = s / 4u, r = s % 4u;
  const uint scales = fetch_half(sb + 96u + 4u * h + r);
  const float d = unpackHalf2x16(fetch_half(sb + 104u)).x;
  // ggml's order: (d * sc) * q.
  const float d0 = d * float(int(scales << 24) >> 24), d1 = d * float(int(scales << 16) >> 24);
  bd[2 * j] = d0;
  bd[2 * j + 1] = d1;
  bm[2 * j] = -32.0 * d0;
  bm[2 * j + 1] = -32.0 * d1;
  fetch_32_bytes(sb + 64u + 16u * h);
  [[unroll]] for (uint g = 0; g < 8u; ++g) qw[j * QW + 8u + g] = q8[g] >> (2u * r);
  fetch_32_bytes(sb + 32u * h + 16u * (r & 1u));
  [[unroll]] for (uint g = 0; g < 8u; ++g) qw[j * QW + g] = q8[g] >> (4u * (r / 2u));
#else
  const uint h = row + b * BLOCK_HW;
  fetch_words(h >> 1);
  const bool odd = (h & 1u) != 0u;
#if defined(W_Q5_0)
  // Halfwords 0..10 of the block: d, the 32 high bits, then 16 bytes of nibbles.
  uint hw[11];
  [[unroll]] for (uint i = 0; i < 11u; ++i)
    hw[i] = odd ? (fw[(i + 1u) >> 1] >> (((i + 1u) & 1u) << 4)) & 0xffffu
                : (fw[i >> 1] >> ((i & 1u) << 4)) & 0xffffu;
  const float d = unpackHalf2x16(hw[0]).x;
  set_scale(j, d, -16.0 * d);
  qw[j * QW] = hw[1] | (hw[2] << 16);
  [[unroll]] for (uint g = 0; g < 4u; ++g) qw[j * QW + 1u + g] = hw[3 + 2 * g] | (hw[4 + 2 * g] << 16);
#elif defined(W_Q4_1)
  const vec2 dm = unpackHalf2x16(fw[0]);
  set_scale(j, dm.x, dm.y);
  [[unroll]] for (uint g = 0; g < NQ; ++g) qw[j * QW + g] = fw[1 + g];
#else
  // The header is the halfword at h; the values start at h + 1, word aligned when h is odd.
  const float d = unpackHalf2x16(odd ? fw[0] >> 16 : fw[0]).x;
#if defined(W_Q4_0)
  set_scale(j, d, -8.0 * d);
#else
  set_scale(j, d, 0.0);
#endif
  [[unroll]] for (uint g = 0; g < NQ; ++g)
    qw[j * QW + g] = odd ? fw[1 + g] : (fw[g] >> 16) | (fw[g + 1] << 16);
#endif
#endif
}

// The quantized value q of element e (a constant after unrolling) of the lane's block j.
float quant(uint j, uint e) {
#if defined(W_Q8_0)
  return float(int(qw[j * QW + e / 4u] << (24u - 8u * (e % 4u))) >> 24);
#elif defined(W_Q4_K)
  return float((qw[j * QW + e / 4u] >> (8u * (e % 4u))) & 0xfu);
#elif defined(W_Q5_K)
  const uint low = (qw[j * QW + e / 4u] >> (8u * (e % 4u))) & 0xfu;
  const uint high = (qw[j * QW + 8u + e / 4u] >> (8u * (e % 4u))) & 1u;
  return float(low | (high << 4));
#elif defined(W_Q6_K)
  const uint low = (qw[j * QW + e / 4u] >> (8u * (e % 4u))) & 0xfu;
  const uint high = (qw[j * QW + 8u + e / 4u] >> (8u * (e % 4u))) & 3u;
  return float(low | (high << 4));
#else
  // Byte i of the 16 holds element i in its low nibble and element i + 16 in its high one.
  const uint nib = (qw[j * QW + (QW - 4u) + (e % 16u) / 4u] >> (8u * (e % 4u) + 4u * (e / 16u))) & 0xfu;
#if defined(W_Q5_0)
  return float(nib | (((qw[j * QW] >> e) & 1u) << 4));
#else
  return float(nib);
#endif
#endif
}
#endif

#endif
