// A dlclose() that keeps the library mapped, LD_PRELOADed into the tests by scripts/sanitize.sh.
// The Vulkan loader unloads the driver (lavapipe) and the validation layer at vkDestroyInstance,
// before LeakSanitizer runs at exit: their allocations would then be reported from
// "<unknown module>", which no suppression can name and which could hide vkformer's own frames.
// Kept loaded, the driver's globals are still scanned and the layer's frames keep their name.
int dlclose(void* handle) {
  (void)handle;
  return 0;
}
