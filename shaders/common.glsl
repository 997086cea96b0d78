// Shared by every kernel. Each kernel is compiled once per storage dtype: -DDTYPE_F32=1 or
// -DDTYPE_F16=1 selects T, the element type of its float tensors. Arithmetic is always fp32:
// values are widened with float() on load and narrowed with T() on store.
#ifndef VKF_COMMON_GLSL
#define VKF_COMMON_GLSL

#if defined(DTYPE_F16)
#extension GL_EXT_shader_16bit_storage : require
#define T float16_t
#define T2 f16vec2
#define T4 f16vec4
#else
#define T float
#define T2 vec2
#define T4 vec4
#endif

// Infinities by bit pattern (GLSL 4.50 has no literal for them).
#define NEG_INF uintBitsToFloat(0xff800000u)
#define POS_INF uintBitsToFloat(0x7f800000u)

// Flat index of a workgroup in a rows_grid() dispatch (x is filled first, then y).
uint flat_workgroup_id() { return gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x; }

#endif
