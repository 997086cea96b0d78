// The C API: thin wrappers that turn C views into HostTensors, call the C++ API, and turn every
// exception into a status and a per-thread message. Nothing escapes as an exception.
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>

#include "vkformer/gguf_tokenizer.hpp"
#include "vkformer/chat.hpp"
#include "vkformer/generate.hpp"
#include "vkformer/gguf.hpp"
#include "vkformer/llm.hpp"
#include "vkformer/vkformer.h"
#include "vkformer/vkformer.hpp"

struct vkf_device {
  vkformer::Device device;
};

struct vkf_model {
  vkformer::Model model;
};

struct vkf_embedder {
  vkformer::SentenceEmbedder embedder;
};

struct vkf_llm {
  vkformer::LanguageModel model;  // carries the file's chat template (model.chat_templates())
  std::optional<std::string> system_prompt;
  std::optional<vkformer::Conversation> conversation;  // from the first vkf_llm_chat
  // The call that changes the model now (vkf_llm_generate, vkf_llm_chat, vkf_llm_reset) and its
  // thread: another such call meanwhile, from its token callback or another thread, is refused
  // (VKF_ERROR_BUSY). Nested ones once ran: their tokens landed in the outer call's cache.
  std::atomic<const char*> busy{nullptr};
  std::atomic<std::thread::id> busy_thread{};
  // vkf_llm_release from inside a callback: done when the outer call returns.
  bool release_pending = false;
  vkformer::SpeculativeOptions speculative;  // vkf_llm_set_speculative
  vkformer::TextGenerationStats last_stats;  // vkf_llm_speculative_stats
};

