#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// Embedding lookup: out[t, j] = table[clamp(ids[t], 0, V-1), j] for every token t.
//
// One invocation per output element in a grid-stride loop: consecutive invocations copy
// consecutive columns of one table row, so reads and writes coalesce. Ids are clamped so an
// out-of-range id can never read outside the table (graph inputs are also checked on the host
// when they are set; computed or external ids only get the clamp).
//
// A table larger than one binding may span is bound as windows of rows, one dispatch each: a
// dispatch writes only the tokens whose (clamped) id falls in its rows [first, first + count).
//
// VEC4=1 builds a variant that moves 4 elements per invocation; the lowering picks it when D is
// a multiple of 4 and passes D in units of 4. The kernel only copies: U is the storage type.

#ifdef VEC4
#define U T4
#else
#define U T
#endif

layout(local_size_x_id = 0) in;

layout(set = 0, binding = 0) readonly buffer Ids { int ids[]; };
layout(set = 0, binding = 1) readonly buffer Table { U table[]; };
layout(set = 0, binding = 2) writeonly buffer Out { U o[]; };
layout(push_constant) uniform Push {
  uint n;       // tokens * D, in units of U
  uint d;       // row width D, in units of U
  uint vocab;   // V, rows of the table
  uint first;   // the first row of the table this dispatch binds
  uint count;   // rows bound (V when the table is bound whole)
} p;

void main() {
  uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) {
    uint t = i / p.d;
    uint j = i - t * p.d;
    uint row = uint(clamp(ids[t], 0, int(p.vocab) - 1)) - p.first;  // wraps below first
    if (row < p.count) o[i] = table[row * p.d + j];
  }
}
