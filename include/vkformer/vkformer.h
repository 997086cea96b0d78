/* The vkformer C API: devices and PyTorch-compatible transformer models from any C (or FFI)
 * program. Every call returns a vkf_status; on failure vkf_last_error() gives the message (per
 * thread, valid until the next failing call on that thread). Objects are opaque handles released
 * with their *_release function; tensors passed in are borrowed views of caller memory.
 * Threads: a vkf_device may be shared by threads; a vkf_model is used by one thread at a time. */
#ifndef VKFORMER_H
#define VKFORMER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum vkf_status {
  VKF_OK = 0,
  VKF_ERROR_INVALID_ARGUMENT = 1,
  VKF_ERROR_SHAPE_MISMATCH = 2,
  VKF_ERROR_DEVICE_NOT_FOUND = 3,
  VKF_ERROR_UNSUPPORTED = 4,
  VKF_ERROR_OUT_OF_MEMORY = 5,
  VKF_ERROR_DEVICE_LOST = 6,
  VKF_ERROR_VULKAN = 7,
  VKF_ERROR_IO = 8,
  VKF_ERROR_FORMAT = 9,
  VKF_ERROR_INTERNAL = 10
} vkf_status;

typedef enum vkf_dtype { VKF_F32 = 0, VKF_F16 = 1, VKF_I32 = 2 } vkf_dtype;

/* A tensor view: `data` holds shape[0] * ... * shape[rank-1] elements of `dtype`, row-major.
 * For masks, boolean data is VKF_I32 with nonzero = masked/ignored. */
typedef struct vkf_tensor {
  const void* data;
  vkf_dtype dtype;
  int32_t rank; /* 0..4 */
  int64_t shape[4];
} vkf_tensor;

/* A result owned by vkformer: float32 data, released with vkf_result_release. */
typedef struct vkf_result {
  float* data;
  int32_t rank;
  int64_t shape[4];
} vkf_result;

/* Masks of one call, as in PyTorch; NULL members are absent. */
typedef struct vkf_masks {
  int32_t causal; /* encoder: causal self-attention; decoder/transformer: causal target */
  const vkf_tensor* src_mask;
  const vkf_tensor* tgt_mask;
  const vkf_tensor* memory_mask;
  const vkf_tensor* src_key_padding_mask;
  const vkf_tensor* tgt_key_padding_mask;
  const vkf_tensor* memory_key_padding_mask;
} vkf_masks;

typedef struct vkf_generate_options {
  int32_t max_new_tokens; /* default 32 */
  int32_t bos;            /* default 1 */
  int32_t eos;            /* default 2; -1: none */
  int32_t beam;           /* default 1 (greedy) */
  float length_penalty;   /* default 0.6 */
} vkf_generate_options;

typedef struct vkf_device vkf_device;
typedef struct vkf_model vkf_model;

const char* vkf_last_error(void);
const char* vkf_version(void);
void vkf_generate_options_init(vkf_generate_options* options);

/* Devices. `selector` as VKFORMER_DEVICE: NULL or "" for the default (discrete, integrated,
 * virtual, cpu), an index, a name substring or a UUID. */
vkf_status vkf_device_count(int32_t* count);
vkf_status vkf_device_open(const char* selector, vkf_device** device);
const char* vkf_device_name(const vkf_device* device);
/* With validation on (VKFORMER_VALIDATION=1), how many messages the Khronos validation layer has
 * reported for this device so far; 0 when it is off. */
int64_t vkf_device_validation_message_count(const vkf_device* device);
void vkf_device_release(vkf_device* device);

/* Models: a directory with config.json and model.safetensors. dtype VKF_F32 or VKF_F16. */
vkf_status vkf_model_load(vkf_device* device, const char* directory, vkf_dtype dtype,
                          vkf_model** model);
void vkf_model_release(vkf_model* model);

/* What a loaded model is: its config.json, and the type it runs in. `arch` is a static string
 * ("encoder", "decoder", "transformer" or "seq2seq"); vocabularies are 0 unless seq2seq. */
typedef struct vkf_model_info {
  const char* arch;
  int64_t d_model, nhead, dim_feedforward;
  int64_t num_encoder_layers, num_decoder_layers;
  int64_t src_vocab, tgt_vocab, max_len;
  vkf_dtype dtype;
} vkf_model_info;
vkf_status vkf_model_get_info(const vkf_model* model, vkf_model_info* info);

/* Model::encode / decode / forward of the C++ API (include/vkformer/model.hpp). `masks` may
 * be NULL. encode takes only the src_* masks (and causal), decode only the tgt_* and memory_*
 * ones: a mask of the other side is an error (VKF_ERROR_INVALID_ARGUMENT), not ignored. On
 * success *result holds the output. */
vkf_status vkf_model_encode(vkf_model* model, const vkf_tensor* src, const vkf_masks* masks,
                            vkf_result* result);
vkf_status vkf_model_decode(vkf_model* model, const vkf_tensor* tgt, const vkf_tensor* memory,
                            const vkf_masks* masks, vkf_result* result);
vkf_status vkf_model_forward(vkf_model* model, const vkf_tensor* src, const vkf_tensor* tgt,
                             const vkf_masks* masks, vkf_result* result);

/* seq2seq models: generated token ids (after bos) into tokens[0..capacity); *count is how many
 * were generated (if more than capacity, VKF_ERROR_INVALID_ARGUMENT and *count says how many
 * were needed). `options` may be NULL for the defaults. */
vkf_status vkf_model_generate(vkf_model* model, const int32_t* src, size_t src_length,
                              const vkf_generate_options* options, int32_t* tokens,
                              size_t capacity, size_t* count);

void vkf_result_release(vkf_result* result);

/* Sentence embeddings (include/vkformer/embedder.hpp): a BERT-family model directory as
 * sentence-transformers saves it (e.g. all-MiniLM-L6-v2), or a plain Hugging Face BERT
 * directory. dtype VKF_F32 or VKF_F16. A vkf_embedder is used by one thread at a time. */
typedef struct vkf_embedder vkf_embedder;
vkf_status vkf_embedder_load(vkf_device* device, const char* directory, vkf_dtype dtype,
                             vkf_embedder** embedder);
void vkf_embedder_release(vkf_embedder* embedder);
/* The embedding width (e.g. 384); 0 for NULL. */
int64_t vkf_embedder_dimension(const vkf_embedder* embedder);
/* `count` (>= 1) NUL-terminated UTF-8 texts -> *result float32 [count, dimension], one row per
 * text, as sentence-transformers' encode(). Text that is not UTF-8 is VKF_ERROR_INVALID_ARGUMENT
 * naming the text. */
vkf_status vkf_embedder_embed(vkf_embedder* embedder, const char* const* texts, size_t count,
                              vkf_result* result);

#ifdef __cplusplus
}
#endif

#endif /* VKFORMER_H */
