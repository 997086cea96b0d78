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
  VKF_ERROR_INTERNAL = 10,
  /* The object is inside another call that changes it: vkf_llm_generate, vkf_llm_chat or
   * vkf_llm_reset called from a token callback on the same vkf_llm (or from another thread
   * meanwhile). The object is unchanged; call again after the running call returns. */
  VKF_ERROR_BUSY = 11
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

/* Language models from GGUF files (include/vkformer/llm.hpp, generate.hpp): llama-architecture
 * models such as SmolLM2-135M-Instruct with quantized weights on the device, their byte-level
 * BPE tokenizer and chat template. A vkf_llm holds one KV cache and one conversation, and is
 * used by one thread at a time. */
typedef struct vkf_llm vkf_llm;

/* Sampling as in include/vkformer/sampling.hpp (llama.cpp's chain); fill with
 * vkf_sampling_options_default, which sets greedy decoding. */
typedef struct vkf_sampling_options {
  float temperature;     /* >= 0; 0: greedy */
  int32_t top_k;         /* >= 0; 0: off */
  float top_p;           /* (0, 1]; 1: off */
  float min_p;           /* [0, 1]; 0: off */
  float repeat_penalty;  /* > 0; 1: off */
  int32_t repeat_last_n; /* >= 0; default 64 */
  uint64_t seed;
} vkf_sampling_options;
void vkf_sampling_options_default(vkf_sampling_options* options);

/* Why generation stopped. */
typedef enum vkf_stop_reason {
  VKF_STOP_END_OF_GENERATION = 0, /* an end-of-generation token (eos, <|im_end|>, ...) */
  VKF_STOP_MAX_TOKENS = 1,
  VKF_STOP_CALLBACK = 2,          /* the callback returned 0 */
  VKF_STOP_CONTEXT_FULL = 3
} vkf_stop_reason;

typedef struct vkf_generation_stats {
  int64_t prompt_tokens;
  double prompt_seconds;
  int64_t generated_tokens; /* the end-of-generation token not counted */
  double generation_seconds;
  int32_t stop_reason;      /* a vkf_stop_reason */
} vkf_generation_stats;

/* Called once per generated token with the text it completes (whole UTF-8 characters; may be
 * empty), `length` bytes at `text` (not NUL-terminated). Return nonzero to go on, 0 to stop.
 * From inside the callback, the vkf_llm it reports on may be read (vkf_llm_position,
 * vkf_llm_tokenize, vkf_llm_detokenize, ...) but not changed: vkf_llm_generate, vkf_llm_chat and
 * vkf_llm_reset on it return VKF_ERROR_BUSY (the running call goes on unharmed), and
 * vkf_llm_release on it is carried out when the running call returns. Other objects may be used. */
typedef int32_t (*vkf_token_callback)(const char* text, size_t length, int32_t token, void* user_data);

/* context: tokens the KV cache holds; 0 for the model's context length capped at 4096. */
vkf_status vkf_llm_load(vkf_device* device, const char* gguf_path, int64_t context, vkf_llm** llm);
/* vkf_llm_load with the KV cache's types (llama.cpp's --cache-type-k/v): "f32", "f16", "q8_0" or
 * "q4_0", NULL for the activations' type (f32). An unknown name: VKF_ERROR_INVALID_ARGUMENT naming
 * cache_type_k or cache_type_v. */
vkf_status vkf_llm_load_with_cache_types(vkf_device* device, const char* gguf_path, int64_t context,
                                         const char* cache_type_k, const char* cache_type_v, vkf_llm** llm);
void vkf_llm_release(vkf_llm* llm);
int64_t vkf_llm_vocab_size(const vkf_llm* llm); /* 0 for NULL */
int64_t vkf_llm_context(const vkf_llm* llm);    /* 0 for NULL */
int64_t vkf_llm_position(const vkf_llm* llm);   /* tokens in the KV cache now; 0 for NULL */
int64_t vkf_llm_kv_bytes_per_token(const vkf_llm* llm); /* K and V of a token, every layer; 0 for NULL */

