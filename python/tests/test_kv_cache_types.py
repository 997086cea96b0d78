"""LLM's KV cache types (issue 37: cache_type_k / cache_type_v, llama.cpp's --cache-type-k/v):
the bytes per token from the allocations, the greedy text against the f32 cache's, bad names."""
import pytest

import vkformer

# SmolLM2-135M: 30 layers, 3 KV heads of 64 values: q8_0 2 blocks of 34 bytes, q4_0 2 of 18, f16 128.
SMOLLM2_F16_BYTES = 30 * 3 * 2 * 128


def test_cache_types_and_their_bytes_per_token(smollm2, smollm2_path):
    assert smollm2.kv_cache["type_k"] == "f32" and smollm2.kv_cache["bytes_per_token"] == 2 * SMOLLM2_F16_BYTES
    llm = vkformer.LLM(smollm2_path, n_ctx=64, cache_type_k="q8_0", cache_type_v="q4_0")
    kv = llm.kv_cache
    assert (kv["type_k"], kv["type_v"]) == ("q8_0", "q4_0")
    assert kv["bytes_per_token"] == 30 * 3 * (68 + 36)
    assert kv["bytes"] == kv["bytes_per_token"] * (64 + 64)  # the context and a prompt chunk's padding
    assert kv["context_that_fits"] > 64


def test_q8_0_cache_gives_the_f32_cache_greedy_text(smollm2, smollm2_path):
    prompt = "The capital of France is"
    llm = vkformer.LLM(smollm2_path, n_ctx=128, cache_type_k="q8_0", cache_type_v="q8_0")
    assert llm.generate(prompt, max_tokens=16) == smollm2.generate(prompt, max_tokens=16)


def test_unknown_cache_type_names_the_argument(smollm2_path):
    with pytest.raises(ValueError, match="cache_type_v: unknown cache type 'q8': expected f32, f16, q8_0 or q4_0"):
        vkformer.LLM(smollm2_path, n_ctx=64, cache_type_v="q8")