namespace {

thread_local std::string last_error;

vkf_status status_of(vkformer::ErrorCode code) {
  using vkformer::ErrorCode;
  switch (code) {
    case ErrorCode::invalid_argument: return VKF_ERROR_INVALID_ARGUMENT;
    case ErrorCode::shape_mismatch: return VKF_ERROR_SHAPE_MISMATCH;
    case ErrorCode::device_not_found: return VKF_ERROR_DEVICE_NOT_FOUND;
    case ErrorCode::unsupported: return VKF_ERROR_UNSUPPORTED;
    case ErrorCode::out_of_memory: return VKF_ERROR_OUT_OF_MEMORY;
    case ErrorCode::device_lost: return VKF_ERROR_DEVICE_LOST;
    case ErrorCode::vulkan: return VKF_ERROR_VULKAN;
    case ErrorCode::io: return VKF_ERROR_IO;
    case ErrorCode::format: return VKF_ERROR_FORMAT;
    case ErrorCode::internal: return VKF_ERROR_INTERNAL;
  }
  return VKF_ERROR_INTERNAL;
}

vkf_status fail(vkf_status status, std::string message) {
  last_error = std::move(message);
  return status;
}

// Thrown for VKF_ERROR_BUSY, which has no vkformer::ErrorCode.
struct Busy {
  std::string message;
};

// Runs `body`, mapping exceptions to statuses.
template <class Body>
vkf_status guarded(Body&& body) {
  try {
    body();
    return VKF_OK;
  } catch (const vkformer::Error& e) {
    return fail(status_of(e.code()), e.what());
  } catch (const Busy& e) {
    return fail(VKF_ERROR_BUSY, e.message);
  } catch (const std::bad_alloc&) {
    return fail(VKF_ERROR_OUT_OF_MEMORY, "out of host memory");
  } catch (const std::exception& e) {
    return fail(VKF_ERROR_INTERNAL, std::string("internal error: ") + e.what());
  } catch (...) {
    return fail(VKF_ERROR_INTERNAL, "internal error: unknown exception");
  }
}

void require(bool ok, const std::string& what) {
  if (!ok) throw vkformer::Error(vkformer::ErrorCode::invalid_argument, what);
}

// A C caller may store any integer in an enum; C++ may not even load one outside the
// enumerators' range, so the bytes are read as the underlying integer and checked as that.
template <class Enum>
auto enum_value(const Enum& e) {
  std::underlying_type_t<Enum> value;
  std::memcpy(&value, &e, sizeof value);
  return value;
}

vkformer::DType to_dtype(const vkf_dtype& dtype, bool allow_i32, const std::string& name) {
  const auto value = enum_value(dtype);
  const bool known = value == VKF_F32 || value == VKF_F16 || (allow_i32 && value == VKF_I32);
  require(known, name + " is " + std::to_string(value) + ", expected " +
                     (allow_i32 ? "VKF_F32 (0), VKF_F16 (1) or VKF_I32 (2)"
                                : "VKF_F32 (0) or VKF_F16 (1)"));
  return static_cast<vkformer::DType>(value);
}

// Errors from the C++ side name no argument; this says which one.
vkformer::Shape to_shape(const vkf_tensor& t, const std::string& name) {
  try {
    return vkformer::Shape(std::vector<int64_t>(t.shape, t.shape + t.rank));
  } catch (const vkformer::Error& e) {
    throw vkformer::Error(e.code(), name + ": " + e.what());
  }
}

vkformer::HostTensor to_host(const vkf_tensor* t, const char* name) {
  require(t != nullptr, std::string(name) + " is NULL");
  require(t->rank >= 0 && t->rank <= 4,
          std::string(name) + ": rank is " + std::to_string(t->rank) + ", expected 0..4");
  vkformer::DType dtype = to_dtype(t->dtype, true, std::string(name) + ": dtype");
  vkformer::HostTensor h(to_shape(*t, name), dtype);
  require(t->data != nullptr || h.nbytes() == 0, std::string(name) + ": data is NULL");
  if (h.nbytes()) std::memcpy(h.data(), t->data, h.nbytes());
  return h;
}

vkformer::ModelMasks to_masks(const vkf_masks* m) {
  vkformer::ModelMasks out;
  if (!m) return out;
  out.causal = m->causal != 0;
  if (m->src_mask) out.src_mask = to_host(m->src_mask, "src_mask");
  if (m->tgt_mask) out.tgt_mask = to_host(m->tgt_mask, "tgt_mask");
  if (m->memory_mask) out.memory_mask = to_host(m->memory_mask, "memory_mask");
  if (m->src_key_padding_mask) out.src_key_padding_mask = to_host(m->src_key_padding_mask, "src_key_padding_mask");
  if (m->tgt_key_padding_mask) out.tgt_key_padding_mask = to_host(m->tgt_key_padding_mask, "tgt_key_padding_mask");
  if (m->memory_key_padding_mask)
    out.memory_key_padding_mask = to_host(m->memory_key_padding_mask, "memory_key_padding_mask");
  return out;
}

// Before the source is copied: a wrong length must not turn into a huge allocation.
void check_source_length(const vkformer::Model& model, size_t length) {
  const int64_t max_len = model.config().max_len;
  require(length <= static_cast<uint64_t>(max_len),
          "src_length " + std::to_string(length) + " is more than max_len " +
              std::to_string(max_len) + ", the longest source the model takes (config.json)");
}

void to_result(const vkformer::HostTensor& t, vkf_result* r) {
  auto values = t.to_f32();
  r->rank = t.shape().rank();
  for (int i = 0; i < 4; ++i) r->shape[i] = i < r->rank ? t.shape()[i] : 0;
  r->data = static_cast<float*>(std::malloc(std::max<size_t>(values.size(), 1) * sizeof(float)));
  if (!r->data) throw std::bad_alloc();
  std::memcpy(r->data, values.data(), values.size() * sizeof(float));
}

}  // namespace

