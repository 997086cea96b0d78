/* Greedy generation with a seq2seq model through the C API.
 * Usage: generate MODEL_DIR [TOKEN ...]   (source token ids; default 5 17 3 9) */
#include <stdio.h>
#include <stdlib.h>

#include "vkformer/vkformer.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s MODEL_DIR [TOKEN ...]\n", argv[0]);
    return 2;
  }
  int32_t src[256] = {5, 17, 3, 9};
  size_t n = 4;
  if (argc > 2) {
    n = 0;
    for (int i = 2; i < argc && n < 256; ++i) src[n++] = (int32_t)strtol(argv[i], NULL, 10);
  }
  vkf_device* device = NULL;
  vkf_model* model = NULL;
  if (vkf_device_open(NULL, &device) != VKF_OK ||
      vkf_model_load(device, argv[1], VKF_F32, &model) != VKF_OK) {
    fprintf(stderr, "error: %s\n", vkf_last_error());
    vkf_device_release(device);
    return 1;
  }
  vkf_generate_options options;
  vkf_generate_options_init(&options);
  int32_t tokens[256];
  size_t count = 0;
  vkf_status status = vkf_model_generate(model, src, n, &options, tokens, 256, &count);
  if (status != VKF_OK) {
    fprintf(stderr, "error: %s\n", vkf_last_error());
  } else {
    printf("device: %s\ntokens:", vkf_device_name(device));
    for (size_t i = 0; i < count; ++i) printf(" %d", tokens[i]);
    printf("\n");
  }
  vkf_model_release(model);
  vkf_device_release(device);
  return status == VKF_OK ? 0 : 1;
}
