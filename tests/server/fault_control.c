/* Preloaded (LD_PRELOAD) into `vkformer serve` by the serve soak (soak_serve.py), so that it can
 * arm the vkfault layer (tests/fault_layer/README.md) in a running server, every few minutes,
 * as tests/fault_injection.hpp does inside a test: VKFORMER_FAULT is read once, at the first
 * vkCreateInstance, and the server must not be restarted between faults.
 *
 * A thread looks for the file VKFORMER_FAULT_CONTROL names every 50 ms; when it is there, it
 * reads a VKFORMER_FAULT spec from it ("vkQueueSubmit:3" fails the 3rd submission from now),
 * removes it, hands the spec to the layer's vkfault_configure (the layer in VKFORMER_FAULT_LAYER,
 * opened with dlopen: the same object the Vulkan loader loads) and writes the result to the file
 * named with ".done" appended: "ok" or the layer's error. The spec "?injected" instead asks how
 * many faults the layer has injected since it was last armed (the answer is the number).
 * Nothing happens without the variables. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void* watch(void* arg) {
  const char* control = getenv("VKFORMER_FAULT_CONTROL");
  const char* layer = getenv("VKFORMER_FAULT_LAYER");
  (void)arg;
  char done[4096];
  snprintf(done, sizeof done, "%s.done", control);
  for (;;) {
    struct timespec pause = {0, 50 * 1000 * 1000};
    nanosleep(&pause, NULL);
    FILE* f = fopen(control, "r");
    if (!f) continue;
    char spec[512] = {0};
    size_t n = fread(spec, 1, sizeof spec - 1, f);
    fclose(f);
    unlink(control);
    while (n > 0 && (spec[n - 1] == '\n' || spec[n - 1] == ' ')) spec[--n] = 0;
    const char* result = "ok";
    char number[32];
    void* lib = dlopen(layer, RTLD_NOW);
    int (*configure)(const char*) = lib ? (int (*)(const char*))dlsym(lib, "vkfault_configure") : NULL;
    const char* (*error)(void) = lib ? (const char* (*)(void))dlsym(lib, "vkfault_error") : NULL;
    unsigned long long (*injected)(void) = lib ? (unsigned long long (*)(void))dlsym(lib, "vkfault_injected") : NULL;
    if (!configure || !error || !injected) {
      result = lib ? "the layer does not export vkfault_configure, vkfault_error and vkfault_injected" : dlerror();
    } else if (strcmp(spec, "?injected") == 0) {
      snprintf(number, sizeof number, "%llu", injected());
      result = number;
    } else if (configure(spec) != 0) {
      result = error();
    }
    FILE* out = fopen(done, "w");
    if (out) {
      fputs(result, out);
      fclose(out);
    }
  }
  return NULL;
}

__attribute__((constructor)) static void start(void) {
  if (!getenv("VKFORMER_FAULT_CONTROL") || !getenv("VKFORMER_FAULT_LAYER")) return;
  pthread_t thread;
  if (pthread_create(&thread, NULL, watch, NULL) == 0) pthread_detach(thread);
}
