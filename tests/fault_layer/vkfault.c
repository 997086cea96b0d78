/* vkfault: a Vulkan layer that makes chosen calls fail, as a driver does when device memory runs
 * out, a pipeline does not compile or the device is lost, and counts the objects it saw created
 * and destroyed, so a test can check that a program reports each failure and frees what it held.
 * SQLite's fault-injection tests are the model: count the calls, then fail each one in turn.
 *
 * VKFORMER_FAULT (read at the first vkCreateInstance; README.md has the whole grammar):
 *   count                      no fault; only count (the report lists the calls per function)
 *   vkQueueSubmit:3            the 3rd vkQueueSubmit fails, once (its realistic result below)
 *   vkQueueSubmit:3+           the 3rd and every later one fail ("from then on")
 *   call:57                    the 57th call of any function below, whichever it is
 *   vkWaitForFences:2=VK_TIMEOUT   another result than the default
 *   several, separated by commas
 * VKFORMER_FAULT_REPORT=FILE appends the report there instead of stderr: the calls per function,
 * the faults injected, and the live objects per type, at the last vkDestroyInstance and at exit.
 *
 * A lost device stays lost, as a real one does: after an injected VK_ERROR_DEVICE_LOST (on
 * vkQueueSubmit or vkWaitForFences) that VkDevice's submissions are dropped and its waits return
 * VK_ERROR_DEVICE_LOST, while every object can still be destroyed. A device created later works.
 * Whatever the layer fails, it leaves the layers below (validation) with a consistent picture:
 * a failed create never reaches them, and a failed wait first waits for real.
 *
 * In-process tests (tests/fault_injection.hpp) reach the exported vkfault_* functions through
 * dlopen(RTLD_NOLOAD) to re-arm the faults and read the counts. */
#define _GNU_SOURCE
#include <vulkan/vulkan.h>
#include <vulkan/vk_layer.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
#define KEY(h) (*(void **)(h)) /* the loader's dispatch key: one per instance / device */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

/* ---- the functions that can be made to fail, with their realistic failure --------------------
 * The eight first (what the sweep covers at every index), then the other creating calls
 * vkformer makes, so the full sweep reaches every failing VkResult it handles. */
#define FAULT_FUNCS(X)                                                   \
  X(AllocateMemory, VK_ERROR_OUT_OF_DEVICE_MEMORY)                       \
  X(CreateBuffer, VK_ERROR_OUT_OF_DEVICE_MEMORY)                         \
  X(CreateComputePipelines, VK_ERROR_OUT_OF_DEVICE_MEMORY)               \
  X(QueueSubmit, VK_ERROR_DEVICE_LOST)                                   \
  X(WaitForFences, VK_ERROR_DEVICE_LOST)                                 \
  X(MapMemory, VK_ERROR_MEMORY_MAP_FAILED)                               \
  X(CreateDescriptorPool, VK_ERROR_OUT_OF_DEVICE_MEMORY)                 \
  X(AllocateDescriptorSets, VK_ERROR_OUT_OF_POOL_MEMORY)                 \
  X(BindBufferMemory, VK_ERROR_OUT_OF_DEVICE_MEMORY)                     \
  X(CreateBufferView, VK_ERROR_OUT_OF_DEVICE_MEMORY)                     \
  X(CreateShaderModule, VK_ERROR_OUT_OF_DEVICE_MEMORY)                   \
  X(CreatePipelineLayout, VK_ERROR_OUT_OF_DEVICE_MEMORY)                 \
  X(CreateDescriptorSetLayout, VK_ERROR_OUT_OF_DEVICE_MEMORY)            \
  X(CreateCommandPool, VK_ERROR_OUT_OF_DEVICE_MEMORY)                    \
  X(AllocateCommandBuffers, VK_ERROR_OUT_OF_DEVICE_MEMORY)               \
  X(BeginCommandBuffer, VK_ERROR_OUT_OF_DEVICE_MEMORY)                   \
  X(EndCommandBuffer, VK_ERROR_OUT_OF_DEVICE_MEMORY)                     \
  X(CreateFence, VK_ERROR_OUT_OF_DEVICE_MEMORY)                          \
  X(ResetFences, VK_ERROR_OUT_OF_DEVICE_MEMORY)                          \
  X(CreateQueryPool, VK_ERROR_OUT_OF_DEVICE_MEMORY)

enum {
#define X(n, r) F_##n,
  FAULT_FUNCS(X)
#undef X
  F_COUNT
};
static const char *f_name[F_COUNT] = {
#define X(n, r) "vk" #n,
    FAULT_FUNCS(X)
#undef X
};
static const VkResult f_default[F_COUNT] = {
#define X(n, r) r,
    FAULT_FUNCS(X)
#undef X
};

/* ---- live objects ---------------------------------------------------------------------------- */
#define OBJECT_TYPES(X) \
  X(instance) X(device) X(memory) X(buffer) X(buffer_view) X(shader_module) X(pipeline) \
  X(pipeline_layout) X(descriptor_set_layout) X(descriptor_pool) X(command_pool) X(fence) \
  X(query_pool)
