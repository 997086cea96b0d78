#include "sentence_config.hpp"

#include <vector>

#include "../io/io_util.hpp"
#include "../text/json_keys.hpp"
#include "../text/tokenizer_files.hpp"
#include "vkformer/error.hpp"

namespace vkformer::models {

namespace fs = std::filesystem;
using text::JsonKeys;

namespace {

// Through the library's reader: a regular file of at most 256 MiB (a FIFO is refused, not waited
// on; a link to /dev/zero is named as a device), JSON nesting limited to 64 levels while parsing.
text::json read(const fs::path& path) { return text::read_json_file(path); }

// A module's folder, relative to the model directory and inside it.
fs::path module_dir(const fs::path& dir, const JsonKeys& module) {
  fs::path rel = module.string("path", std::string());
  if (rel.is_absolute() || rel.lexically_normal().string().starts_with(".."))
    module.fail("path", "must be a folder inside the model directory, got " + text::quote_text(rel.string()));
  return rel.empty() ? dir : dir / rel;
}

PoolMode read_pooling(const fs::path& path) {
  const text::json j = read(path);
  JsonKeys keys(j, path.string(), "");
  struct Mode {
    const char* key;
    bool supported;
    PoolMode mode;
  };
  const Mode modes[] = {{"pooling_mode_mean_tokens", true, PoolMode::mean},
                        {"pooling_mode_cls_token", true, PoolMode::cls},
                        {"pooling_mode_max_tokens", true, PoolMode::max},
                        {"pooling_mode_mean_sqrt_len_tokens", false, PoolMode::mean},
                        {"pooling_mode_weightedmean_tokens", false, PoolMode::mean},
                        {"pooling_mode_lasttoken", false, PoolMode::mean}};
  std::vector<const Mode*> on;
  for (const Mode& m : modes)
    if (keys.boolean(m.key, false)) on.push_back(&m);
  if (on.empty())
    throw Error(ErrorCode::format, path.string() + ": no pooling mode is true (expected one of "
                                                   "pooling_mode_mean_tokens, _cls_token, _max_tokens)");
  if (on.size() > 1)
    throw Error(ErrorCode::unsupported,
                path.string() + ": " + on[0]->key + " and " + on[1]->key +
                    " are both true: concatenated pooling modes are not supported, only one mode");
  if (!on[0]->supported)
    throw Error(ErrorCode::unsupported, path.string() + ": " + on[0]->key +
                                            " is not supported: only mean, cls and max pooling are");
  return on[0]->mode;
}

}  // namespace

const char* pool_mode_name(PoolMode mode) {
  switch (mode) {
    case PoolMode::mean: return "mean";
    case PoolMode::cls: return "cls";
    case PoolMode::max: return "max";
  }
  return "?";
}

SentenceConfig SentenceConfig::load(const fs::path& dir) {
  SentenceConfig c;
  c.encoder_dir = dir;
  const fs::path modules_path = dir / "modules.json";
  // Absent is a plain Hugging Face directory; present but unreachable (a link loop, no
  // permission) is an io error, never silently read as absent (that would change the pooling).
  if (text::file_present(modules_path)) {
    const text::json modules = read(modules_path);
    if (!modules.is_array())
      throw Error(ErrorCode::format, modules_path.string() + ": expected a list of modules");
    bool encoder = false, pooling = false;
    for (size_t i = 0; i < modules.size(); ++i) {
      // append(), not "[" + std::to_string(i): GCC 12 warns falsely (-Wrestrict) on that form.
      JsonKeys m(modules[i], modules_path.string(), std::string("[").append(std::to_string(i)).append("]"));
      const std::string type = m.string("type", std::nullopt);
      const fs::path where = module_dir(dir, m);
      if (type == "sentence_transformers.models.Transformer" && !encoder) {
        encoder = true;
        c.encoder_dir = where;
      } else if (type == "sentence_transformers.models.Pooling" && encoder && !pooling) {
        pooling = true;
        c.pooling = read_pooling(where / "config.json");
      } else if (type == "sentence_transformers.models.Normalize" && pooling && !c.normalize) {
        c.normalize = true;
      } else {
        m.fail("type", text::quote_text(type) + " is not supported here: vkformer runs Transformer, then "
                       "Pooling, then optionally Normalize");
      }
    }
    if (!encoder) throw Error(ErrorCode::format, modules_path.string() + ": no Transformer module");
  }
  const fs::path st_config = c.encoder_dir / "sentence_bert_config.json";
  if (text::file_present(st_config)) {
    const text::json j = read(st_config);
    JsonKeys keys(j, st_config.string(), "");
    c.max_seq_length = keys.integer("max_seq_length", 0, 0, int64_t{1} << 30);
    c.lower_case = keys.boolean("do_lower_case", false);
  }
  return c;
}

}  // namespace vkformer::models
