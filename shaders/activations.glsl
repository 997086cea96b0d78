// Activation functions, fp32.
#ifndef VKF_ACTIVATIONS_GLSL
#define VKF_ACTIVATIONS_GLSL

// erf(x) by Abramowitz & Stegun 7.1.26 (max abs error 1.5e-7), odd-symmetric.
float erf_approx(float x) {
  float s = sign(x);
  float a = abs(x);
  float t = 1.0 / (1.0 + 0.3275911 * a);
  float y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t +
                   0.254829592) * t * exp(-a * a);
  return s * y;
}

// PyTorch's default GELU: x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)).
float gelu(float x) { return 0.5 * x * (1.0 + erf_approx(x * 0.70710678118654752)); }

// A comparison, not max(): NaN (and -0) pass through as in PyTorch, where max() may drop a NaN.
float relu(float x) {
  // NaN by its bits: drivers may turn a comparison or max() into one that drops NaN.
  return (floatBitsToUint(x) & 0x7fffffffu) > 0x7f800000u ? x : max(x, 0.0);
}

// GELU's tanh approximation (Hugging Face's gelu_new): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
// tanh(u) written as 1 - 2 / (exp(2u) + 1): GLSL's tanh may overflow to NaN for large |u| on
// some drivers, this form saturates to +-1.
float gelu_tanh(float x) {
  float u = 0.79788456080286536 * (x + 0.044715 * x * x * x);
  float t = 1.0 - 2.0 / (exp(2.0 * u) + 1.0);
  return 0.5 * x * (1.0 + t);
}

// SiLU: x * sigmoid(x) = x / (1 + exp(-x)). For x below about -88, exp(-x) is +inf and the
// quotient -0, the limit; the division form never computes inf * 0.
float silu(float x) { return x / (1.0 + exp(-x)); }

// tanh as 1 - 2 / (exp(2x) + 1), saturating to +-1 (see gelu_tanh).
float tanh_saturating(float x) { return 1.0 - 2.0 / (exp(2.0 * x) + 1.0); }

// ACT: 0 none, 1 relu, 2 gelu, 3 gelu_tanh, 4 silu (the order of vkformer::Activation), then 5
// tanh (soft-capping: unary.comp's beta * tanh(x / cap)).
float activate(float x, uint act) {
  if (act == 1u) return relu(x);
  if (act == 2u) return gelu(x);
  if (act == 3u) return gelu_tanh(x);
  if (act == 4u) return silu(x);
  if (act == 5u) return tanh_saturating(x);
  return x;
}

#endif
