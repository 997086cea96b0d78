#pragma once
// The real models and files the suites fetch: each found once per test process, from its
// environment variable when set (a file or folder the user has) or else by its fetch script
// (scripts/fetch_*.sh, which download into a cache on first use). A failed fetch is the error
// of the tests that need the model, never a skip.
#include "test_util.hpp"

namespace vkformer::testing {

// SmolLM2-135M-Instruct Q4_1: $VKFORMER_SMOLLM2_GGUF or scripts/fetch_smollm2.sh.
const FetchedModel& smollm2_gguf();
// all-MiniLM-L6-v2's folder: $VKFORMER_MINILM_DIR or scripts/fetch_minilm.sh.
const FetchedModel& minilm_dir();
// llama.cpp's vocabulary-only GGUFs and chat templates: $VKFORMER_LLAMA_VOCABS_DIR or
// scripts/fetch_llama_vocabs.sh (the llama-cpp-python sdist).
const FetchedModel& llama_vocabs_dir();

}  // namespace vkformer::testing
