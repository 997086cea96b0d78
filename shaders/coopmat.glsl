// Cooperative-matrix fragments for vkformer's kernels: one interface that compiles to
// VK_KHR_cooperative_matrix (-DCOOPMAT_KHR=1), to VK_NV_cooperative_matrix (-DCOOPMAT_NV=1), or to
// an emulation any Vulkan 1.1 device with float16 runs (-DCOOPMAT_EMULATE=1: lavapipe, where the
// tests check every kernel written against this interface). A kernel written against it runs
// the same on all three, so what passes on lavapipe is what runs on the tensor cores.
//
// Before including this file, the kernel defines (constants or specialization constants):
//   COOPMAT_M, COOPMAT_N, COOPMAT_K  the MMA shape: A is M x K, B is K x N, the accumulator M x N
//                                    (a shape the device reports; powers of two for the
//                                    emulation's layouts)
//   COOPMAT_SUBGROUP_SIZE            invocations per subgroup the kernel was laid out for. Real
//                                    backends: the device's subgroup size (the kernel's workgroup
//                                    is a whole number of full subgroups). Emulation: any of
//                                    4, 8, ..., 128, whatever the device's own subgroup size.
//   COOPMAT_SUBGROUPS                subgroups per workgroup. The emulation takes
//                                    COOPMAT_SUBGROUPS * (M*K + K*N) halves of shared memory for
//                                    its scratch: count them in the kernel's shared-memory budget
//                                    (MatmulCoopmatTiles::shared_bytes does for the matmul).
//
// Types (subgroup scope: every invocation of a subgroup holds a share of each fragment):
//   coopmat_a    M x K float16 operand A        coopmat_b    K x N float16 operand B
//   coopmat_acc  M x N float32 accumulator
// Operations (statements; arrays of fragments are fine, e.g. coopmat_acc acc[TILES]). Fragments
// are worked on in place: never assigned, copied, returned or passed to functions (the
// emulation's are structs whose arrays are sized by specialization constants, which GLSL does not
// copy).
//   coopmat_fill(m, v)                          every element of accumulator m = v
//   coopmat_load(m, buf, offset, stride, L)     m from array buf (shared memory or a buffer
//                                               block's array) of m's component type: element
//                                               (r, c) at buf[offset + r * stride + c] for
//                                               L = COOPMAT_ROW_MAJOR, buf[offset + c * stride + r]
//                                               for L = COOPMAT_COL_MAJOR (L a constant)
//   coopmat_load_packed(m, buf, offset, stride, L)  A or B from an array of uvec4 holding 8
//                                               halves each (packFloat2x16 pairs, lower half
//                                               first: the bytes of 8 consecutive halves),
//                                               offset and stride counted in uvec4, so kernels
//                                               stage operands with 16-byte loads and stores
//   coopmat_store(m, buf, offset, stride, L)    m into buf, laid out as coopmat_load reads it
//   coopmat_mul_add(c, a, b)                    c += a * b, products and sums in float32
//   coopmat_length(m), coopmat_elem(m, i)       this invocation's elements of m, i < length (an
//                                               lvalue). WHICH (row, column) an element is
//                                               belongs to the implementation: use them only
//                                               for what treats every element alike (scaling,
//                                               activations, conversions). The emulation maps
//                                               elements column-major with rows rotated or
//                                               XOR-swizzled, differently per type, so a kernel
//                                               that assumes a layout fails its tests. Anything
//                                               per row or column goes through coopmat_store.
//   coopmat_barrier()                           orders shared memory between the invocations of
//                                               a subgroup, e.g. between coopmat_store to shared
//                                               memory and reading what others stored
//   COOPMAT_UNROLL                              before loops over fragments or a kernel's
//                                               register arrays: [[unroll]] on real devices, so
//                                               they stay in registers; [[dont_unroll]] in the
//                                               emulation, which lavapipe then compiles in a
//                                               fraction of the time
//   coopmat_subgroup_id(), coopmat_lane()       this invocation's subgroup in the workgroup and
//                                               its index in the subgroup (use these, not
//                                               gl_SubgroupID: the emulation's subgroups are its
//                                               own)
// Rules:
//   - The emulation on llvmpipe (lavapipe): an invocation's loops iterate at most 65535 times in
//     all (LP_MAX_TGSI_LOOP_ITERATIONS), after which they end early and results are partial.
//     The matmul takes about (K / BK) * TILES_M * TILES_N * (M * N / SG) * 1.5 of them: tests
//     pick shapes and configurations within it (coopmat_test's CoopmatManySlicesOfK: 18 slices
//     of 32 at 2x2 tiles per subgroup).
//   - Call coopmat_mul_add and coopmat_barrier in workgroup-uniform control flow, the same
//     number of times in every subgroup: the emulation synchronizes through barrier().
//   - Stride and offset of loads and stores: whole rows of 16 bytes are what real hardware
//     expects (e.g. offsets and strides multiples of 8 halves); the emulation takes any.
//   - Real backends need the device's Vulkan memory model feature (glslang declares it for
//     cooperative-matrix loads and stores): src/vk/device_core.cpp enables it with them.
//   - Element types are fixed above; another type (an f16 accumulator, int8) is a new struct
//     with its own tag type in the emulation, a coopmat_emu_kind overload, and a new coopmat<>
//     in each real backend.
#ifndef VKF_COOPMAT_GLSL
#define VKF_COOPMAT_GLSL

