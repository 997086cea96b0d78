// The fast Walsh-Hadamard transform's butterflies, shared by hadamard.comp (a block in an
// invocation's private array) and the kernels that rotate rows in shared memory
// (rope_kv_cache_quant.comp, rope_shift.comp, through kv_cache_row.glsl's HADAMARD_ROW_PASS).
// x · H for H = (-1)^popcount(i & j) / sqrt(n) (Sylvester's order) is log2 n passes h = 1, 2, ...,
// n / 2, each of n / 2 butterflies pairing element i (bit h of i clear) with i + h:
// (a, c) -> (a + c, a - c), and the 1 / sqrt(n) once at the end.
#ifndef VKF_HADAMARD_GLSL
#define VKF_HADAMARD_GLSL

// The first element of butterfly k of pass h (h a power of two): k with a 0 inserted at bit h.
// Over a row of blocks of n (n a power of two, h < n) butterfly k stays in block 2k / n, so one
// index serves every block of the row.
uint hadamard_butterfly(uint k, uint h) { return ((k & ~(h - 1u)) << 1) | (k & (h - 1u)); }

#endif
