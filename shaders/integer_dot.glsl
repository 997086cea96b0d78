// Integer dot products (VK_KHR_shader_integer_dot_product; kernels that include this declare
// REQUIRES integer_dot in kernels.cmake, so only devices with shaderIntegerDotProduct run them).
// glslang 13 has no GL_EXT_integer_dot_product, so the SPIR-V instruction is declared through
// GL_EXT_spirv_intrinsics: OpSDot (4450) with the DotProduct (6019) and
// DotProductInput4x8BitPacked (6018) capabilities, exactly what the GLSL extension's
// dotPacked4x8EXT(int, int) emits.
#ifndef VKF_INTEGER_DOT_GLSL
#define VKF_INTEGER_DOT_GLSL

#extension GL_EXT_spirv_intrinsics : require

spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4450)
int vkf_sdot4x8(int a, int b, spirv_literal int packed_format);

// Σ a_i · b_i over the four signed 8-bit lanes of a and b (lane 0 in the low byte), exact in 32 bits.
int dot4x8(uint a, uint b) { return vkf_sdot4x8(int(a), int(b), 0); }  // 0: PackedVectorFormat4x8Bit

#endif