#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : require

#if defined(COOPMAT_EMULATE)
#define COOPMAT_UNROLL [[dont_unroll]]
#else
#define COOPMAT_UNROLL [[unroll]]
#endif

#if defined(COOPMAT_KHR) || defined(COOPMAT_NV)
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_memory_scope_semantics : require

uint coopmat_subgroup_id() { return gl_SubgroupID; }
uint coopmat_lane() { return gl_SubgroupInvocationID; }
void coopmat_barrier() {
  subgroupMemoryBarrierShared();
  subgroupBarrier();
}
#define coopmat_length(m) uint((m).length())
#define coopmat_elem(m, i) (m)[i]
#endif

#if defined(COOPMAT_KHR)
#extension GL_KHR_cooperative_matrix : require
#define coopmat_a coopmat<float16_t, gl_ScopeSubgroup, COOPMAT_M, COOPMAT_K, gl_MatrixUseA>
#define coopmat_b coopmat<float16_t, gl_ScopeSubgroup, COOPMAT_K, COOPMAT_N, gl_MatrixUseB>
#define coopmat_acc coopmat<float, gl_ScopeSubgroup, COOPMAT_M, COOPMAT_N, gl_MatrixUseAccumulator>
#define COOPMAT_ROW_MAJOR gl_CooperativeMatrixLayoutRowMajor
#define COOPMAT_COL_MAJOR gl_CooperativeMatrixLayoutColumnMajor
#define coopmat_fill(m, v) (m) = coopmat_acc(v)
#define coopmat_load(m, buf, offset, stride, L) coopMatLoad(m, buf, offset, stride, L)
#define coopmat_load_packed(m, buf, offset, stride, L) coopMatLoad(m, buf, offset, stride, L)
#define coopmat_store(m, buf, offset, stride, L) coopMatStore(m, buf, offset, stride, L)
#define coopmat_mul_add(c, a, b) (c) = coopMatMulAdd(a, b, c)

#elif defined(COOPMAT_NV)
#extension GL_NV_cooperative_matrix : require
#define coopmat_a fcoopmatNV<16, gl_ScopeSubgroup, COOPMAT_M, COOPMAT_K>
#define coopmat_b fcoopmatNV<16, gl_ScopeSubgroup, COOPMAT_K, COOPMAT_N>
#define coopmat_acc fcoopmatNV<32, gl_ScopeSubgroup, COOPMAT_M, COOPMAT_N>
#define COOPMAT_ROW_MAJOR false
#define COOPMAT_COL_MAJOR true
#define coopmat_fill(m, v) (m) = coopmat_acc(v)
#define coopmat_load(m, buf, offset, stride, L) coopMatLoadNV(m, buf, offset, stride, L)
#define coopmat_load_packed(m, buf, offset, stride, L) coopMatLoadNV(m, buf, offset, stride, L)
#define coopmat_store(m, buf, offset, stride, L) coopMatStoreNV(m, buf, offset, stride, L)
#define coopmat_mul_add(c, a, b) (c) = coopMatMulAddNV(a, b, c)

#elif defined(COOPMAT_EMULATE)
// The emulation. A fragment of R x C elements is spread over the S = COOPMAT_SUBGROUP_SIZE
// invocations of an emulated subgroup (S consecutive invocations of the workgroup): element slot
// s of invocation (lane) l is element number i = s * S + l, and coopmat_emu_coord maps i to a
// (row, column) that is deliberately not row-major, and differs between A, B and accumulators.
// Loads, stores and element access touch only the invocation's own elements. coopmat_mul_add
// writes A and B to the subgroup's scratch in shared memory, then each invocation computes its
// accumulator elements from there: two workgroup barriers per product, which is why the
// emulation asks for workgroup-uniform control flow (its subgroups may span several real ones).

