#include "tuning_matmul.hpp"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "vkformer/error.hpp"

namespace vkformer::vk {

namespace {

// CPU devices: one workgroup of 8 invocations (one SIMD vector on lavapipe) computes 4 rows x 16
// columns reading A and B directly: rows uniform across the workgroup (TY = 1), 8 accumulators
// per invocation, and no barriers.
MatmulTiles cpu_matmul_tiles() {
  MatmulTiles m;
  m.bm = 4;
  m.bn = 16;
  m.bk = 1;
  m.tm = 4;
  m.tn = 2;
  m.shared_memory = false;
  return m;
}

// Shrinks the default GPU tiling until it fits the device's workgroup and shared memory limits
// (64x64 tiles need 256 invocations and 8.1 KiB).
MatmulTiles gpu_matmul_tiles(const DeviceInfo& info) {
  MatmulTiles m;
  while ((m.invocations() > info.max_workgroup_invocations ||
          m.invocations() > info.max_workgroup_size[0] ||
          m.shared_bytes() > info.shared_memory_bytes) &&
         m.bm > m.tm) {
    m.bm /= 2;
    m.bn /= 2;
  }
  return m;
}

// VKFORMER_MATMUL_TILES="BMxBNxBK/TMxTN[/direct]" replaces the matmul tiling (for tuning
// experiments and for tests that run the GPU tiling on a CPU device). Rejected unless it fits the
// device: tiles divisible by the per-invocation block, workgroup and shared memory within limits.
bool matmul_tiles_from_env(const DeviceInfo& info, MatmulTiles* out) {
  const char* env = std::getenv("VKFORMER_MATMUL_TILES");
  if (!env || !*env) return false;
  MatmulTiles m;
  unsigned bm = 0, bn = 0, bk = 0, tm = 0, tn = 0;
  char mode[16] = {};
  int fields = std::sscanf(env, "%ux%ux%u/%ux%u/%15s", &bm, &bn, &bk, &tm, &tn, mode);
  bool direct = fields == 6 && std::string(mode) == "direct";
  m.bm = bm;
  m.bn = bn;
  m.bk = direct ? 1 : bk;
  m.tm = tm;
  m.tn = tn;
  m.shared_memory = !direct;
  bool ok = (fields == 5 || direct) && bm && bn && bk && tm && tn && bm % tm == 0 &&
            bn % tn == 0 && m.invocations() <= info.max_workgroup_invocations &&
            m.invocations() <= info.max_workgroup_size[0] &&
            m.shared_bytes() <= info.shared_memory_bytes;
  if (!ok)
    throw Error(ErrorCode::invalid_argument,
                std::string("VKFORMER_MATMUL_TILES='") + env +
                    "': expected BMxBNxBK/TMxTN or BMxBNxBK/TMxTN/direct with BM % TM == 0, "
                    "BN % TN == 0, (BM/TM)*(BN/TN) invocations and 4*BK*(BM+BN+2) bytes of shared "
                    "memory within the limits of device '" + info.name + "'");
  *out = m;
  return true;
}

}  // namespace

MatmulTiles matmul_tiles_for(const DeviceInfo& info, bool cpu_device) {
  MatmulTiles m = cpu_device ? cpu_matmul_tiles() : gpu_matmul_tiles(info);
  matmul_tiles_from_env(info, &m);
  return m;
}

}  // namespace vkformer::vk
