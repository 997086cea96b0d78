#include "fetched_models.hpp"

#include <cstdlib>
#include <filesystem>
#include <string>

namespace vkformer::testing {
namespace {

namespace fs = std::filesystem;

// `variable` when set (it must name what `exists` accepts), else the fetch script's answer.
FetchedModel find(const char* variable, bool (*exists)(const fs::path&), const char* what,
                  const char* script, const char* hint) {
  if (const char* env = std::getenv(variable); env && *env) {
    FetchedModel m{env, ""};
    if (!exists(m.path)) m.error = std::string(variable) + "=" + m.path.string() + " is no " + what;
    return m;
  }
  return run_fetch_script(std::string(VKF_SOURCE_DIR) + "/scripts/" + script, hint);
}

bool is_file(const fs::path& p) { return fs::is_regular_file(p); }
bool is_folder(const fs::path& p) { return fs::is_directory(p); }

}  // namespace

const FetchedModel& smollm2_gguf() {
  static const FetchedModel m =
      find("VKFORMER_SMOLLM2_GGUF", is_file, "file", "fetch_smollm2.sh",
           "set VKFORMER_SMOLLM2_GGUF to the file to use one you have");
  return m;
}

const FetchedModel& minilm_dir() {
  static const FetchedModel m =
      find("VKFORMER_MINILM_DIR", is_folder, "folder", "fetch_minilm.sh",
           "set VKFORMER_MINILM_DIR to a folder holding all-MiniLM-L6-v2 to use one you have");
  return m;
}

const FetchedModel& llama_vocabs_dir() {
  static const FetchedModel m =
      find("VKFORMER_LLAMA_VOCABS_DIR", is_folder, "folder", "fetch_llama_vocabs.sh",
           "it takes llama.cpp's vocabulary files and templates from the llama-cpp-python sdist; set "
           "VKFORMER_LLAMA_VOCABS_DIR to the folder it printed to use one you have");
  return m;
}

}  // namespace vkformer::testing