extern "C" {

const char* vkf_last_error(void) { return last_error.c_str(); }

const char* vkf_version(void) { return VKFORMER_VERSION; }

void vkf_generate_options_init(vkf_generate_options* o) {
  if (!o) return;
  vkformer::GenerateOptions d;
  o->max_new_tokens = d.max_new_tokens;
  o->bos = d.bos;
  o->eos = d.eos;
  o->beam = d.beam;
  o->length_penalty = d.length_penalty;
}

vkf_status vkf_device_count(int32_t* count) {
  return guarded([&] {
    require(count != nullptr, "count is NULL");
    *count = static_cast<int32_t>(vkformer::Device::enumerate().size());
  });
}

vkf_status vkf_device_open(const char* selector, vkf_device** device) {
  return guarded([&] {
    require(device != nullptr, "device is NULL");
    *device = nullptr;
    vkformer::DeviceOptions o;
    if (selector) o.selector = selector;
    *device = new vkf_device{vkformer::Device::open(o)};
  });
}

const char* vkf_device_name(const vkf_device* device) {
  return device ? device->device.info().name.c_str() : "";
}

int64_t vkf_device_validation_message_count(const vkf_device* device) {
  return device ? static_cast<int64_t>(device->device.validation_message_count()) : 0;
}

void vkf_device_release(vkf_device* device) { delete device; }

vkf_status vkf_model_load(vkf_device* device, const char* directory, vkf_dtype dtype, vkf_model** model) {
  return guarded([&] {
    require(device && directory && model, "device, directory and model must not be NULL");
    *model = nullptr;
    vkformer::ModelOptions o;
    o.dtype = to_dtype(dtype, false, "dtype");
    *model = new vkf_model{vkformer::Model::load(device->device, directory, o)};
  });
}

void vkf_model_release(vkf_model* model) { delete model; }

vkf_status vkf_model_get_info(const vkf_model* model, vkf_model_info* info) {
  return guarded([&] {
    require(model && info, "model and info must not be NULL");
    const vkformer::ModelConfig& c = model->model.config();
    *info = vkf_model_info{};
    info->arch = vkformer::ModelConfig::arch_name(c.arch);
    info->d_model = c.d_model;
    info->nhead = c.nhead;
    info->dim_feedforward = c.dim_feedforward;
    info->num_encoder_layers = c.has_encoder() ? c.num_encoder_layers : 0;
    info->num_decoder_layers = c.has_decoder() ? c.num_decoder_layers : 0;
    info->src_vocab = c.src_vocab;
    info->tgt_vocab = c.tgt_vocab;
    info->max_len = c.max_len;
    info->dtype = model->model.dtype() == vkformer::DType::f16 ? VKF_F16 : VKF_F32;
  });
}

vkf_status vkf_model_encode(vkf_model* model, const vkf_tensor* src, const vkf_masks* masks,
                            vkf_result* result) {
  return guarded([&] {
    require(model && result, "model and result must not be NULL");
    to_result(model->model.encode(to_host(src, "src"), to_masks(masks)), result);
  });
}

vkf_status vkf_model_decode(vkf_model* model, const vkf_tensor* tgt, const vkf_tensor* memory,
                            const vkf_masks* masks, vkf_result* result) {
  return guarded([&] {
    require(model && result, "model and result must not be NULL");
    to_result(model->model.decode(to_host(tgt, "tgt"), to_host(memory, "memory"), to_masks(masks)), result);
  });
}

vkf_status vkf_model_forward(vkf_model* model, const vkf_tensor* src, const vkf_tensor* tgt,
                             const vkf_masks* masks, vkf_result* result) {
  return guarded([&] {
    require(model && result, "model and result must not be NULL");
    to_result(model->model.forward(to_host(src, "src"), to_host(tgt, "tgt"), to_masks(masks)), result);
  });
}

vkf_status vkf_model_generate(vkf_model* model, const int32_t* src, size_t src_length,
                              const vkf_generate_options* options, int32_t* tokens,
                              size_t capacity, size_t* count) {
  return guarded([&] {
    require(model && src && count, "model, src and count must not be NULL");
    require(tokens || capacity == 0, "tokens is NULL but capacity is not 0");
    vkformer::GenerateOptions o;
    if (options) {
      o.max_new_tokens = options->max_new_tokens;
      o.bos = options->bos;
      o.eos = options->eos;
      o.beam = options->beam;
      o.length_penalty = options->length_penalty;
    }
    check_source_length(model->model, src_length);
    auto out = model->model.generate(std::vector<int32_t>(src, src + src_length), o);
    *count = out.size();
    if (out.size() > capacity)
      throw vkformer::Error(vkformer::ErrorCode::invalid_argument,
                            "generated " + std::to_string(out.size()) + " tokens, but capacity is " +
                                std::to_string(capacity));
    if (!out.empty()) std::memcpy(tokens, out.data(), out.size() * sizeof(int32_t));
  });
}

vkf_status vkf_embedder_load(vkf_device* device, const char* directory, vkf_dtype dtype,
                             vkf_embedder** embedder) {
  return guarded([&] {
    require(device && directory && embedder, "device, directory and embedder must not be NULL");
    *embedder = nullptr;
    vkformer::EmbedderOptions o;
    o.dtype = to_dtype(dtype, false, "dtype");
    *embedder = new vkf_embedder{vkformer::SentenceEmbedder::load(device->device, directory, o)};
  });
}

void vkf_embedder_release(vkf_embedder* embedder) { delete embedder; }

int64_t vkf_embedder_dimension(const vkf_embedder* embedder) {
  return embedder ? embedder->embedder.dimension() : 0;
}

vkf_status vkf_embedder_embed(vkf_embedder* embedder, const char* const* texts, size_t count,
                              vkf_result* result) {
  return guarded([&] {
    require(embedder && result, "embedder and result must not be NULL");
    require(texts || count == 0, "texts is NULL but count is not 0");
    std::vector<std::string> strings;
    strings.reserve(count);
    for (size_t i = 0; i < count; ++i) {
      require(texts[i] != nullptr, "texts[" + std::to_string(i) + "] is NULL");
      strings.emplace_back(texts[i]);
    }
    to_result(embedder->embedder.embed(strings), result);
  });
}

void vkf_result_release(vkf_result* result) {
  if (!result) return;
  std::free(result->data);
  result->data = nullptr;
}

// ------------------------------------------------------------------------------- language models

void vkf_sampling_options_default(vkf_sampling_options* options) {
  if (!options) return;
  const vkformer::SamplingOptions d;
  *options = {d.temperature, d.top_k, d.top_p, d.min_p, d.repeat_penalty, d.repeat_last_n, d.seed};
}

}  // extern "C"

