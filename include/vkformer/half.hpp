#pragma once
// IEEE 754 binary16 conversion on the host (round to nearest even), for f16 tensors.
#include <cstdint>

namespace vkformer {

uint16_t float_to_half(float f);
float half_to_float(uint16_t h);
// bfloat16 (the upper 16 bits of a float32), found in safetensors files.
float bfloat16_to_float(uint16_t b);
uint16_t float_to_bfloat16(float f);  // round to nearest even

}  // namespace vkformer
