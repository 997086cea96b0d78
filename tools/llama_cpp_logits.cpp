// llama.cpp's token ids and CPU logits for a GGUF file, for tests/fixtures/check_llama_reference.py to
// compare the golden data with (an independent implementation of the same model). Not part of
// the vkformer build: it links the llama.cpp that tools/build_llama_cpp_peer.sh builds.
//
//   L=/work/peers/llama_cpp_python-0.3.36/vendor/llama.cpp B=/work/peers/llama.cpp-build-cpu/bin
//   g++ -std=c++17 -O1 -I$L/include -I$L/ggml/include tools/llama_cpp_logits.cpp
//       -L$B -lllama -lggml -lggml-base -Wl,-rpath,$B -o /tmp/llama_cpp_logits   (one line)
//
//   llama_cpp_logits tok MODEL TEXT_FILE...          one line of ids per file (add_special and
//                                                    parse_special on, as vkformer's defaults)
//   llama_cpp_logits logits MODEL OUT.f32 [--f32-cache] ID...
//                                                    float32 [n, vocab]: every position's logits
// --f32-cache keeps K/V in f32 and turns flash attention off, so a model whose weights are F32
// runs in f32 throughout (llama.cpp's defaults store K/V in f16).
#include <llama.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

static void quiet(ggml_log_level, const char*, void*) {}

static int fail(const char* what) {
  std::fprintf(stderr, "llama_cpp_logits: %s\n", what);
  return 1;
}

int main(int argc, char** argv) {
  if (argc < 4) return fail("usage: tok MODEL FILE... | logits MODEL OUT.f32 [--f32-cache] ID...");
  llama_log_set(quiet, nullptr);
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  // No repacked weights: the AMX kernels they select die with SIGILL on hosts whose CPU lists AMX
  // but whose kernel does not grant it (llama-perplexity's --no-repack).
  mp.use_extra_bufts = false;
  mp.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(argv[2], mp);
  if (!model) return fail("cannot load the model");
  const llama_vocab* vocab = llama_model_get_vocab(model);

  if (std::strcmp(argv[1], "tok") == 0) {
    for (int a = 3; a < argc; ++a) {
      std::ifstream in(argv[a], std::ios::binary);
      std::stringstream text;
      text << in.rdbuf();
      const std::string t = text.str();
      std::vector<llama_token> ids(t.size() + 8);
      const int n = llama_tokenize(vocab, t.data(), static_cast<int>(t.size()), ids.data(),
                                   static_cast<int>(ids.size()), true, true);
      if (n < 0) return fail("tokenize failed");
      for (int i = 0; i < n; ++i) std::printf("%s%d", i ? " " : "", ids[i]);
      std::printf("\n");
    }
    return 0;
  }

  int a = 4;
  const bool f32_cache = a < argc && std::strcmp(argv[a], "--f32-cache") == 0;
  if (f32_cache) ++a;
  std::vector<llama_token> ids;
  for (; a < argc; ++a) ids.push_back(std::atoi(argv[a]));
  if (ids.empty()) return fail("no ids");
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = cp.n_batch = cp.n_ubatch = static_cast<uint32_t>(ids.size() < 64 ? 64 : ids.size());
  cp.n_threads = cp.n_threads_batch = 1;  // the machine is shared
  if (f32_cache) {
    cp.type_k = cp.type_v = GGML_TYPE_F32;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  }
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) return fail("cannot create a context");
  llama_batch batch = llama_batch_init(static_cast<int>(ids.size()), 0, 1);
  for (size_t i = 0; i < ids.size(); ++i) {
    batch.token[i] = ids[i];
    batch.pos[i] = static_cast<llama_pos>(i);
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = 0;
    batch.logits[i] = 1;
  }
  batch.n_tokens = static_cast<int>(ids.size());
  if (llama_decode(ctx, batch) != 0) return fail("decode failed");
  const int n_vocab = llama_vocab_n_tokens(vocab);
  std::FILE* out = std::fopen(argv[3], "wb");
  if (!out) return fail("cannot write the output file");
  for (size_t i = 0; i < ids.size(); ++i)
    std::fwrite(llama_get_logits_ith(ctx, static_cast<int>(i)), sizeof(float), n_vocab, out);
  std::fclose(out);
  llama_batch_free(batch);
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
