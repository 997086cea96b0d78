// Quantized weights read through a texel buffer, for the CPU-device matmul kernels
// (matmul_wq_texel.comp, matmul_wq_vec.comp). The kernel declares `uniform usamplerBuffer W`
// viewed as 16-byte texels (R32G32B32A32_UINT) of the weight's raw bytes and includes this after
// it. One of W_Q8_0, W_Q4_0, W_Q4_1, W_Q5_0, W_Q4_K, W_Q6_K is defined (block layouts as in
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
#elif defined(W_Q6_K)
#define SUPER_HW 105u
#define W_K_QUANT 1
#else
#error "define one of W_Q8_0, W_Q4_0, W_Q4_1, W_Q5_0, W_Q4_K, W_Q6_K"
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
void fetch_words(uint w0) {
  const uint t0 = w0 >> 2, s = w0 & 3u;
  // Texels past the view hold no wanted word; the clamp keeps the fetch in bounds.
  const int last = textureSize(W) - 1;
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

#endif
