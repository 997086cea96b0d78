"""`vkformer serve --context-shift` (issue 37 item 3; llama-server's option), on the tiny llama with
a context of 64 tokens per slot, two slots:
  - off (the default): prompt + max_tokens beyond the context is 400 context_length_exceeded, as
    before;
  - on: greedy requests that run past the context complete with max_tokens tokens and
    finish_reason "length" (streamed too, the same text), and /metrics counts exactly the shifts (and forgotten tokens) that
    llama-server's rule gives (shift when tokens + 1 reach the context; keep n_keep, discard half
    of the rest); their text up to the first shift equals the server's without context shift;
  - two requests at once, only one shifting: each gives the text it gives alone (the shift moves
    the rows of its own slot only, and the other slot's sequence never notices);
  - after a shift the slot offers only its first n_keep tokens to the next request's prefix: a
    prompt that shares the shifted token list beyond n_keep reuses exactly n_keep tokens and gets
    the greedy text of a cold server (the rows after n_keep were computed beside forgotten
    tokens; reusing them would give another answer);
  - a prompt as long as the context is still 400 context_length_exceeded (not truncated, as
    llama-server); n_keep -1 (the whole prompt) and the largest n_keep (context - 4) work;
  - bad n_keep: negative below -1, beyond context - 4, a float, a string: 400 naming n_keep.
  - n_discard (llama-server's request field; --n-discard the default of requests without it):
    the shifts and tokens forgotten follow the rule with that amount; n_discard equal to the
    default half gives the default's text; after a shift of n_discard the slot's token list is
    n_keep + what follows the n_discard forgotten ones (a prompt sharing it reuses n_keep tokens
    and gets the cold server's text); bad n_discard (negative, >= the context, a float, a string)
    is 400 naming n_discard, and a bad --n-discard exits 2 naming the option.
Usage: context_shift_test.py VKFORMER TINY_DIR"""
import concurrent.futures
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request

from serve_harness import Checks, Server, stream_json

vkformer, tiny_dir = sys.argv[1:3]
gguf_path = os.path.join(tiny_dir, "tiny_llama_untied.gguf")
golden = json.load(open(os.path.join(tiny_dir, "golden.json")))
ids = golden["models"]["untied"]["sequences"]["random_101"]["ids"]
CTX = 64
c = Checks()


