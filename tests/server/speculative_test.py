"""Speculative decoding in `vkformer serve` (issue 38: --spec ngram, per slot, with continuous
batching), on SmolLM2-135M-Instruct (scripts/fetch_smollm2.sh) with 8 slots:
  - 8 greedy streams sent at once to a server with --spec ngram give exactly the texts (and
    completion tokens and finish reasons) that a server without it gives them; the replies copy a
    sentence of the prompt, so prompt lookup finds proposals, and /metrics shows them verified and kept
    (vkformer_draft_accepted_tokens_total > 0, vkformer_tokens_per_decode_pass > 1) and steps
    that carried several sequences with proposals;
  - a request with temperature (the speculative sampling rule) completes with its max_tokens;
  - the same with a draft model (--model-draft: SmolLM2 drafting for itself, a slot per sequence);
  - --draft-max 0, --draft-min above --draft-max, --spec fast, --spec draft alone and a draft
    that is not a GGUF file are refused with exit status 2 naming the option, before anything is
    loaded; a draft of another vocabulary with exit status 1 naming --model-draft.
Usage: speculative_test.py VKFORMER REPO_ROOT"""
import concurrent.futures
import os
import subprocess
import sys
import threading

from serve_harness import Checks, Server, stream_json

vkformer, root = sys.argv[1:3]
gguf_path = subprocess.run([os.path.join(root, "scripts", "fetch_smollm2.sh")], check=True, capture_output=True,
                           text=True).stdout.strip().splitlines()[-1]
c = Checks()
SENTENCES = ["The river ran past a stone garden where a market stood in winter.",
             "Every lantern in the harbor lit the meadow while a violin played.",
             "A copper compass pointed to a feather on a glacier beside a mirror.",
             "The old library kept its maps in a cedar chest under the stairs.",
             "Seven boats left the bay at dawn and came back with silver fish.",
             "A candle burned in the window of the house on the hill all night.",
             "The baker sold bread, honey cakes and apple pies every Sunday morning.",
             "Snow covered the village roofs and the children built a tall snowman."]


def messages(i):
    """A reply that copies its prompt (prompt lookup's case): the sentence, repeated."""
    return [{"role": "user", "content": "Repeat this sentence twice, exactly: %s" % SENTENCES[i]}]


def stream(base, i, max_tokens, **extra):
    """(text, completion tokens, finish reason) of a streamed greedy chat completion."""
    body = dict(model="smollm2", messages=messages(i), max_tokens=max_tokens, temperature=0)
    body.update(extra)
    return stream_json(base, "/v1/chat/completions", body)


def eight_at_once(base):
    """The 8 streams, released together (a barrier), so that the server's steps carry them side by side."""
    start = threading.Barrier(8)

    def one(i):
        start.wait(timeout=60)
        return stream(base, i, 6 + 2 * i)  # some end by max_tokens inside a verified run

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        return list(pool.map(one, range(8), timeout=600))


common = ["--model", gguf_path, "--ctx", "256", "--parallel", "8", "--model-name", "smollm2"]
plain = Server(vkformer, common)
try:
    want = eight_at_once(plain.base)
    plain.stop()
finally:
    plain.kill()
c.check(all(n and n > 0 for _, n, _ in want), "every plain request generated tokens: %r" % (want,))
c.check({"stop", "length"} <= set(r for _, _, r in want), "both finish reasons: %r" % (want,))
c.check(len(set(t for t, _, _ in want)) > 4, "the prompts give different texts")
print("without --spec: %r" % (want[:2],))

