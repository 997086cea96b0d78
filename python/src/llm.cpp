// _core.LLM: a GGUF LanguageModel with its tokenizer and chat template (include/vkformer/llm.hpp,
// generate.hpp). The Python class LLM (python/vkformer/llm.py) adds keyword arguments, stop
// strings, streaming as an iterator and OpenAI-style chat messages.
//
// Generation releases the GIL; the per-token callback takes it back only to call Python. Ctrl-C
// (a pending KeyboardInterrupt) stops generation at the next token and is raised after it.
#include <mutex>
#include <optional>

#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "common.hpp"
#include "vkformer/gguf_tokenizer.hpp"
#include "vkformer/chat.hpp"
#include "vkformer/error.hpp"
#include "vkformer/generate.hpp"
#include "vkformer/llm.hpp"
#include "vkformer/perplexity.hpp"

namespace vkformer::py {

namespace {

struct Llm {
  std::optional<LanguageModel> model;
  std::optional<GgufTokenizer> tokenizer;  // a copy: immutable, usable while another thread generates
  std::mutex mutex;  // one generation at a time; others wait
  std::string device_name, device_selector;
  std::optional<LanguageModel> draft;  // set_speculative's draft model, on the same device
  SpeculativeOptions speculative;
};

nb::str decode_lossy(const std::string& bytes) {
  // Token bytes may end inside a UTF-8 character: show it as U+FFFD rather than fail.
  return nb::steal<nb::str>(PyUnicode_DecodeUTF8(bytes.data(), static_cast<Py_ssize_t>(bytes.size()), "replace"));
}

nb::dict stats_dict(const TextGenerationStats& s) {
  nb::dict d;
  d["prompt_tokens"] = s.prompt_tokens;
  d["prompt_seconds"] = s.prompt_seconds;
  d["prompt_tokens_per_second"] = s.prompt_tokens_per_second();
  d["generated_tokens"] = s.generated_tokens;
  d["generation_seconds"] = s.generation_seconds;
  d["generation_tokens_per_second"] = s.generation_tokens_per_second();
  d["stop"] = std::string(to_string(s.stop));
  d["drafted_tokens"] = s.drafted_tokens;    // speculative decoding: proposals verified,
  d["accepted_tokens"] = s.accepted_tokens;  // those kept,
  d["passes"] = s.passes;                    // and the model's passes after the prompt
  return d;
}

// The prompt runs from an empty cache: each call is independent, as an OpenAI completion is.
nb::tuple generate_ids(Llm& self, const std::vector<int32_t>& prompt, int64_t max_tokens,
                       const SamplingOptions& sampling, nb::object on_text) {
  TextGenerationOptions options;
  options.max_tokens = max_tokens;
  options.sampling = sampling;
  options.speculative = self.speculative;
  std::optional<nb::python_error> raised;  // from the callback, or Ctrl-C; re-raised at the end
  TextGenerationResult result;
  {
    nb::gil_scoped_release release;
    std::lock_guard lock(self.mutex);
    self.model->reset();
    result = generate(*self.model, prompt, options, [&](std::string_view text, int32_t token) {
      nb::gil_scoped_acquire acquire;
      try {
        if (PyErr_CheckSignals() != 0) throw nb::python_error();
        if (on_text.is_none()) return true;
        return nb::cast<bool>(on_text(nb::str(text.data(), text.size()), token));
      } catch (nb::python_error& e) {
        raised.emplace(std::move(e));
        return false;
      }
    });
  }
  if (raised) throw std::move(*raised);
  return nb::make_tuple(result.tokens, nb::str(result.text.data(), result.text.size()), stats_dict(result.stats));
}

// Speculative decoding for the next generations: mode "off", "ngram" or "draft" (model_draft,
// a GGUF file of the same vocabulary, loaded on the model's device with its context). Checked
// and loaded before anything changes: a bad option or draft leaves the setting as it was.
void set_speculative(Llm& self, const std::string& mode, const std::string& model_draft, int32_t draft_max,
                     int32_t draft_min, float draft_p_min) {
  SpeculativeOptions s;
  if (mode == "ngram") s.mode = SpeculativeMode::ngram;
  else if (mode == "draft") s.mode = SpeculativeMode::draft;
  else if (mode != "off")
    throw Error(ErrorCode::invalid_argument, "spec must be None, 'ngram' or 'draft', got '" + mode + "'");
  if (s.mode == SpeculativeMode::draft && model_draft.empty())
    throw Error(ErrorCode::invalid_argument, "spec 'draft' needs model_draft (a GGUF file)");
  if (s.mode != SpeculativeMode::draft && !model_draft.empty())
    throw Error(ErrorCode::invalid_argument, "model_draft is for spec 'draft', got spec '" + mode + "'");
  s.draft_max = draft_max;
  s.draft_min = draft_min;
  s.draft_p_min = draft_p_min;
  std::optional<LanguageModel> draft;
  {
    nb::gil_scoped_release release;
    std::lock_guard lock(self.mutex);
    if (s.mode == SpeculativeMode::draft) {
      s.draft_model = &*self.model;  // validate() wants one; replaced below
      validate(s);
      LanguageModelOptions o;
      o.context = self.model->context();
      Device d = shared_device(self.device_selector);
      try {
        draft.emplace(LanguageModel::load(d, model_draft, o));
        check_draft_model(*self.model, *draft);
      } catch (const Error& e) {
        throw Error(e.code(), "model_draft " + model_draft + ": " + e.what());
      }
    } else {
      validate(s);
    }
    self.draft = std::move(draft);
    s.draft_model = self.draft ? &*self.draft : nullptr;
    self.speculative = s;
  }
}

// llama-perplexity's measure (vkformer/perplexity.hpp) with the GIL released; on_progress, when
// given, is called after every pass with (tokens_done, tokens_total, chunk_done, ppl, ppl_error)
// and stops the measure by returning False. Ctrl-C stops it too and is raised after the pass.
nb::dict perplexity(Llm& self, const std::string& text, int64_t n_ctx, int64_t chunks, nb::object on_progress) {
  std::optional<nb::python_error> raised;
  PerplexityResult r;
  {
    nb::gil_scoped_release release;
    std::lock_guard lock(self.mutex);
    r = vkformer::perplexity(*self.model, text, {.context = n_ctx, .chunks = chunks},
                             [&](const PerplexityProgress& p) {
                               nb::gil_scoped_acquire acquire;
                               try {
                                 if (PyErr_CheckSignals() != 0) throw nb::python_error();
                                 if (on_progress.is_none()) return true;
                                 return nb::cast<bool>(on_progress(p.tokens_done, p.tokens_total, p.chunk_done,
                                                                   p.ppl, p.ppl_error));
                               } catch (nb::python_error& e) {
                                 raised.emplace(std::move(e));
                                 return false;
                               }
                             });
  }
  if (raised) throw std::move(*raised);
  nb::dict d;
  d["ppl"] = r.ppl;
  d["ppl_error"] = r.ppl_error;
  d["mean_nll"] = r.mean_nll;
  d["nll_error"] = r.nll_error;
  d["text_tokens"] = r.text_tokens;
  d["n_ctx"] = r.context;
  d["chunks"] = r.chunks;
  d["scored_tokens"] = r.scored_tokens;
  d["chunk_ppl"] = r.chunk_ppl;
  d["chunk_ppl_error"] = r.chunk_ppl_error;
  d["seconds"] = r.seconds;
  d["stopped"] = r.stopped;
  return d;
}

}  // namespace

void bind_llm(nb::module_& m) {
  nb::class_<Llm>(m, "LLM")
      .def(
          "__init__",
          [](Llm* self, const std::string& path, int64_t n_ctx, const std::string& device, bool f16,
             const std::string& cache_type_k, const std::string& cache_type_v, bool kv_rotation) {
            LanguageModelOptions options;
            options.context = n_ctx;
            options.activations = f16 ? DType::f16 : DType::f32;
            // "" leaves the type to the activations; other names are checked, naming the argument.
            if (!cache_type_k.empty()) options.cache_type_k = parse_kv_cache_type(cache_type_k, "cache_type_k");
            if (!cache_type_v.empty()) options.cache_type_v = parse_kv_cache_type(cache_type_v, "cache_type_v");
            options.kv_rotation = kv_rotation;
            std::optional<LanguageModel> model;
            std::string device_name;
            {
              nb::gil_scoped_release release;
              Device d = shared_device(device);
              model.emplace(LanguageModel::load(d, path, options));
              device_name = d.info().name;
            }
            // Constructed only once nothing can throw: nanobind frees no half-made object.
            new (self) Llm();
            self->tokenizer.emplace(model->tokenizer());
            self->model = std::move(model);
            self->device_name = std::move(device_name);
            self->device_selector = device;
          },
          nb::arg("path"), nb::arg("n_ctx") = 0, nb::arg("device") = "", nb::arg("f16") = false,
          nb::arg("cache_type_k") = "", nb::arg("cache_type_v") = "", nb::arg("kv_rotation") = true)
      .def("set_speculative", &set_speculative, nb::arg("mode"), nb::arg("model_draft"), nb::arg("draft_max"),
           nb::arg("draft_min"), nb::arg("draft_p_min"))
      .def("generate_ids", &generate_ids, nb::arg("prompt"), nb::arg("max_tokens"), nb::arg("sampling"),
           nb::arg("on_text").none())
      .def("perplexity", &perplexity, nb::arg("text"), nb::arg("n_ctx") = 0, nb::arg("chunks") = 0,
           nb::arg("on_progress").none() = nb::none())
      .def(
          "tokenize",
          [](Llm& self, const std::string& text, bool add_special, bool parse_special) {
            return self.tokenizer->encode(text, add_special, parse_special);
          },
          nb::arg("text"), nb::arg("add_special") = true, nb::arg("parse_special") = true)
      .def(
          "detokenize",
          [](Llm& self, const std::vector<int32_t>& ids) { return decode_lossy(self.tokenizer->decode(ids)); },
          nb::arg("ids"))
      .def(
          "token_piece", [](Llm& self, int32_t id) { return self.tokenizer->id_to_token(id); }, nb::arg("id"))
      .def(
          "apply_chat_template",
          [](Llm& self, const std::vector<std::pair<std::string, std::string>>& messages, bool add_generation_prompt) {
            const ModelChatTemplates& templates = self.model->chat_templates();
            if (!templates.has_file_template())
              throw Error(ErrorCode::unsupported, "this model has no chat template vkformer can use: " +
                                                      templates.problem() +
                                                      "; use generate() with your own prompt text");
            std::vector<ChatMessage> list;
            for (const auto& [role, content] : messages) list.push_back({role, content});
            return templates.file_template().apply(list, add_generation_prompt);
          },
          nb::arg("messages"), nb::arg("add_generation_prompt") = true)
      .def_prop_ro("n_ctx", [](Llm& self) { return self.model->context(); })
      .def_prop_ro("kv_cache",
                   [](Llm& self) {
                     const KvCacheInfo kv = self.model->kv_cache();
                     nb::dict d;
                     d["type_k"] = std::string(dtype_name(kv.type_k));
                     d["type_v"] = std::string(dtype_name(kv.type_v));
                     d["bytes"] = kv.bytes;
                     d["bytes_per_token"] = kv.bytes_per_token;
                     d["context_that_fits"] = kv.context_that_fits;
                     d["rotation_k"] = kv.rotation_k;
                     d["rotation_v"] = kv.rotation_v;
                     return d;
                   })
      .def_prop_ro("n_vocab", [](Llm& self) { return static_cast<int64_t>(self.tokenizer->vocab_size()); })
      .def_prop_ro("architecture", [](Llm& self) { return self.model->config().architecture; })
      .def_prop_ro("n_layers", [](Llm& self) { return self.model->config().n_layers; })
      .def_prop_ro("d_model", [](Llm& self) { return self.model->config().d_model; })
      .def_prop_ro("device_name", [](Llm& self) { return self.device_name; });

  nb::class_<SamplingOptions>(m, "SamplingOptions")
      .def(nb::init<>())
      .def_rw("temperature", &SamplingOptions::temperature)
      .def_rw("top_k", &SamplingOptions::top_k)
      .def_rw("top_p", &SamplingOptions::top_p)
      .def_rw("min_p", &SamplingOptions::min_p)
      .def_rw("repeat_penalty", &SamplingOptions::repeat_penalty)
      .def_rw("repeat_last_n", &SamplingOptions::repeat_last_n)
      .def_rw("seed", &SamplingOptions::seed)
      .def("validate", [](const SamplingOptions& s) { validate(s); });
}

}  // namespace vkformer::py
