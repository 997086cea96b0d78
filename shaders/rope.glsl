// Rotary position embedding's angle, shared by rope.comp and rope_kv_cache.comp.
//
// inv_freq = freq_base^(-2i / dims) comes from the host (computed in double, rounded to fp32:
// GLSL's pow is only specified to a few ulp). The angle is the fp32 product pos * inv_freq[i], as
// llama.cpp and PyTorch compute it (at pos ~ 8000 its rounding moves the angle by ~5e-4, the
// same in every implementation). Before cos/sin it is reduced to [-pi, pi] by Cody-Waite with a
// 2 pi split in two (C1 = 6.28125 has 8 significant bits, so k * C1 is exact for k < 2^16, i.e.
// angles up to ~4e5), because GPUs' sin/cos lose accuracy far outside that range.
#ifndef VKF_ROPE_GLSL
#define VKF_ROPE_GLSL

const int kMaxPosition = 16777215;  // 2^24 - 1: positions stay exact in fp32

// (cos, sin) of pos * inv_freq.
vec2 rope_cos_sin(int pos, float inv_freq) {
  precise float angle = float(pos) * inv_freq;
  precise float q = floor(angle * 0.15915494309189535 + 0.5);
  precise float r = angle - q * 6.28125;
  r = r - q * 1.9353071795864769e-3;
  return vec2(cos(r), sin(r));
}

#endif
