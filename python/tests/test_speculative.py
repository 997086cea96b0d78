"""Speculative decoding from Python (LLM(spec=..., model_draft=...)): greedy text with prompt
lookup and with a draft model equals plain decoding's, on the llama3 family's tiny model
(tests/golden_families) with its Q8_0 file as the draft; bad options are ValueError naming them."""
import pytest

import vkformer


def family(repo, name):
    return str(repo / "tests" / "golden_families" / name)


PROMPTS = ["ab ab ab ab", "the cat the cat the", "xyz xyz"]


def test_greedy_text_is_plain_decodings_with_both_proposers(repo):
    plain = vkformer.LLM(family(repo, "llama3.f32.gguf"), n_ctx=128)
    want = [plain.generate(p, max_tokens=24) for p in PROMPTS]
    lookup = vkformer.LLM(family(repo, "llama3.f32.gguf"), n_ctx=128, spec="ngram", draft_max=6)
    drafted = vkformer.LLM(family(repo, "llama3.f32.gguf"), n_ctx=128,
                           model_draft=family(repo, "llama3.q8_0.gguf"), draft_max=6, draft_p_min=0.0)
    for llm in (lookup, drafted):
        assert [llm.generate(p, max_tokens=24) for p in PROMPTS] == want
    assert drafted.last_stats["drafted_tokens"] > 0
    assert drafted.last_stats["passes"] > 0
    assert plain.last_stats["drafted_tokens"] == 0


@pytest.mark.parametrize("kwargs, says", [
    ({"spec": "ngram", "draft_max": 0}, "draft_max must be in 1..63"),
    ({"spec": "fast"}, "spec must be None, 'ngram' or 'draft', got 'fast'"),
    ({"spec": "draft"}, "spec 'draft' needs model_draft"),
    ({"spec": "ngram", "draft_p_min": 2.0}, "draft_p_min must be in [0, 1]"),
])
def test_bad_options_are_value_errors_naming_them(repo, kwargs, says):
    with pytest.raises(ValueError) as e:
        vkformer.LLM(family(repo, "llama3.f32.gguf"), n_ctx=64, **kwargs)
    assert says in str(e.value)


def test_a_draft_of_another_vocabulary_is_refused(repo):
    with pytest.raises(ValueError) as e:
        vkformer.LLM(family(repo, "llama3.f32.gguf"), n_ctx=64,
                     model_draft=str(repo / "tests" / "golden_llama" / "tiny" / "tiny_llama_tied.gguf"))
    assert "its vocabulary is not the target's: 384 tokens, the target has 320" in str(e.value)