enum {
#define X(n) O_##n,
  OBJECT_TYPES(X)
#undef X
  O_COUNT
};
static const char *o_name[O_COUNT] = {
#define X(n) #n,
    OBJECT_TYPES(X)
#undef X
};
static int64_t live[O_COUNT]; /* under mu */
static void live_add(int type, int64_t n) {
  pthread_mutex_lock(&mu);
  live[type] += n;
  pthread_mutex_unlock(&mu);
}

/* ---- the faults asked for -------------------------------------------------------------------- */
#define MAX_RULES 16
typedef struct {
  int func;      /* F_*, or -1: any function (call:N) */
  uint64_t at;   /* 1-based call index */
  int onwards;   /* '+': every call from `at` on */
  VkResult result; /* 0: the function's default */
} rule_t;
static rule_t rules[MAX_RULES];
static int n_rules;
static int configured; /* the environment was read (or vkfault_configure called) */
static int reporting;  /* VKFORMER_FAULT or VKFORMER_FAULT_REPORT set: write a report */
static uint64_t calls[F_COUNT], calls_any, injected[F_COUNT];
static char config_error[256];

static const struct { const char *name; VkResult r; } results[] = {
    {"VK_ERROR_OUT_OF_HOST_MEMORY", VK_ERROR_OUT_OF_HOST_MEMORY},
    {"VK_ERROR_OUT_OF_DEVICE_MEMORY", VK_ERROR_OUT_OF_DEVICE_MEMORY},
    {"VK_ERROR_DEVICE_LOST", VK_ERROR_DEVICE_LOST},
    {"VK_ERROR_MEMORY_MAP_FAILED", VK_ERROR_MEMORY_MAP_FAILED},
    {"VK_ERROR_OUT_OF_POOL_MEMORY", VK_ERROR_OUT_OF_POOL_MEMORY},
    {"VK_ERROR_FRAGMENTED_POOL", VK_ERROR_FRAGMENTED_POOL},
    {"VK_ERROR_INITIALIZATION_FAILED", VK_ERROR_INITIALIZATION_FAILED},
    {"VK_ERROR_UNKNOWN", VK_ERROR_UNKNOWN},
    {"VK_TIMEOUT", VK_TIMEOUT},
};
static const char *result_name(VkResult r) {
  for (size_t i = 0; i < sizeof results / sizeof *results; i++)
    if (results[i].r == r) return results[i].name;
  return "VkResult(?)";
}

/* Parses `spec` into the rules; on a mistake leaves them empty and says why in config_error. */
static int parse_spec(const char *spec) { /* under mu */
  n_rules = 0;
  config_error[0] = 0;
  char buf[1024];
  if (strlen(spec) >= sizeof buf) {
    snprintf(config_error, sizeof config_error, "longer than %zu characters", sizeof buf - 1);
    return -1;
  }
  strcpy(buf, spec);
  char *save = NULL;
  for (char *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
    while (*item == ' ') item++;
    if (!strcmp(item, "count") || !*item) continue;
    if (n_rules == MAX_RULES) {
      snprintf(config_error, sizeof config_error, "more than %d faults", MAX_RULES);
      return -1;
    }
    rule_t r = {-1, 0, 0, 0};
    char *colon = strchr(item, ':');
    if (!colon) goto bad;
    *colon = 0;
    const char *fn = item;
    if (strcmp(fn, "call")) {
      const char *bare = strncmp(fn, "vk", 2) ? fn : fn + 2;
      for (int f = 0; f < F_COUNT; f++)
        if (!strcmp(f_name[f] + 2, bare)) r.func = f;
      if (r.func < 0) {
        snprintf(config_error, sizeof config_error,
                 "'%s' is not a function this layer can fail (see tests/fault_layer/README.md)", fn);
        return -1;
      }
    }
    char *end = NULL;
    r.at = strtoull(colon + 1, &end, 10);
    if (end == colon + 1 || r.at == 0) goto bad;
    if (*end == '+') r.onwards = 1, end++;
    if (*end == '=') {
      for (size_t i = 0; i < sizeof results / sizeof *results; i++)
        if (!strcmp(end + 1, results[i].name)) r.result = results[i].r;
      if (!r.result) {
        snprintf(config_error, sizeof config_error, "'%s' is not a result this layer injects", end + 1);
        return -1;
      }
    } else if (*end) {
      goto bad;
    }
    rules[n_rules++] = r;
    continue;
  bad:
    snprintf(config_error, sizeof config_error,
             "'%.60s' is not FUNCTION:N, FUNCTION:N+ or call:N (N from 1), optionally =RESULT", item);
    n_rules = 0;
    return -1;
  }
  return 0;
}

static void configure_from_env(void) { /* under mu */
  if (configured) return;
  configured = 1;
  const char *spec = getenv("VKFORMER_FAULT");
  const char *report = getenv("VKFORMER_FAULT_REPORT");
  reporting = (spec && *spec) || (report && *report);
  if (spec) parse_spec(spec);
}