def post(base, body):
    """(status, reply JSON) of a POST to /v1/completions."""
    req = urllib.request.Request(base + "/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def complete(base, prompt, max_tokens, **extra):
    """(text, completion tokens, finish reason, cached tokens) of a greedy completion."""
    status, reply = post(base, dict(model="tiny", prompt=prompt, max_tokens=max_tokens, temperature=0, **extra))
    if status != 200:
        raise RuntimeError("%d %s" % (status, json.dumps(reply)[:300]))
    ch, usage = reply["choices"][0], reply["usage"]
    return ch["text"], usage["completion_tokens"], ch["finish_reason"], usage["prompt_tokens_details"]["cached_tokens"]


def stream(base, prompt, max_tokens, **extra):
    """(text, completion tokens, finish reason) of a greedy streamed completion."""
    body = dict(model="tiny", prompt=prompt, max_tokens=max_tokens, temperature=0, **extra)
    return stream_json(base, "/v1/completions", body)


def llama_server_shifts(prompt_len, max_tokens, n_keep, n_discard=0):
    """The shifts llama-server makes for a request that generates max_tokens tokens: before each
    generated token but the last is decoded, a slot whose tokens + 1 reach the context keeps
    n_keep and forgets n_discard of the rest (0: half; at most all but one). (count, tokens
    forgotten, tokens left, [tokens at each shift's discard])."""
    n, count, forgotten, discards = prompt_len, 0, 0, []
    for _ in range(max_tokens - 1):
        if n + 1 >= CTX:
            keep = min(n_keep, CTX - 4)
            left = n - keep
            d = max(0, min(n_discard or left // 2, left - 1))
            n -= d
            count += 1
            forgotten += d
            discards.append(d)
        n += 1
    return count, forgotten, n, discards


def error_of(status, reply):
    return status, reply.get("error", {}).get("param"), reply.get("error", {}).get("code"), reply.get("error", {}).get("message", "")


a_prompt = ids[:40]           # shifts after 23 generated tokens
b_prompt = ids[60:70]         # 10 tokens + 50 generated: never reaches the context
off = Server(vkformer, ["--model", gguf_path, "--ctx", str(CTX), "--parallel", "2", "--model-name", "tiny"])
try:
    status, reply = post(off.base, dict(model="tiny", prompt=a_prompt, max_tokens=40, temperature=0))
    code = error_of(status, reply)
    c.check(code[0] == 400 and code[2] == "context_length_exceeded" and "--context-shift" in code[3],
            "off: 40 prompt tokens + max_tokens 40 in a context of 64: %s" % (code,))
    # The reference texts: a cold server, and what a shifting request gives before its shift.
    cold_a = complete(off.base, a_prompt, CTX - len(a_prompt))
    cold_b = complete(off.base, b_prompt, 50)
    print("off: a %r (%d tokens, %s); b %d tokens" % (cold_a[0][:40], cold_a[1], cold_a[2], cold_b[1]), flush=True)

    on = Server(vkformer, ["--model", gguf_path, "--ctx", str(CTX), "--parallel", "2", "--model-name", "tiny",
                           "--context-shift", "--max-tokens", "512"])
    try:
        expected_shifts = expected_forgotten = 0

        def expect(prompt_len, max_tokens, n_keep, n_discard=0):
            global expected_shifts, expected_forgotten
            count, forgotten, _, _ = llama_server_shifts(prompt_len, max_tokens, n_keep, n_discard)
            expected_shifts += count
            expected_forgotten += forgotten
            return count

        # A long generation: several shifts, max_tokens tokens, "length".
        for max_tokens, keep in ((150, 4), (100, 0)):
            text, n, reason, _ = complete(on.base, a_prompt, max_tokens, n_keep=keep, cache_prompt=False)
            shifts = expect(len(a_prompt), max_tokens, keep)
            c.check(n == max_tokens and reason == "length",
                    "on, n_keep %d: %d tokens (%s), expected %d (length) after %d shifts" % (keep, n, reason, max_tokens, shifts))
            c.check(text.startswith(cold_a[0]), "on, n_keep %d: starts %r, the cold server's %r" % (keep, text[:60], cold_a[0][:60]))
            c.check(shifts >= 3, "max_tokens %d makes only %d shifts" % (max_tokens, shifts))
            streamed = stream(on.base, a_prompt, max_tokens, n_keep=keep, cache_prompt=False)
            expect(len(a_prompt), max_tokens, keep)
            c.check(streamed == (text, n, reason), "on, n_keep %d, streamed: %r, not streamed %r" % (
                keep, streamed[1:], (n, reason)))
        # Up to its first shift a request's text is the server's without context shift.
        alone_a = complete(on.base, a_prompt, 40, n_keep=4, cache_prompt=False)
        expect(len(a_prompt), 40, 4)
        c.check(alone_a[1] == 40 and alone_a[2] == "length", "a: %s" % (alone_a[1:],))
        c.check(alone_a[0].startswith(cold_a[0]) and len(alone_a[0]) > len(cold_a[0]),
                "a's text before its shift %r, the cold server's %r" % (alone_a[0][:60], cold_a[0][:60]))
        c.check(int(on.metric_value("vkformer_context_shifts_total")) == expected_shifts and
                int(on.metric_value("vkformer_context_shift_tokens_total")) == expected_forgotten,
                "metrics: %s shifts, %s tokens forgotten; expected %d and %d" % (
                    on.metric_value("vkformer_context_shifts_total"), on.metric_value("vkformer_context_shift_tokens_total"),
                    expected_shifts, expected_forgotten))

        # Two at once, only a shifting: each gives its text alone.
        alone_b = complete(on.base, b_prompt, 50, cache_prompt=False)
        c.check(alone_b[:3] == cold_b[:3], "b on the shifting server alone %r, the cold server %r" % (alone_b[:3], cold_b[:3]))
        for round_ in range(2):
            with concurrent.futures.ThreadPoolExecutor(2) as pool:
                fa = pool.submit(complete, on.base, a_prompt, 40, n_keep=4, cache_prompt=False)
                fb = pool.submit(complete, on.base, b_prompt, 50, cache_prompt=False)
                got_a, got_b = fa.result(900), fb.result(900)
            expect(len(a_prompt), 40, 4)
            c.check(got_a[:3] == alone_a[:3], "round %d: a beside b %r, alone %r" % (round_, got_a[:3], alone_a[:3]))
            c.check(got_b[:3] == alone_b[:3], "round %d: b beside the shifting a %r, alone %r" % (round_, got_b[:3], alone_b[:3]))

        # The prefix cache after a shift. a (40 tokens, n_keep 4) shifts once, at 63 tokens, by
        # 29: its slot lists a[:4] + a[33:40] + what it generated. A prompt sharing a[:4] +
        # a[33:40] may reuse the first 4 tokens only.
        count, _, _, discards = llama_server_shifts(len(a_prompt), 40, 4)
        c.check(count == 1 and discards == [29], "the plan: one shift of 29, got %d %s" % (count, discards))
        complete(on.base, a_prompt, 40, n_keep=4)  # leaves its shifted slot
        expect(len(a_prompt), 40, 4)
        shared = a_prompt[:4] + a_prompt[33:40] + ids[80:88]
        text, n, reason, cached = complete(on.base, shared, 10)
        cold = complete(off.base, shared, 10)
        c.check(cached == 4, "after a shift, a prompt sharing the shifted list reused %d tokens, expected 4 (n_keep)" % cached)
        c.check((text, n, reason) == cold[:3], "after a shift: %r, a cold server %r" % ((text, n, reason), cold[:3]))

        # n_discard: the default's amount given explicitly (29 = (63 - 4) / 2 at a's one shift)
        # gives the default's text; 7 makes three shifts (at 63 tokens each) where the default
        # makes one, forgetting 21 tokens after n_keep: the slot then lists a[:4] + a[25:40] + what
        # it generated, and a prompt sharing that reuses the first 4 tokens only.
        same = complete(on.base, a_prompt, 40, n_keep=4, n_discard=29, cache_prompt=False)
        expect(len(a_prompt), 40, 4, 29)
        c.check(same[:3] == alone_a[:3], "n_discard 29 (the default half) %r, without n_discard %r" % (same[:3], alone_a[:3]))
        count, forgotten, _, discards = llama_server_shifts(len(a_prompt), 40, 4, 7)
        c.check(count == 3 and discards == [7, 7, 7], "the plan with n_discard 7: %d shifts %s" % (count, discards))
        before = [int(on.metric_value(m)) for m in ("vkformer_context_shifts_total", "vkformer_context_shift_tokens_total")]
        seven = complete(on.base, a_prompt, 40, n_keep=4, n_discard=7)  # leaves its shifted slot
        expect(len(a_prompt), 40, 4, 7)
        c.check(seven[1] == 40 and seven[2] == "length" and seven[0].startswith(cold_a[0]),
                "n_discard 7: %d tokens (%s), starts %r, the cold server's %r" % (seven[1], seven[2], seven[0][:40], cold_a[0][:40]))
        after = [int(on.metric_value(m)) for m in ("vkformer_context_shifts_total", "vkformer_context_shift_tokens_total")]
        c.check([after[0] - before[0], after[1] - before[1]] == [3, forgotten],
                "n_discard 7: %d shifts forgot %d tokens, expected 3 and %d" % (after[0] - before[0], after[1] - before[1], forgotten))
        shared = a_prompt[:4] + a_prompt[25:40] + ids[80:84]
        text, n, reason, cached = complete(on.base, shared, 10)
        cold = complete(off.base, shared, 10)
        c.check(cached == 4, "after shifts of 7, a prompt sharing the shifted list reused %d tokens, expected 4" % cached)
        c.check((text, n, reason) == cold[:3], "after shifts of 7: %r, a cold server %r" % ((text, n, reason), cold[:3]))

        # The edges: the longest prompt (context - 1) shifts at once; n_keep -1 keeps the whole
        # prompt; n_keep context - 4 keeps all but 3 tokens.
        for prompt, max_tokens, keep, resolved in ((ids[:CTX - 1], 20, 0, 0), (a_prompt, 60, -1, len(a_prompt)),
                                                   (ids[:20], 60, CTX - 4, CTX - 4)):
            text, n, reason, _ = complete(on.base, prompt, max_tokens, n_keep=keep, cache_prompt=False)
            shifts = expect(len(prompt), max_tokens, resolved)
            c.check(n == max_tokens and reason == "length" and shifts >= 1,
                    "prompt %d, n_keep %d: %d tokens (%s), %d shifts" % (len(prompt), keep, n, reason, shifts))
        c.check(int(on.metric_value("vkformer_context_shifts_total")) == expected_shifts,
                "metrics at the end: %s shifts, expected %d" % (on.metric_value("vkformer_context_shifts_total"), expected_shifts))

        # Refused: a prompt as long as the context, and bad n_keep.
        code = error_of(*post(on.base, dict(model="tiny", prompt=ids[:CTX], max_tokens=4)))
        c.check(code[0] == 400 and code[2] == "context_length_exceeded", "a prompt of %d tokens: %s" % (CTX, code))
        for bad, words in ((-2, "from -1 to"), (CTX - 3, "more than the 60 tokens a context shift can keep"),
                           (CTX + 1, "more than the 60"), (1.5, "must be an integer, got a number"),
                           ("4", "must be an integer, got a string"), (True, "must be an integer")):
            code = error_of(*post(on.base, dict(model="tiny", prompt=ids[:10], max_tokens=4, n_keep=bad)))
            c.check(code[0] == 400 and code[1] == "n_keep" and words in code[3], "n_keep %r: %s" % (bad, code))
        for bad, words in ((-1, "from 0 to"), (CTX, "not less than the context of 64"), (1.5, "must be an integer, got a number"),
                           ("4", "must be an integer, got a string")):
            code = error_of(*post(on.base, dict(model="tiny", prompt=ids[:10], max_tokens=4, n_discard=bad)))
            c.check(code[0] == 400 and code[1] == "n_discard" and words in code[3], "n_discard %r: %s" % (bad, code))
        c.check(on.health(), "health at the end")
        on.stop()
    finally:
        on.kill()
    off.stop()
finally:
    off.kill()

# A bad --n-discard is a command-line mistake: exit 2 naming it, before any model is loaded.
for bad, words in (("-1", "--n-discard"), (str(CTX), "--n-discard 64 is not less than --ctx 64")):
    r = subprocess.run([vkformer, "serve", "--model", gguf_path, "--ctx", str(CTX), "--n-discard", bad],
                       capture_output=True, text=True, timeout=120)
    c.check(r.returncode == 2 and words in r.stderr, "--n-discard %s: exit %d, %r" % (bad, r.returncode, r.stderr[-300:]))
c.finish()
