#pragma once
// The object behind a public type's pimpl handle (Executor, Model, SentenceEmbedder), or, for a
// handle that was moved from, Error(invalid_argument) "<Type>: this <noun> was moved from; use the
// <Type> it was moved to" instead of a null dereference.
#include <memory>
#include <string>
#include <string_view>

#include "vkformer/error.hpp"

namespace vkformer {

template <class Impl>
Impl& checked_impl(const std::unique_ptr<Impl>& impl, std::string_view type, std::string_view noun) {
  if (!impl)
    throw Error(ErrorCode::invalid_argument, std::string(type) + ": this " + std::string(noun) +
                                                 " was moved from; use the " + std::string(type) + " it was moved to");
  return *impl;
}

}  // namespace vkformer