def same_texts_and_counts(spec, what):
    """The 8 streams on `spec` against `want`; returns the completions' token total."""
    got = eight_at_once(spec.base)
    for i in range(8):
        c.check(got[i] == want[i], "request %d with %s: %r, without: %r" % (i, what, got[i], want[i]))
    drafted = spec.metric_value("vkformer_draft_tokens_total")
    accepted = spec.metric_value("vkformer_draft_accepted_tokens_total")
    passes = spec.metric_value("vkformer_decode_passes_total")
    per_pass = spec.metric_value("vkformer_tokens_per_decode_pass")
    tokens = sum(n for _, n, _ in got)
    print("%s: %d proposals verified, %d kept; %d decode passes, %.2f tokens per pass; %d completion tokens"
          % (what, drafted, accepted, passes, per_pass, tokens))
    c.check(accepted > 0, "%s: no proposal was kept (%d verified)" % (what, drafted))
    c.check(per_pass > 1.0, "%s: tokens per decode pass %r: speculation gained nothing" % (what, per_pass))
    return got


spec = Server(vkformer, common + ["--spec", "ngram", "--draft-max", "8"])
try:
    got = same_texts_and_counts(spec, "--spec ngram")
    drafted = spec.metric_value("vkformer_draft_tokens_total")
    accepted = spec.metric_value("vkformer_draft_accepted_tokens_total")
    rate = spec.metric_value("vkformer_draft_acceptance_rate")
    passes = spec.metric_value("vkformer_decode_passes_total")
    tokens = sum(n for _, n, _ in got)
    c.check(abs(rate - accepted / max(drafted, 1)) < 1e-6, "acceptance rate %r vs %r / %r" % (rate, accepted, drafted))
    c.check(passes < tokens, "%d decode passes for %d tokens" % (passes, tokens))
    steps = spec.metric_value("vkformer_scheduler_steps_total")
    c.check(steps < passes, "%d scheduler steps for %d decode passes: no step carried two sequences" % (steps, passes))
    # With temperature: the speculative sampling rule's path, to the end of max_tokens or a stop.
    text, n, reason = stream(spec.base, 3, 20, temperature=0.8, seed=7)
    c.check(reason in ("length", "stop") and n and 0 < n <= 20, "temperature 0.8: %r tokens, %r" % (n, reason))
    c.check(spec.health(), "health at the end")
    spec.stop()
finally:
    spec.kill()

# A draft model (SmolLM2 drafting for itself: it proposes what the target chooses), per slot.
draft = Server(vkformer, common + ["--model-draft", gguf_path, "--draft-max", "4", "--draft-p-min", "0.3"])
try:
    same_texts_and_counts(draft, "--model-draft")
    # The draft has the target's weights and sees the same text: nearly every proposal is kept.
    rate = draft.metric_value("vkformer_draft_acceptance_rate")
    c.check(rate >= 0.8, "a draft of the target's own weights: acceptance %.2f" % rate)
    c.check(draft.health(), "health at the end")
    draft.stop()
finally:
    draft.kill()

tiny = os.path.join(root, "tests", "golden_llama", "tiny", "tiny_llama_untied.gguf")
r = subprocess.run([vkformer, "serve", "--port", "0"] + common + ["--model-draft", tiny], capture_output=True, text=True,
                   timeout=300, stdin=subprocess.DEVNULL)
c.check(r.returncode == 1 and "--model-draft" in r.stderr and "vocabulary is not the target's" in r.stderr,
        "a draft of another vocabulary: exit %d, %r" % (r.returncode, r.stderr[-300:]))
for args, says in [(["--spec", "ngram", "--draft-max", "0"], "--draft-max must be in 1..63"),
                   (["--spec", "ngram", "--draft-max", "4", "--draft-min", "5"], "--draft-min must be at most --draft-max"),
                   (["--spec", "fast"], "--spec must be ngram or draft"),
                   (["--spec", "draft"], "--spec draft needs --model-draft"),
                   (["--model-draft", os.path.join(root, "README.md")], "is not a GGUF file")]:
    r = subprocess.run([vkformer, "serve", "--port", "0"] + common + args, capture_output=True, text=True, timeout=120,
                       stdin=subprocess.DEVNULL)
    c.check(r.returncode == 2 and says in r.stderr, "serve %s: exit %d, %r" % (" ".join(args), r.returncode, r.stderr[-300:]))
c.finish()
