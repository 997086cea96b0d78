#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// Greedy decoding's choice on the device: per row of logits [rows, n], 4 words, so that the
// host reads 16 bytes per token instead of the whole vocabulary (Gemma 3: 1 MiB):
//   y[0] the index of the largest value; equal values: the lowest index (the host sampler's
//        rule, vkformer/sampling.hpp); NaN never wins; 0xffffffff where every entry is NaN or -inf
//   y[1] that value's bits
//   y[2] the index of the first entry that is NaN or +-inf (0xffffffff: none), which the host
//        refuses to decode from (generate's check of the logits)
//   y[3] that entry's bits (NaN or which infinity, for the error message)
// One workgroup per row (WG a power of two): each invocation scans the row at a stride of WG
// (neighbours read neighbouring words), keeping its own best and first bad index; then a tree in
// shared memory merges the WG candidates. Comparisons only: the result is exact, and the same
// for any workgroup or subgroup size.

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;  // the workgroup size again, to size shared arrays

layout(set = 0, binding = 0) readonly buffer X { T x[]; };
layout(set = 0, binding = 1) writeonly buffer Y { uint y[]; };
layout(push_constant) uniform Push {
  uint rows;
  uint n;  // entries per row
} p;

const uint NONE = 0xffffffffu;

shared float best_value[WG];
shared uint best_index[WG];
shared uint bad_index[WG];

// a = (va, ia) ranks before b: a larger value, or an equal one at a lower index. Index NONE (an
// invocation that saw only NaN and -inf: no candidate) ranks after everything.
bool ranks_before(float va, uint ia, float vb, uint ib) {
  return ia != NONE && (ib == NONE || va > vb || (va == vb && ia < ib));
}

void main() {
  const uint row = flat_workgroup_id();
  if (row >= p.rows) return;  // uniform per workgroup: no barrier is skipped by part of it
  const uint t = gl_LocalInvocationID.x, base = row * p.n;
  float value = NEG_INF;
  uint index = NONE, bad = NONE;
  // Increasing indices: a later equal value never replaces an earlier one; NaN and -inf fail
  // value > best (best starts at -inf), so they are never taken.
  for (uint i = t; i < p.n; i += WG) {
    const float v = float(x[base + i]);
    if (v > value) {
      value = v;
      index = i;
    }
    if (bad == NONE && (isnan(v) || isinf(v))) bad = i;
  }
  best_value[t] = value;
  best_index[t] = index;
  bad_index[t] = bad;
  barrier();
  for (uint half_size = WG / 2; half_size > 0; half_size /= 2) {
    if (t < half_size) {
      const uint o = t + half_size;
      if (ranks_before(best_value[o], best_index[o], best_value[t], best_index[t])) {
        best_value[t] = best_value[o];
        best_index[t] = best_index[o];
      }
      bad_index[t] = min(bad_index[t], bad_index[o]);  // NONE is the largest uint
    }
    barrier();
  }
  if (t == 0) {
    const uint b = bad_index[0];
    y[row * 4 + 0] = best_index[0];
    y[row * 4 + 1] = floatBitsToUint(best_value[0]);
    y[row * 4 + 2] = b;
    y[row * 4 + 3] = b == NONE ? 0u : floatBitsToUint(float(x[base + b]));
  }
}
