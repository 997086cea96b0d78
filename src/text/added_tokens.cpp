#include "added_tokens.hpp"

namespace vkformer::text {

std::vector<TextSegment> split_added_tokens(std::string_view text,
                                            const std::vector<AddedToken>& tokens) {
  std::vector<TextSegment> segments;
  size_t plain_start = 0;
  for (size_t i = 0; i < text.size();) {
    const AddedToken* best = nullptr;
    for (const AddedToken& t : tokens)
      if (text.substr(i).starts_with(t.content) &&
          (!best || t.content.size() > best->content.size()))
        best = &t;
    if (!best) {
      ++i;
      continue;
    }
    if (i > plain_start) segments.push_back({text.substr(plain_start, i - plain_start), -1});
    segments.push_back({text.substr(i, best->content.size()), best->id});
    i += best->content.size();
    plain_start = i;
  }
  if (text.size() > plain_start) segments.push_back({text.substr(plain_start), -1});
  return segments;
}

}  // namespace vkformer::text