// Elements per invocation of each type (specialization constants: no more registers, and no
// larger arrays for lavapipe to compile, than the shape and subgroup size need).
#define COOPMAT_EMU_SLOTS_OF(rows, cols) \
  (((rows) * (cols) + COOPMAT_SUBGROUP_SIZE - 1u) / COOPMAT_SUBGROUP_SIZE)
#define COOPMAT_ROW_MAJOR 0
#define COOPMAT_COL_MAJOR 1
#define COOPMAT_EMU_A 0u
#define COOPMAT_EMU_B 1u
#define COOPMAT_EMU_ACC 2u

// Each type carries a tag member of its own type, never written or read for its value: it picks
// the overload of coopmat_emu_kind without copying the fragment (NIR would copy every element).
struct coopmat_a {
  float16_t e[COOPMAT_EMU_SLOTS_OF(COOPMAT_M, COOPMAT_K)];
  uvec2 kind_tag;
};
struct coopmat_b {
  float16_t e[COOPMAT_EMU_SLOTS_OF(COOPMAT_K, COOPMAT_N)];
  uvec3 kind_tag;
};
struct coopmat_acc {
  float e[COOPMAT_EMU_SLOTS_OF(COOPMAT_M, COOPMAT_N)];
  uvec4 kind_tag;
};

// Per emulated subgroup: its A (M x K, row-major) then its B (K x N, row-major).
shared float16_t coopmat_emu_scratch[COOPMAT_SUBGROUPS *
                                     (COOPMAT_M * COOPMAT_K + COOPMAT_K * COOPMAT_N)];

uint coopmat_subgroup_id() { return gl_LocalInvocationIndex / COOPMAT_SUBGROUP_SIZE; }
uint coopmat_lane() { return gl_LocalInvocationIndex % COOPMAT_SUBGROUP_SIZE; }
void coopmat_barrier() {
  memoryBarrierShared();
  barrier();
}

// What a fragment is (kind, rows, columns), by the type of its tag.
uvec3 coopmat_emu_kind(uvec2 tag) { return uvec3(COOPMAT_EMU_A, COOPMAT_M, COOPMAT_K); }
uvec3 coopmat_emu_kind(uvec3 tag) { return uvec3(COOPMAT_EMU_B, COOPMAT_K, COOPMAT_N); }
uvec3 coopmat_emu_kind(uvec4 tag) { return uvec3(COOPMAT_EMU_ACC, COOPMAT_M, COOPMAT_N); }
#define COOPMAT_EMU_KIND(m) coopmat_emu_kind((m).kind_tag)

// (row, column) of element i of a `rows` x `cols` fragment of kind `use` (powers of two).
//   A: column-major, rows XOR-ed with the column;  B: row-major, columns reversed and rotated by
//   the row;  accumulators: column-major, rows rotated by 3 per column.
uvec2 coopmat_emu_coord(uint use, uint rows, uint cols, uint i) {
  if (use == COOPMAT_EMU_A) {
    const uint c = i / rows;
    return uvec2((i % rows) ^ (c % rows), c);
  }
  if (use == COOPMAT_EMU_B) {
    const uint r = i / cols;
    return uvec2(r, (cols - 1u - i % cols + r) % cols);
  }
  const uint c = i / rows;
  return uvec2((i % rows + 3u * c) % rows, c);
}

// How many of the fragment's elements this invocation holds.
uint coopmat_emu_length(uvec3 kind) {
  const uint n = kind.y * kind.z, lane = coopmat_lane();
  return lane < n ? (n - lane + COOPMAT_SUBGROUP_SIZE - 1u) / COOPMAT_SUBGROUP_SIZE : 0u;
}
#define coopmat_length(m) coopmat_emu_length(COOPMAT_EMU_KIND(m))
#define coopmat_elem(m, i) (m).e[i]

// Everything below is a macro working on the fragment in place: functions would take fragments
// by value, and lavapipe's compiler spends seconds on the copies.