namespace {

vkformer::TextGenerationOptions generation_options(int32_t max_tokens, const vkf_sampling_options* s) {
  vkformer::TextGenerationOptions o;
  o.max_tokens = max_tokens;
  if (s) o.sampling = {s->temperature, s->top_k, s->top_p, s->min_p, s->repeat_penalty, s->repeat_last_n, s->seed};
  vkformer::validate(o.sampling);
  return o;
}

// Holds an llm for one call that changes it; the constructor throws Busy when a call holds it.
class LlmCall {
 public:
  LlmCall(vkf_llm& llm, const char* name) : llm_(llm) {
    const char* running = nullptr;
    if (!llm.busy.compare_exchange_strong(running, name)) {
      if (llm.busy_thread.load() == std::this_thread::get_id())
        throw Busy{std::string(name) + ": called from inside a token callback of " + running +
                   " on the same vkf_llm; it would change the cache that call is generating into. "
                   "Call it after " + running + " returns (or return 0 from the callback to stop it)"};
      throw Busy{std::string(name) + ": the vkf_llm is in " + running +
                 " on another thread; a vkf_llm is used by one thread at a time"};
    }
    llm.busy_thread.store(std::this_thread::get_id());
  }
  ~LlmCall() {
    llm_.busy_thread.store(std::thread::id());
    llm_.busy.store(nullptr);
  }
  LlmCall(const LlmCall&) = delete;
  LlmCall& operator=(const LlmCall&) = delete;

