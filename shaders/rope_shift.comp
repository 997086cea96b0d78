#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_16bit_storage : require
#include "common.glsl"
#include "rope.glsl"
#include "kv_cache_types.glsl"
// The context shift of a KV cache (Graph::rope_shift), in place: rows [keep + discard, end) of
// each (batch, head) slice move down to [keep, end - discard), forgetting the tokens at rows
// [keep, keep + discard); with ROPE (a key cache) each moved key is turned by the position
// change, -discard: rope is a rotation by position · inv_freq per pair, so turning the key
// stored at p by -discard gives the key rope would store at p - discard (llama.cpp's context
// shift). A quantized key is dequantized, turned back by the attention rotation's Hadamard block
// ROT where it has one (KvRotation: H·H = I), roped, rotated again and quantized, all in a
// shared row; float keys are roped and stored. Values (no ROPE) move as they are, halfword for
// halfword, exact in every type.
//
// With shift = i32 [4] the fourth value picks one batch item (a server's slot): the grid is then
// one workgroup per head of an item, and workgroup h shifts slice item * HEADS + h alone, so a
// slot's shift is one dispatch however many KV heads it has, the other items' rows untouched.
// The item is read at run time (a recorded graph shifts any slot); FIRST, the first slice of
// the binding (a window of a cache larger than one binding), is known when recording.
//
// One workgroup per slice walks its rows in increasing order: row r + discard is read before
// row r is written, and no later step reads a row already written (they lie below), so the
// move needs no second buffer. Moving values, invocation x touches only halfwords x, x + wg,
// ... of every row, so the copy needs no barrier either.

layout(local_size_x_id = 0) in;  // ceil(D / 2) rounded up to a multiple of the subgroup
layout(constant_id = 1) const uint NEOX = 0;
layout(constant_id = 2) const uint TYPE = KV_F16;
layout(constant_id = 3) const bool ROPE = true;  // false: rows moved as they are
layout(constant_id = 4) const uint ROT = 0;       // the keys' Hadamard block (0: none)
layout(constant_id = 5) const uint ROW_CAP = 64;  // >= D: 2 x the workgroup size

layout(set = 0, binding = 0) buffer Cache { uint16_t cache[]; };
layout(set = 0, binding = 1) readonly buffer InvFreq { float inv_freq[]; };  // [dims / 2]
layout(set = 0, binding = 2) readonly buffer Shift { int shift[]; };  // keep, discard, end[, item]
layout(push_constant) uniform Push {
  uint t;          // rows of a slice
  uint d;          // head dim D
  uint half_dims;  // rope dims / 2
  uint heads;      // 0: every slice of the binding; else slices of an item, shift[3] the item
  uint items;      // batch items of the cache
  uint first;      // the binding's first slice of the cache
  uint slices;     // the binding's slices
} p;

shared float row[ROW_CAP];

#include "kv_cache_row.glsl"

// The shared row times the Hadamard matrix of blocks of ROT, in place (every invocation reaches
// the barriers).
void hadamard_row(uint x, bool in_row) {
  for (uint h = 1u; h < ROT; h <<= 1) {
    if (in_row) HADAMARD_ROW_PASS(row, 0u, x, h, ROT)
    barrier();
  }
}

void main() {
  const uint x = gl_LocalInvocationID.x;
  const uint keep = uint(clamp(shift[0], 0, int(p.t)));
  const uint drop = uint(clamp(shift[1], 0, int(p.t - keep)));
  const uint end = uint(clamp(shift[2], int(keep + drop), int(p.t)));
  uint local = gl_WorkGroupID.x;  // the slice in the binding
  if (p.heads != 0u) {
    if (shift[3] < 0 || uint(shift[3]) >= p.items) return;  // no such item: nothing moves
    const uint global = uint(shift[3]) * p.heads + gl_WorkGroupID.x;
    if (global < p.first || global - p.first >= p.slices) return;  // another window's
    local = global - p.first;
  }
  const uint rh = row_halfwords(TYPE, p.d), slice = local * p.t * rh;
  if (drop == 0u) return;
  if (!ROPE) {
    for (uint r = keep; r + drop < end; ++r)
      for (uint h = x; h < rh; h += gl_WorkGroupSize.x) cache[slice + r * rh + h] = cache[slice + (r + drop) * rh + h];
    return;
  }
  const bool in_row = 2u * x < p.d;
  const bool rotates = x < p.half_dims;
  uint ia = 2u * x, ib = ia + 1u;
  if (NEOX != 0u) {
    ia = x;
    ib = x + p.half_dims;
  }
  // Turning by -drop: the angle's cos, and minus its sin.
  const vec2 cs = rotates ? rope_cos_sin(int(drop), inv_freq[x]) : vec2(1.0, 0.0);
  for (uint r = keep; r + drop < end; ++r) {
    if (in_row) {
      vec2 v;
      LOAD_PAIR(cache, TYPE, slice + (r + drop) * rh, 2u * x, v)
      row[2u * x] = v.x;
      row[2u * x + 1u] = v.y;
    }
    barrier();  // the stored row is in shared memory
    if (ROT != 0u) hadamard_row(x, in_row);  // back from the attention rotation
    vec2 turned = vec2(0.0);
    if (in_row && rotates) {
      const float a = row[ia], b = row[ib];
      turned = vec2(a * cs.x + b * cs.y, b * cs.x - a * cs.y);
    }
    barrier();  // every pair is read
    if (in_row && rotates) {
      row[ia] = turned.x;
      row[ib] = turned.y;
    }
    barrier();  // the turned row is in shared memory
    if (ROT != 0u) hadamard_row(x, in_row);
    if (in_row) STORE_ROW(cache, row, TYPE, slice + r * rh, x)
    barrier();  // stored before the next row overwrites the shared one
  }
}
