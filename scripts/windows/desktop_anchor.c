/* desktop_anchor.exe READY_FILE: holds Wine's desktop open for a whole `make test-windows` run.
 *
 * Why: Wine's desktop (explorer.exe /desktop) is closed by wineserver one second after its last
 * user process exits, and the next program that needs it starts a new one. A program that asks
 * for the desktop while the old one is closing gets no graphics driver, and so no Vulkan: its
 * vulkan-1.dll then reports a Vulkan 1.0 loader and vkformer stops with "the Vulkan loader
 * supports only Vulkan 1.0". Under ctest, programs start and end every second; one test in a
 * few hundred failed that way (CI, cli_models). This program is a desktop user from the start of
 * the run to its end (scripts/test_windows.sh starts it, and `wineserver -k` stops it), so the
 * desktop is made once and never closes.
 *
 * It writes READY_FILE (a Windows path) once its window exists, that is once it holds the
 * desktop; the script waits for that file before the first test starts.
 */
#include <stdio.h>
#include <windows.h>

static LRESULT CALLBACK anchor_proc(HWND window, UINT message, WPARAM wparam, LPARAM lparam) {
  /* A closing desktop asks its windows to close; this one stays until wineserver -k. */
  if (message == WM_CLOSE) return 0;
  return DefWindowProcW(window, message, wparam, lparam);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: desktop_anchor.exe READY_FILE\n");
    return 2;
  }
  WNDCLASSW window_class = {0};
  window_class.lpfnWndProc = anchor_proc;
  window_class.hInstance = GetModuleHandleW(NULL);
  window_class.lpszClassName = L"vkformer_desktop_anchor";
  if (!RegisterClassW(&window_class)) {
    fprintf(stderr, "desktop_anchor: RegisterClassW failed (error %lu)\n", GetLastError());
    return 1;
  }
  /* A top-level window that is never shown: creating it attaches this process to the desktop. */
  HWND window = CreateWindowExW(0, window_class.lpszClassName, L"vkformer desktop anchor", 0, 0, 0,
                                1, 1, NULL, NULL, window_class.hInstance, NULL);
  if (!window) {
    fprintf(stderr, "desktop_anchor: CreateWindowExW failed (error %lu)\n", GetLastError());
    return 1;
  }
  FILE* ready = fopen(argv[1], "w");
  if (!ready) {
    fprintf(stderr, "desktop_anchor: cannot write %s\n", argv[1]);
    return 1;
  }
  fputs("ready\n", ready);
  fclose(ready);
  MSG message;
  while (GetMessageW(&message, NULL, 0, 0) > 0) DispatchMessageW(&message);
  return 0;
}