/* The ids of UTF-8 text (special tokens such as <|im_start|> in the text become one id; with
 * add_special, BOS/EOS as the model's file says) into tokens[0..capacity); *count is how many
 * there are (more than capacity: VKF_ERROR_INVALID_ARGUMENT, *count says how many are needed). */
vkf_status vkf_llm_tokenize(const vkf_llm* llm, const char* text, int32_t add_special, int32_t* tokens,
                            size_t capacity, size_t* count);
/* The bytes the ids stand for, NUL-terminated, into text[0..capacity); *length is their number
 * without the NUL (capacity <= *length: VKF_ERROR_INVALID_ARGUMENT, *length says how many). */
vkf_status vkf_llm_detokenize(const vkf_llm* llm, const int32_t* tokens, size_t count, char* text,
                              size_t capacity, size_t* length);

/* Continues the KV cache with `prompt` (UTF-8; with BOS when the cache is empty and the model
 * wants one) and generates up to max_tokens tokens, each passed to `callback` (may be NULL).
 * `sampling` and `stats` may be NULL. A prompt that does not fit in the cache is
 * VKF_ERROR_INVALID_ARGUMENT naming both numbers. */
vkf_status vkf_llm_generate(vkf_llm* llm, const char* prompt, int32_t max_tokens,
                            const vkf_sampling_options* sampling, vkf_token_callback callback,
                            void* user_data, vkf_generation_stats* stats);
/* One chat turn: the user's message, formatted with the model's chat template after the turns
 * so far (optionally a system message set first), and the reply generated and kept; only the
 * new turn's tokens are run. `sampling` takes effect at the conversation's first turn. */
vkf_status vkf_llm_chat(vkf_llm* llm, const char* user_message, int32_t max_tokens,
                        const vkf_sampling_options* sampling, vkf_token_callback callback,
                        void* user_data, vkf_generation_stats* stats);
/* Forgets the conversation and empties the KV cache; system_prompt (may be NULL: the template's
 * default, if any) opens the next conversation. */
vkf_status vkf_llm_reset(vkf_llm* llm, const char* system_prompt);

/* Speculative decoding (include/vkformer/generate.hpp, SpeculativeOptions; llama.cpp's
 * --draft-max, --draft-min, --draft-p-min): greedy output stays exactly plain decoding's, and
 * with a temperature the speculative sampling rule keeps the distribution. */
typedef enum vkf_speculative_mode {
  VKF_SPECULATIVE_OFF = 0,
  VKF_SPECULATIVE_NGRAM = 1, /* prompt lookup: no draft model */
  VKF_SPECULATIVE_DRAFT = 2  /* `draft` proposes */
} vkf_speculative_mode;
typedef struct vkf_speculative_options {
  int32_t mode;       /* a vkf_speculative_mode */
  vkf_llm* draft;     /* VKF_SPECULATIVE_DRAFT: a model of the same vocabulary, another vkf_llm
                       * than the target (its KV cache is the draft's own); it must outlive its
                       * use and is not used by anything else meanwhile */
  int32_t draft_max;  /* 1..63 proposals per pass; default 16 */
  int32_t draft_min;  /* 0..draft_max; default 0 */
  float draft_p_min;  /* [0, 1]; default 0.8 */
} vkf_speculative_options;
void vkf_speculative_options_default(vkf_speculative_options* options); /* off, 16, 0, 0.8 */
/* Speculative decoding for the next vkf_llm_generate and vkf_llm_chat calls on llm (options
 * NULL: off). Out-of-range options, a draft of another vocabulary (named), the target itself as
 * its draft: VKF_ERROR_INVALID_ARGUMENT, and the setting stays as it was. */
vkf_status vkf_llm_set_speculative(vkf_llm* llm, const vkf_speculative_options* options);
/* The last generation's proposals drafted and accepted and the model's passes after the prompt
 * (generated tokens / passes: tokens per pass); each may be NULL. */
vkf_status vkf_llm_speculative_stats(const vkf_llm* llm, int64_t* drafted, int64_t* accepted, int64_t* passes);

#ifdef __cplusplus
}
#endif

#endif /* VKFORMER_H */