/* The result the current call of `f` is to return: VK_SUCCESS to pass it on. */
static VkResult fault_for(int f) {
  pthread_mutex_lock(&mu);
  configure_from_env();
  uint64_t mine = ++calls[f], any = ++calls_any;
  VkResult r = VK_SUCCESS;
  for (int i = 0; i < n_rules && r == VK_SUCCESS; i++) {
    const rule_t *x = &rules[i];
    uint64_t n = x->func < 0 ? any : mine;
    if (x->func >= 0 && x->func != f) continue;
    if (n == x->at || (x->onwards && n > x->at)) r = x->result ? x->result : f_default[f];
  }
  if (r != VK_SUCCESS) injected[f]++;
  pthread_mutex_unlock(&mu);
  return r;
}

/* ---- the report ------------------------------------------------------------------------------ */
static uint64_t printed_hash;
static uint64_t state_hash(void) { /* under mu */
  uint64_t h = 1469598103934665603ull;
  for (int f = 0; f < F_COUNT; f++) h = (h ^ calls[f]) * 1099511628211ull, h = (h ^ injected[f]) * 1099511628211ull;
  for (int o = 0; o < O_COUNT; o++) h = (h ^ (uint64_t)live[o]) * 1099511628211ull;
  return h;
}
static void report(const char *when) {
  pthread_mutex_lock(&mu);
  if (!reporting || state_hash() == printed_hash) {
    pthread_mutex_unlock(&mu);
    return;
  }
  printed_hash = state_hash();
  char text[4096];
  size_t n = 0;
#define ADD(...) n += (size_t)snprintf(text + n, n < sizeof text ? sizeof text - n : 0, __VA_ARGS__)
  ADD("[vkfault] pid=%d when=%s\n[vkfault] calls", (int)getpid(), when);
  for (int f = 0; f < F_COUNT; f++) ADD(" %s=%llu", f_name[f], (unsigned long long)calls[f]);
  ADD("\n[vkfault] injected");
  uint64_t total = 0;
  for (int f = 0; f < F_COUNT; f++)
    if (injected[f]) ADD(" %s=%llu", f_name[f], (unsigned long long)injected[f]), total += injected[f];
  ADD(" total=%llu\n[vkfault] live", (unsigned long long)total);
  int64_t all = 0;
  for (int o = 0; o < O_COUNT; o++) ADD(" %s=%lld", o_name[o], (long long)live[o]), all += live[o];
  ADD(" total=%lld\n", (long long)all);
#undef ADD
  pthread_mutex_unlock(&mu);
  const char *path = getenv("VKFORMER_FAULT_REPORT");
  FILE *f = (path && *path) ? fopen(path, "a") : NULL;
  fputs(text, f ? f : stderr);
  fflush(f ? f : stderr);
  if (f) fclose(f);
}
/* The layer is linked with -z nodelete: it stays loaded after the last vkDestroyInstance, so the
 * counts cover the whole process (a server that recreates its device) and this runs at exit. */
__attribute__((destructor)) static void at_exit(void) { report("exit"); }

/* One line on stderr or in the report file as a fault is injected: which call, what result. */
static void note_injection(int f, VkResult r) {
  const char *path = getenv("VKFORMER_FAULT_REPORT");
  FILE *o = (path && *path) ? fopen(path, "a") : NULL;
  pthread_mutex_lock(&mu);
  unsigned long long mine = calls[f], any = calls_any;
  pthread_mutex_unlock(&mu);
  fprintf(o ? o : stderr, "[vkfault] injected %s call %llu (call %llu of all): %s\n", f_name[f], mine,
          any, result_name(r));
  if (o) fclose(o);
}

/* ---- dispatch tables ------------------------------------------------------------------------- */
#define MAXOBJ 64
typedef struct {
  void *key;
  VkInstance inst;
  PFN_vkGetInstanceProcAddr gipa;
  PFN_vkDestroyInstance DestroyInstance;
} inst_t;
static inst_t insts[MAXOBJ];
static VkInstance last_instance;

#define DEV_FUNCS(X)                                                                         \
  X(GetDeviceProcAddr) X(DestroyDevice) X(AllocateMemory) X(FreeMemory) X(MapMemory)          \
  X(BindBufferMemory) X(CreateBuffer) X(DestroyBuffer) X(CreateBufferView) X(DestroyBufferView) \
  X(CreateShaderModule) X(DestroyShaderModule) X(CreateComputePipelines) X(DestroyPipeline)   \
  X(CreatePipelineLayout) X(DestroyPipelineLayout) X(CreateDescriptorSetLayout)               \
  X(DestroyDescriptorSetLayout) X(CreateDescriptorPool) X(DestroyDescriptorPool)              \
  X(AllocateDescriptorSets) X(CreateCommandPool) X(DestroyCommandPool)                        \
  X(AllocateCommandBuffers) X(BeginCommandBuffer) X(EndCommandBuffer) X(CreateFence)          \
  X(DestroyFence) X(ResetFences) X(GetFenceStatus) X(WaitForFences) X(CreateQueryPool)        \
  X(DestroyQueryPool) X(QueueSubmit) X(QueueWaitIdle) X(DeviceWaitIdle)

