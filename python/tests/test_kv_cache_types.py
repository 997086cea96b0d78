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


def test_kv_rotation_changes_the_q4_0_cache_and_both_stay_near_f32(smollm2, smollm2_path):
    # kv_rotation (the CLI's --no-kv-rotation): SmolLM2's head dim of 64 rotates q, k and v in
    # blocks of 64 when the cache is quantized. Perplexity on four 128-token chunks: the q4_0
    # cache with and without the rotation differ, and both stay near the f32 cache's, the rotated
    # one nearer (on this repetitive text -0.9% against +5.1%; bench/RESULTS.md: -0.03% against
    # +11.7% at ctx 512 on Wikipedia). 24 sentences make the four chunks (the test's time is
    # three perplexity runs: 40 sentences made seven chunks each, for the same verdict).
    text = "".join(f"The river runs past the old mill, and the miller counts {i} sacks of grain for "
                   f"{['the baker', 'his sister', 'the inn', 'the abbey'][i % 4]}. " for i in range(1, 25))
    rotated = vkformer.LLM(smollm2_path, n_ctx=128, cache_type_k="q4_0", cache_type_v="q4_0")
    plain = vkformer.LLM(smollm2_path, n_ctx=128, cache_type_k="q4_0", cache_type_v="q4_0", kv_rotation=False)
    assert (rotated.kv_cache["rotation_k"], rotated.kv_cache["rotation_v"]) == (64, 64)
    assert (plain.kv_cache["rotation_k"], plain.kv_cache["rotation_v"]) == (0, 0)
    assert (smollm2.kv_cache["rotation_k"], smollm2.kv_cache["rotation_v"]) == (0, 0)  # f32 never rotates
    want = smollm2.perplexity(text, n_ctx=128)
    got_rotated = rotated.perplexity(text, n_ctx=128)
    got_plain = plain.perplexity(text, n_ctx=128)
    assert want["chunks"] == got_rotated["chunks"] == got_plain["chunks"] >= 4
    off_rotated = got_rotated["ppl"] / want["ppl"] - 1
    off_plain = got_plain["ppl"] / want["ppl"] - 1
    print(f"ppl f32 {want['ppl']:.5f}, q4_0 rotated {got_rotated['ppl']:.5f} ({off_rotated:+.3%}), "
          f"q4_0 plain {got_plain['ppl']:.5f} ({off_plain:+.3%})")
    assert got_rotated["ppl"] != got_plain["ppl"]
    assert abs(off_rotated) < 0.03, off_rotated
    assert abs(off_plain) < 0.15, off_plain
    assert abs(off_rotated) < abs(off_plain)