// The loop shared by loads and stores over this invocation's elements: `ACCESS` moves slot s_,
// element h_ of memory.
#define COOPMAT_EMU_FOR_ELEMENTS(m, offset, stride, L, ACCESS)                           \
  do {                                                                                   \
    const uvec3 kind_ = COOPMAT_EMU_KIND(m);                                             \
    const uint n_ = coopmat_emu_length(kind_);                                           \
    [[dont_unroll]] for (uint s_ = 0u; s_ < n_; ++s_) {                                  \
      const uvec2 rc_ = coopmat_emu_coord(                                               \
          kind_.x, kind_.y, kind_.z, s_ * COOPMAT_SUBGROUP_SIZE + coopmat_lane());       \
      const uint h_ = (L) == COOPMAT_COL_MAJOR ? (offset) + rc_.y * (stride) + rc_.x     \
                                               : (offset) + rc_.x * (stride) + rc_.y;    \
      ACCESS;                                                                            \
    }                                                                                    \
  } while (false)
#define coopmat_load(m, buf, offset, stride, L) \
  COOPMAT_EMU_FOR_ELEMENTS(m, offset, stride, L, (m).e[s_] = buf[h_])
#define coopmat_load_packed(m, buf, offset, stride, L)                            \
  COOPMAT_EMU_FOR_ELEMENTS(m, 8u * (offset), 8u * (stride), L,                   \
                           (m).e[s_] = unpackFloat2x16(buf[h_ / 8u][h_ % 8u / 2u])[h_ % 2u])
#define coopmat_store(m, buf, offset, stride, L) \
  COOPMAT_EMU_FOR_ELEMENTS(m, offset, stride, L, buf[h_] = (m).e[s_])

#define coopmat_fill(m, v)                                                               \
  do {                                                                                   \
    [[dont_unroll]] for (uint s_ = 0u; s_ < (m).e.length(); ++s_) (m).e[s_] = (v);       \
  } while (false)

// c += a * b: the subgroup's A and B to its scratch, then each invocation's accumulator
// elements from there (products of halves are exact in float32).
#define coopmat_mul_add(c, a, b)                                                         \
  do {                                                                                   \
    const uint as_ = coopmat_subgroup_id() * (COOPMAT_M * COOPMAT_K + COOPMAT_K * COOPMAT_N); \
    const uint bs_ = as_ + COOPMAT_M * COOPMAT_K, lane_ = coopmat_lane();               \
    coopmat_barrier(); /* the previous product's reads of the scratch are done */       \
    [[dont_unroll]] for (uint s_ = 0u; s_ < coopmat_length(a); ++s_) {                  \
      const uvec2 rc_ = coopmat_emu_coord(COOPMAT_EMU_A, COOPMAT_M, COOPMAT_K,          \
                                          s_ * COOPMAT_SUBGROUP_SIZE + lane_);           \
      coopmat_emu_scratch[as_ + rc_.x * COOPMAT_K + rc_.y] = (a).e[s_];                 \
    }                                                                                    \
    [[dont_unroll]] for (uint s_ = 0u; s_ < coopmat_length(b); ++s_) {                  \
      const uvec2 rc_ = coopmat_emu_coord(COOPMAT_EMU_B, COOPMAT_K, COOPMAT_N,          \
                                          s_ * COOPMAT_SUBGROUP_SIZE + lane_);           \
      coopmat_emu_scratch[bs_ + rc_.x * COOPMAT_N + rc_.y] = (b).e[s_];                 \
    }                                                                                    \
    coopmat_barrier();                                                                   \
    [[dont_unroll]] for (uint s_ = 0u; s_ < coopmat_length(c); ++s_) {                  \
      const uvec2 rc_ = coopmat_emu_coord(COOPMAT_EMU_ACC, COOPMAT_M, COOPMAT_N,        \
                                          s_ * COOPMAT_SUBGROUP_SIZE + lane_);           \
      float sum_ = (c).e[s_];                                                            \
      /* 4 k a turn: llvmpipe ends the loops of an invocation after 65535 iterations */   \
      /* in all (LP_MAX_TGSI_LOOP_ITERATIONS), which one k a turn reached at 16 slices */ \
      /* of K; unrolled, lavapipe compiled the kernels 8x slower. Same order of sums. */ \
      [[dont_unroll]] for (uint k_ = 0u; k_ < COOPMAT_K; k_ += 4u)                       \
        [[unroll]] for (uint j_ = 0u; j_ < 4u; ++j_)                                     \
          sum_ += float(coopmat_emu_scratch[as_ + rc_.x * COOPMAT_K + k_ + j_]) *        \
                  float(coopmat_emu_scratch[bs_ + (k_ + j_) * COOPMAT_N + rc_.y]);       \
      (c).e[s_] = sum_;                                                                  \
    }                                                                                    \
  } while (false)

#else
#error "coopmat.glsl: define COOPMAT_KHR, COOPMAT_NV or COOPMAT_EMULATE"
#endif

#endif