/* Fences whose submission the layer dropped on a lost device: they would never signal. */
#define MAX_DROPPED 256
typedef struct {
  void *key;
  VkDevice device;
  int lost;
  VkFence dropped[MAX_DROPPED];
  int n_dropped;
#define X(n) PFN_vk##n n;
  DEV_FUNCS(X)
#undef X
} devtab_t;
static devtab_t devs[MAXOBJ];

static inst_t *inst_get(void *key) {
  inst_t *r = NULL;
  pthread_mutex_lock(&mu);
  for (int i = 0; i < MAXOBJ; i++)
    if (insts[i].key == key) r = &insts[i];
  pthread_mutex_unlock(&mu);
  return r;
}
static devtab_t *dev_get(void *key) {
  devtab_t *r = NULL;
  pthread_mutex_lock(&mu);
  for (int i = 0; i < MAXOBJ; i++)
    if (devs[i].key == key) r = &devs[i];
  pthread_mutex_unlock(&mu);
  if (!r) {
    fprintf(stderr, "[vkfault] unknown device dispatch key %p\n", key);
    abort(); /* a layer bug, never the application's */
  }
  return r;
}
#define D(h) dev_get(KEY(h))

static int dev_lost(devtab_t *d) {
  pthread_mutex_lock(&mu);
  int l = d->lost;
  pthread_mutex_unlock(&mu);
  return l;
}
static void mark_lost(devtab_t *d) {
  pthread_mutex_lock(&mu);
  d->lost = 1;
  pthread_mutex_unlock(&mu);
}
static void drop_fence(devtab_t *d, VkFence f) {
  if (!f) return;
  pthread_mutex_lock(&mu);
  if (d->n_dropped < MAX_DROPPED) d->dropped[d->n_dropped++] = f;
  pthread_mutex_unlock(&mu);
}
static int is_dropped(devtab_t *d, VkFence f) { /* under mu */
  for (int i = 0; i < d->n_dropped; i++)
    if (d->dropped[i] == f) return 1;
  return 0;
}
static void undrop_fence(devtab_t *d, VkFence f) { /* under mu */
  for (int i = 0; i < d->n_dropped; i++)
    if (d->dropped[i] == f) d->dropped[i] = d->dropped[--d->n_dropped];
}

