// Soft-capped attention scores (AttentionOptions::softcap, Gemma 2): a score x = q·k · scale
// becomes cap · tanh(x / cap) before the mask is added. The kernel declares `const bool
// SOFT_CAP` (a specialization constant: without it this is the identity and compiles away) and
// the push field softcap before including this. tanh in activations.glsl's saturating form, as
// the soft_cap op computes it (GLSL's tanh may overflow to NaN for large |x| on some drivers).
#ifndef VKF_ATTENTION_SOFT_CAP_GLSL
#define VKF_ATTENTION_SOFT_CAP_GLSL

#include "activations.glsl"

float attention_soft_cap(float x) {
  return SOFT_CAP ? p.softcap * tanh_saturating(x * (1.0 / p.softcap)) : x;
}

#endif