 private:
  vkf_llm& llm_;
};

// guarded(body) holding `llm` for the call; an llm released from inside a callback meanwhile is
// deleted once the call is over.
template <class Body>
vkf_status llm_call(vkf_llm* llm, const char* name, Body&& body) {
  const vkf_status status = guarded([&] {
    require(llm != nullptr, std::string(name) + ": llm must not be NULL");
    LlmCall hold(*llm, name);
    body();
  });
  if (llm && llm->release_pending && llm->busy.load() == nullptr) delete llm;
  return status;
}

vkformer::TokenCallback token_callback(vkf_token_callback callback, void* user_data) {
  if (!callback) return {};
  return [callback, user_data](std::string_view text, int32_t token) {
    return callback(text.data(), text.size(), token, user_data) != 0;
  };
}

void to_stats(const vkformer::TextGenerationStats& s, vkf_generation_stats* out) {
  if (!out) return;
  out->prompt_tokens = s.prompt_tokens;
  out->prompt_seconds = s.prompt_seconds;
  out->generated_tokens = s.generated_tokens;
  out->generation_seconds = s.generation_seconds;
  out->stop_reason = static_cast<int32_t>(s.stop);
}

}  // namespace

extern "C" {

vkf_status vkf_llm_load(vkf_device* device, const char* gguf_path, int64_t context, vkf_llm** llm) {
  return vkf_llm_load_with_cache_types(device, gguf_path, context, nullptr, nullptr, llm);
}

vkf_status vkf_llm_load_with_cache_types(vkf_device* device, const char* gguf_path, int64_t context,
                                         const char* cache_type_k, const char* cache_type_v, vkf_llm** llm) {
  return guarded([&] {
    require(device && gguf_path && llm, "device, gguf_path and llm must not be NULL");
    *llm = nullptr;
    require(context >= 0, "context must be >= 0 (0: the model's), got " + std::to_string(context));
    vkformer::LanguageModelOptions o;
    o.context = context;
    if (cache_type_k) o.cache_type_k = vkformer::parse_kv_cache_type(cache_type_k, "cache_type_k");
    if (cache_type_v) o.cache_type_v = vkformer::parse_kv_cache_type(cache_type_v, "cache_type_v");
    // A model without a (known) template can still generate; vkf_llm_chat then says why not.
    *llm = new vkf_llm{vkformer::LanguageModel::load(device->device, gguf_path, o), std::nullopt, std::nullopt};
  });
}

void vkf_llm_release(vkf_llm* llm) {
  if (!llm) return;
  // From inside a token callback: the running call still uses it and deletes it when it returns.
  if (llm->busy.load() != nullptr && llm->busy_thread.load() == std::this_thread::get_id()) {
    llm->release_pending = true;
    return;
  }
  delete llm;
}

int64_t vkf_llm_vocab_size(const vkf_llm* llm) { return llm ? llm->model.config().vocab_size : 0; }
int64_t vkf_llm_context(const vkf_llm* llm) { return llm ? llm->model.context() : 0; }
int64_t vkf_llm_position(const vkf_llm* llm) { return llm ? llm->model.position() : 0; }
int64_t vkf_llm_kv_bytes_per_token(const vkf_llm* llm) {
  return llm ? static_cast<int64_t>(llm->model.kv_cache().bytes_per_token) : 0;
}

vkf_status vkf_llm_tokenize(const vkf_llm* llm, const char* text, int32_t add_special, int32_t* tokens,
                            size_t capacity, size_t* count) {
  return guarded([&] {
    require(llm && text && count, "llm, text and count must not be NULL");
    require(tokens || capacity == 0, "tokens is NULL but capacity is not 0");
    const auto ids = llm->model.tokenizer().encode(text, add_special != 0, true);
    *count = ids.size();
    require(ids.size() <= capacity,
            "the text has " + std::to_string(ids.size()) + " tokens, but capacity is " + std::to_string(capacity));
    if (!ids.empty()) std::memcpy(tokens, ids.data(), ids.size() * sizeof(int32_t));
  });
}

vkf_status vkf_llm_detokenize(const vkf_llm* llm, const int32_t* tokens, size_t count, char* text,
                              size_t capacity, size_t* length) {
  return guarded([&] {
    require(llm && length, "llm and length must not be NULL");
    require(tokens || count == 0, "tokens is NULL but count is not 0");
    require(text || capacity == 0, "text is NULL but capacity is not 0");
    const std::string s = llm->model.tokenizer().decode(std::span<const int32_t>(tokens, count));
    *length = s.size();
    require(s.size() < capacity, "the text has " + std::to_string(s.size()) + " bytes and a NUL, but capacity is " +
                                     std::to_string(capacity));
    std::memcpy(text, s.data(), s.size());
    text[s.size()] = '\0';
  });
}

vkf_status vkf_llm_generate(vkf_llm* llm, const char* prompt, int32_t max_tokens,
                            const vkf_sampling_options* sampling, vkf_token_callback callback,
                            void* user_data, vkf_generation_stats* stats) {
  return llm_call(llm, "vkf_llm_generate", [&] {
    require(prompt != nullptr, "prompt must not be NULL");
    auto o = generation_options(max_tokens, sampling);
    o.speculative = llm->speculative;
    const auto ids = llm->model.tokenizer().encode(prompt, llm->model.position() == 0, true);
    const auto r = vkformer::generate(llm->model, ids, o, token_callback(callback, user_data));
    llm->last_stats = r.stats;
    to_stats(r.stats, stats);
  });
}

vkf_status vkf_llm_chat(vkf_llm* llm, const char* user_message, int32_t max_tokens,
                        const vkf_sampling_options* sampling, vkf_token_callback callback,
                        void* user_data, vkf_generation_stats* stats) {
  return llm_call(llm, "vkf_llm_chat", [&] {
    require(user_message != nullptr, "user_message must not be NULL");
    const vkformer::ModelChatTemplates& templates = llm->model.chat_templates();
    if (!templates.has_file_template())
      throw vkformer::Error(vkformer::ErrorCode::unsupported, templates.problem());
    auto o = generation_options(max_tokens, sampling);
    o.speculative = llm->speculative;
    if (!llm->conversation) llm->conversation.emplace(llm->model, templates.file_template(), llm->system_prompt);
    const auto r = llm->conversation->reply(user_message, o, token_callback(callback, user_data));
    llm->last_stats = r.stats;
    to_stats(r.stats, stats);
  });
}

void vkf_speculative_options_default(vkf_speculative_options* options) {
  if (!options) return;
  const vkformer::SpeculativeOptions d;
  *options = {VKF_SPECULATIVE_OFF, nullptr, d.draft_max, d.draft_min, d.draft_p_min};
}

vkf_status vkf_llm_set_speculative(vkf_llm* llm, const vkf_speculative_options* options) {
  return llm_call(llm, "vkf_llm_set_speculative", [&] {
    vkformer::SpeculativeOptions s;
    if (options) {
      require(options->mode >= VKF_SPECULATIVE_OFF && options->mode <= VKF_SPECULATIVE_DRAFT,
              "mode must be VKF_SPECULATIVE_OFF, _NGRAM or _DRAFT (0..2), got " + std::to_string(options->mode));
      s.mode = static_cast<vkformer::SpeculativeMode>(options->mode);
      s.draft_max = options->draft_max;
      s.draft_min = options->draft_min;
      s.draft_p_min = options->draft_p_min;
      if (s.mode == vkformer::SpeculativeMode::draft) {
        require(options->draft != nullptr, "mode VKF_SPECULATIVE_DRAFT needs a draft");
        require(options->draft != llm, "the draft must be another vkf_llm than the target (its own KV cache)");
        vkformer::check_draft_model(llm->model, options->draft->model);
        s.draft_model = &options->draft->model;
      }
      vkformer::validate(s);
    }
    llm->speculative = s;
  });
}

vkf_status vkf_llm_speculative_stats(const vkf_llm* llm, int64_t* drafted, int64_t* accepted, int64_t* passes) {
  return guarded([&] {
    require(llm != nullptr, "llm must not be NULL");
    if (drafted) *drafted = llm->last_stats.drafted_tokens;
    if (accepted) *accepted = llm->last_stats.accepted_tokens;
    if (passes) *passes = llm->last_stats.passes;
  });
}

vkf_status vkf_llm_reset(vkf_llm* llm, const char* system_prompt) {
  return llm_call(llm, "vkf_llm_reset", [&] {
    llm->system_prompt = system_prompt ? std::optional<std::string>(system_prompt) : std::nullopt;
    llm->conversation.reset();
    llm->model.reset();
  });
}

}  // extern "C"