/* ---- creating and destroying: fail where asked, count what lives ------------------------------ */
#define CREATE(Name, Type, obj, Info)                                                            \
  static VKAPI_ATTR VkResult VKAPI_CALL l_Create##Name(VkDevice dev, const Info *ci,             \
                                                       const VkAllocationCallbacks *a, Type *p) { \
    VkResult f = fault_for(F_Create##Name);                                                      \
    if (f != VK_SUCCESS) {                                                                       \
      note_injection(F_Create##Name, f);                                                         \
      return f;                                                                                  \
    }                                                                                            \
    VkResult r = D(dev)->Create##Name(dev, ci, a, p);                                            \
    if (r == VK_SUCCESS) live_add(O_##obj, 1);                                                   \
    return r;                                                                                    \
  }                                                                                              \
  static VKAPI_ATTR void VKAPI_CALL l_Destroy##Name(VkDevice dev, Type h,                        \
                                                    const VkAllocationCallbacks *a) {            \
    if (h) live_add(O_##obj, -1);                                                                \
    D(dev)->Destroy##Name(dev, h, a);                                                            \
  }
CREATE(Buffer, VkBuffer, buffer, VkBufferCreateInfo)
CREATE(BufferView, VkBufferView, buffer_view, VkBufferViewCreateInfo)
CREATE(ShaderModule, VkShaderModule, shader_module, VkShaderModuleCreateInfo)
CREATE(PipelineLayout, VkPipelineLayout, pipeline_layout, VkPipelineLayoutCreateInfo)
CREATE(DescriptorSetLayout, VkDescriptorSetLayout, descriptor_set_layout, VkDescriptorSetLayoutCreateInfo)
CREATE(DescriptorPool, VkDescriptorPool, descriptor_pool, VkDescriptorPoolCreateInfo)
CREATE(CommandPool, VkCommandPool, command_pool, VkCommandPoolCreateInfo)
CREATE(Fence, VkFence, fence, VkFenceCreateInfo)
CREATE(QueryPool, VkQueryPool, query_pool, VkQueryPoolCreateInfo)
#undef CREATE

static VKAPI_ATTR VkResult VKAPI_CALL l_AllocateMemory(VkDevice dev, const VkMemoryAllocateInfo *ai,
                                                       const VkAllocationCallbacks *a, VkDeviceMemory *p) {
  VkResult f = fault_for(F_AllocateMemory);
  if (f != VK_SUCCESS) {
    note_injection(F_AllocateMemory, f);
    return f;
  }
  VkResult r = D(dev)->AllocateMemory(dev, ai, a, p);
  if (r == VK_SUCCESS) live_add(O_memory, 1);
  return r;
}
static VKAPI_ATTR void VKAPI_CALL l_FreeMemory(VkDevice dev, VkDeviceMemory m, const VkAllocationCallbacks *a) {
  if (m) live_add(O_memory, -1);
  D(dev)->FreeMemory(dev, m, a);
}
static VKAPI_ATTR VkResult VKAPI_CALL l_MapMemory(VkDevice dev, VkDeviceMemory m, VkDeviceSize off,
                                                  VkDeviceSize size, VkMemoryMapFlags fl, void **pp) {
  VkResult f = fault_for(F_MapMemory);
  if (f != VK_SUCCESS) {
    note_injection(F_MapMemory, f);
    return f;
  }
  return D(dev)->MapMemory(dev, m, off, size, fl, pp);
}
static VKAPI_ATTR VkResult VKAPI_CALL l_BindBufferMemory(VkDevice dev, VkBuffer b, VkDeviceMemory m,
                                                         VkDeviceSize off) {
  VkResult f = fault_for(F_BindBufferMemory);
  if (f != VK_SUCCESS) {
    note_injection(F_BindBufferMemory, f);
    return f;
  }
  return D(dev)->BindBufferMemory(dev, b, m, off);
}
static VKAPI_ATTR VkResult VKAPI_CALL l_CreateComputePipelines(VkDevice dev, VkPipelineCache cache,
                                                               uint32_t n, const VkComputePipelineCreateInfo *ci,
                                                               const VkAllocationCallbacks *a, VkPipeline *p) {
  VkResult f = fault_for(F_CreateComputePipelines);
  if (f != VK_SUCCESS) {
    note_injection(F_CreateComputePipelines, f);
    for (uint32_t i = 0; i < n; i++) p[i] = VK_NULL_HANDLE; /* as the spec asks of a failure */
    return f;
  }
  VkResult r = D(dev)->CreateComputePipelines(dev, cache, n, ci, a, p);
  for (uint32_t i = 0; i < n; i++)
    if (p[i]) live_add(O_pipeline, 1);
  return r;
}
static VKAPI_ATTR void VKAPI_CALL l_DestroyPipeline(VkDevice dev, VkPipeline h, const VkAllocationCallbacks *a) {
  if (h) live_add(O_pipeline, -1);
  D(dev)->DestroyPipeline(dev, h, a);
}
static VKAPI_ATTR VkResult VKAPI_CALL l_AllocateDescriptorSets(VkDevice dev, const VkDescriptorSetAllocateInfo *ai,
                                                               VkDescriptorSet *p) {
  VkResult f = fault_for(F_AllocateDescriptorSets);
  if (f != VK_SUCCESS) {
    note_injection(F_AllocateDescriptorSets, f);
    for (uint32_t i = 0; i < ai->descriptorSetCount; i++) p[i] = VK_NULL_HANDLE;
    return f;
  }
  return D(dev)->AllocateDescriptorSets(dev, ai, p);
}
static VKAPI_ATTR VkResult VKAPI_CALL l_AllocateCommandBuffers(VkDevice dev, const VkCommandBufferAllocateInfo *ai,
                                                               VkCommandBuffer *p) {
  VkResult f = fault_for(F_AllocateCommandBuffers);
  if (f != VK_SUCCESS) {
    note_injection(F_AllocateCommandBuffers, f);
    for (uint32_t i = 0; i < ai->commandBufferCount; i++) p[i] = VK_NULL_HANDLE;
    return f;
  }
  return D(dev)->AllocateCommandBuffers(dev, ai, p);
}
static VKAPI_ATTR VkResult VKAPI_CALL l_BeginCommandBuffer(VkCommandBuffer cb, const VkCommandBufferBeginInfo *bi) {
  VkResult f = fault_for(F_BeginCommandBuffer);
  if (f != VK_SUCCESS) {
    note_injection(F_BeginCommandBuffer, f);
    return f;
  }
  return D(cb)->BeginCommandBuffer(cb, bi);
}
/* A failed vkEndCommandBuffer leaves the command buffer invalid; ending it for real first keeps
 * the layers below from seeing one left in the recording state. */
static VKAPI_ATTR VkResult VKAPI_CALL l_EndCommandBuffer(VkCommandBuffer cb) {
  VkResult r = D(cb)->EndCommandBuffer(cb);
  VkResult f = fault_for(F_EndCommandBuffer);
  if (f != VK_SUCCESS) {
    note_injection(F_EndCommandBuffer, f);
    return f;
  }
  return r;
}
static VKAPI_ATTR VkResult VKAPI_CALL l_ResetFences(VkDevice dev, uint32_t n, const VkFence *fences) {
  VkResult f = fault_for(F_ResetFences);
  if (f != VK_SUCCESS) {
    note_injection(F_ResetFences, f);
    return f;
  }
  devtab_t *d = D(dev);
  pthread_mutex_lock(&mu);
  for (uint32_t i = 0; i < n; i++) undrop_fence(d, fences[i]);
  pthread_mutex_unlock(&mu);
  return d->ResetFences(dev, n, fences);
}

/* ---- submitting and waiting: device loss ---------------------------------------------------- */
static VKAPI_ATTR VkResult VKAPI_CALL l_QueueSubmit(VkQueue q, uint32_t n, const VkSubmitInfo *s, VkFence fence) {
  devtab_t *d = D(q);
  VkResult f = fault_for(F_QueueSubmit);
  if (f != VK_SUCCESS) note_injection(F_QueueSubmit, f);
  if (f == VK_ERROR_DEVICE_LOST) mark_lost(d);
  if (f != VK_SUCCESS || dev_lost(d)) {
    /* Nothing reaches the queue, so the fence would never signal: waits on it must not block. */
    drop_fence(d, fence);
    return f != VK_SUCCESS ? f : VK_ERROR_DEVICE_LOST;
  }
  /* A fence whose earlier submission was dropped (out of memory) is submitted for real now. */
  pthread_mutex_lock(&mu);
  undrop_fence(d, fence);
  pthread_mutex_unlock(&mu);
  return d->QueueSubmit(q, n, s, fence);
}
static VKAPI_ATTR VkResult VKAPI_CALL l_WaitForFences(VkDevice dev, uint32_t n, const VkFence *fences,
                                                      VkBool32 all, uint64_t timeout) {
  devtab_t *d = D(dev);
  VkResult f = fault_for(F_WaitForFences);
  if (f != VK_SUCCESS) note_injection(F_WaitForFences, f);
  if (f == VK_ERROR_DEVICE_LOST) mark_lost(d);
  /* Wait for the fences for real, so that the layers below see the work finish and the
   * application may free what it used, then report the fault. A fence whose submission failed
   * never signals: waiting for it blocks until the timeout, as on a real device, except on a
   * lost device, whose waits return at once. */
  VkFence real[64];
  uint32_t m = 0;
  const int lost = dev_lost(d);
  pthread_mutex_lock(&mu);
  for (uint32_t i = 0; i < n && m < 64; i++)
    if (!lost || !is_dropped(d, fences[i])) real[m++] = fences[i];
  pthread_mutex_unlock(&mu);
  VkResult r = VK_SUCCESS;
  if (m == n) r = d->WaitForFences(dev, n, fences, all, timeout);
  else if (m) r = d->WaitForFences(dev, m, real, VK_TRUE, timeout);
  if (f != VK_SUCCESS) return f;
  if (dev_lost(d)) return VK_ERROR_DEVICE_LOST;
  return r;
}
static VKAPI_ATTR VkResult VKAPI_CALL l_GetFenceStatus(VkDevice dev, VkFence fence) {
  devtab_t *d = D(dev);
  VkResult r = d->GetFenceStatus(dev, fence);
  return dev_lost(d) ? VK_ERROR_DEVICE_LOST : r;
}
static VKAPI_ATTR VkResult VKAPI_CALL l_QueueWaitIdle(VkQueue q) {
  devtab_t *d = D(q);
  VkResult r = d->QueueWaitIdle(q);
  return dev_lost(d) ? VK_ERROR_DEVICE_LOST : r;
}
static VKAPI_ATTR VkResult VKAPI_CALL l_DeviceWaitIdle(VkDevice dev) {
  devtab_t *d = D(dev);
  VkResult r = d->DeviceWaitIdle(dev);
  return dev_lost(d) ? VK_ERROR_DEVICE_LOST : r;
}

/* ---- instance and device chaining (as in shared/tools/vkcount) ------------------------------- */
static VKAPI_ATTR VkResult VKAPI_CALL l_CreateInstance(const VkInstanceCreateInfo *ci, const VkAllocationCallbacks *a,
                                                       VkInstance *pInst) {
  pthread_mutex_lock(&mu);
  configure_from_env();
  int bad = config_error[0] != 0;
  pthread_mutex_unlock(&mu);
  if (bad) {
    /* A mistyped VKFORMER_FAULT must not silently test nothing. */
    fprintf(stderr, "[vkfault] VKFORMER_FAULT='%s': %s\n", getenv("VKFORMER_FAULT"), config_error);
    return VK_ERROR_INITIALIZATION_FAILED;
  }
  VkLayerInstanceCreateInfo *li = (VkLayerInstanceCreateInfo *)ci->pNext;
  while (li && !(li->sType == VK_STRUCTURE_TYPE_LOADER_INSTANCE_CREATE_INFO && li->function == VK_LAYER_LINK_INFO))
    li = (VkLayerInstanceCreateInfo *)li->pNext;
  if (!li) return VK_ERROR_INITIALIZATION_FAILED;
  PFN_vkGetInstanceProcAddr gipa = li->u.pLayerInfo->pfnNextGetInstanceProcAddr;
  li->u.pLayerInfo = li->u.pLayerInfo->pNext;
  PFN_vkCreateInstance create = (PFN_vkCreateInstance)gipa(VK_NULL_HANDLE, "vkCreateInstance");
  if (!create) return VK_ERROR_INITIALIZATION_FAILED;
  VkResult r = create(ci, a, pInst);
  if (r != VK_SUCCESS) return r;
  pthread_mutex_lock(&mu);
  int i;
  for (i = 0; i < MAXOBJ && insts[i].key; i++) {
  }
  if (i < MAXOBJ) {
    insts[i].key = KEY(*pInst);
    insts[i].inst = *pInst;
    insts[i].gipa = gipa;
    insts[i].DestroyInstance = (PFN_vkDestroyInstance)gipa(*pInst, "vkDestroyInstance");
  }
  live[O_instance]++;
  last_instance = *pInst;
  pthread_mutex_unlock(&mu);
  if (i == MAXOBJ) {
    fprintf(stderr, "[vkfault] more than %d live instances\n", MAXOBJ);
    abort();
  }
  return VK_SUCCESS;
}
static VKAPI_ATTR void VKAPI_CALL l_DestroyInstance(VkInstance inst, const VkAllocationCallbacks *a) {
  if (!inst) return;
  inst_t *e = inst_get(KEY(inst));
  PFN_vkDestroyInstance destroy = e ? e->DestroyInstance : NULL;
  pthread_mutex_lock(&mu);
  if (e) memset(e, 0, sizeof *e);
  int last = --live[O_instance] == 0;
  if (last_instance == inst) last_instance = VK_NULL_HANDLE;
  pthread_mutex_unlock(&mu);
  if (destroy) destroy(inst, a);
  if (last) report("vkDestroyInstance");
}
static VKAPI_ATTR VkResult VKAPI_CALL l_CreateDevice(VkPhysicalDevice pd, const VkDeviceCreateInfo *ci,
                                                     const VkAllocationCallbacks *a, VkDevice *pDev) {
  VkLayerDeviceCreateInfo *li = (VkLayerDeviceCreateInfo *)ci->pNext;
  while (li && !(li->sType == VK_STRUCTURE_TYPE_LOADER_DEVICE_CREATE_INFO && li->function == VK_LAYER_LINK_INFO))
    li = (VkLayerDeviceCreateInfo *)li->pNext;
  if (!li) return VK_ERROR_INITIALIZATION_FAILED;
  PFN_vkGetInstanceProcAddr gipa = li->u.pLayerInfo->pfnNextGetInstanceProcAddr;
  PFN_vkGetDeviceProcAddr gdpa = li->u.pLayerInfo->pfnNextGetDeviceProcAddr;
  li->u.pLayerInfo = li->u.pLayerInfo->pNext;
  inst_t *e = inst_get(KEY(pd)); /* a physical device shares its instance's dispatch key */
  VkInstance inst = e ? e->inst : last_instance;
  PFN_vkCreateDevice create = (PFN_vkCreateDevice)gipa(inst, "vkCreateDevice");
  if (!create) return VK_ERROR_INITIALIZATION_FAILED;
  VkResult r = create(pd, ci, a, pDev);
  if (r != VK_SUCCESS) return r;
  devtab_t t;
  memset(&t, 0, sizeof t);
  t.key = KEY(*pDev);
  t.device = *pDev;
#define X(n) t.n = (PFN_vk##n)gdpa(*pDev, "vk" #n);
  DEV_FUNCS(X)
#undef X
  t.GetDeviceProcAddr = gdpa;
  pthread_mutex_lock(&mu);
  int i;
  for (i = 0; i < MAXOBJ && devs[i].key; i++) {
  }
  if (i < MAXOBJ) devs[i] = t;
  live[O_device]++;
  pthread_mutex_unlock(&mu);
  if (i == MAXOBJ) {
    fprintf(stderr, "[vkfault] more than %d live devices\n", MAXOBJ);
    abort();
  }
  return VK_SUCCESS;
}
static VKAPI_ATTR void VKAPI_CALL l_DestroyDevice(VkDevice dev, const VkAllocationCallbacks *a) {
  if (!dev) return;
  devtab_t *t = D(dev);
  PFN_vkDestroyDevice destroy = t->DestroyDevice;
  pthread_mutex_lock(&mu);
  t->key = NULL;
  live[O_device]--;
  pthread_mutex_unlock(&mu);
  destroy(dev, a);
}

/* ---- proc-addr -------------------------------------------------------------------------------- */
VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL vkfault_GetDeviceProcAddr(VkDevice d, const char *name);
VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL vkfault_GetInstanceProcAddr(VkInstance i, const char *name);

#define INTERCEPTED(X)                                                                             \
  X(DestroyDevice) X(AllocateMemory) X(FreeMemory) X(MapMemory) X(BindBufferMemory) X(CreateBuffer) \
  X(DestroyBuffer) X(CreateBufferView) X(DestroyBufferView) X(CreateShaderModule)                  \
  X(DestroyShaderModule) X(CreateComputePipelines) X(DestroyPipeline) X(CreatePipelineLayout)      \
  X(DestroyPipelineLayout) X(CreateDescriptorSetLayout) X(DestroyDescriptorSetLayout)              \
  X(CreateDescriptorPool) X(DestroyDescriptorPool) X(AllocateDescriptorSets) X(CreateCommandPool)  \
  X(DestroyCommandPool) X(AllocateCommandBuffers) X(BeginCommandBuffer) X(EndCommandBuffer)        \
  X(CreateFence) X(DestroyFence) X(ResetFences) X(GetFenceStatus) X(WaitForFences)                 \
  X(CreateQueryPool) X(DestroyQueryPool) X(QueueSubmit) X(QueueWaitIdle) X(DeviceWaitIdle)

static PFN_vkVoidFunction dev_intercept(const char *name) {
  if (strncmp(name, "vk", 2)) return NULL;
#define X(n) \
  if (!strcmp(name + 2, #n)) return (PFN_vkVoidFunction)l_##n;
  INTERCEPTED(X)
#undef X
  if (!strcmp(name, "vkGetDeviceProcAddr")) return (PFN_vkVoidFunction)vkfault_GetDeviceProcAddr;
  return NULL;
}

EXPORT VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL vkfault_GetDeviceProcAddr(VkDevice d, const char *name) {
  devtab_t *t = D(d);
  PFN_vkVoidFunction next = t->GetDeviceProcAddr(d, name);
  PFN_vkVoidFunction mine = dev_intercept(name);
  return (mine && next) ? mine : next;
}

EXPORT VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL vkfault_GetInstanceProcAddr(VkInstance i, const char *name) {
  if (!strcmp(name, "vkGetInstanceProcAddr")) return (PFN_vkVoidFunction)vkfault_GetInstanceProcAddr;
  if (!strcmp(name, "vkCreateInstance")) return (PFN_vkVoidFunction)l_CreateInstance;
  if (!strcmp(name, "vkDestroyInstance")) return (PFN_vkVoidFunction)l_DestroyInstance;
  if (!strcmp(name, "vkCreateDevice")) return (PFN_vkVoidFunction)l_CreateDevice;
  if (!i) return NULL;
  inst_t *e = inst_get(KEY(i));
  if (!e) return NULL;
  PFN_vkVoidFunction next = e->gipa(i, name);
  PFN_vkVoidFunction mine = dev_intercept(name);
  return (mine && next) ? mine : next;
}

EXPORT VKAPI_ATTR VkResult VKAPI_CALL vkNegotiateLoaderLayerInterfaceVersion(VkNegotiateLayerInterface *v) {
  if (!v || v->sType != LAYER_NEGOTIATE_INTERFACE_STRUCT) return VK_ERROR_INITIALIZATION_FAILED;
  if (v->loaderLayerInterfaceVersion > 2) v->loaderLayerInterfaceVersion = 2;
  v->pfnGetInstanceProcAddr = vkfault_GetInstanceProcAddr;
  v->pfnGetDeviceProcAddr = vkfault_GetDeviceProcAddr;
  v->pfnGetPhysicalDeviceProcAddr = NULL;
  return VK_SUCCESS;
}

/* ---- control from the program under test (tests/fault_injection.hpp) -------------------------- */
/* Replaces the faults with `spec` (VKFORMER_FAULT's grammar) and restarts the call counts, so
 * "vkQueueSubmit:1" fails the next submission. Returns 0, or -1 with the reason in
 * vkfault_error(). Live-object counts are kept. */
EXPORT int vkfault_configure(const char *spec) {
  pthread_mutex_lock(&mu);
  configured = 1;
  memset(calls, 0, sizeof calls);
  memset(injected, 0, sizeof injected);
  calls_any = 0;
  int r = parse_spec(spec ? spec : "");
  pthread_mutex_unlock(&mu);
  return r;
}
EXPORT const char *vkfault_error(void) { return config_error; }
/* Live objects of every type the layer counts, instances and devices included. */
EXPORT int64_t vkfault_live_objects(void) {
  pthread_mutex_lock(&mu);
  int64_t n = 0;
  for (int o = 0; o < O_COUNT; o++) n += live[o];
  pthread_mutex_unlock(&mu);
  return n;
}
/* Calls of `function` ("vkQueueSubmit") since the last vkfault_configure; "call": of all. */
EXPORT uint64_t vkfault_calls(const char *function) {
  uint64_t n = 0;
  pthread_mutex_lock(&mu);
  if (!strcmp(function, "call")) n = calls_any;
  for (int f = 0; f < F_COUNT; f++)
    if (!strcmp(function, f_name[f])) n = calls[f];
  pthread_mutex_unlock(&mu);
  return n;
}
/* Faults injected since the last vkfault_configure. */
EXPORT uint64_t vkfault_injected(void) {
  uint64_t n = 0;
  pthread_mutex_lock(&mu);
  for (int f = 0; f < F_COUNT; f++) n += injected[f];
  pthread_mutex_unlock(&mu);
  return n;
}
