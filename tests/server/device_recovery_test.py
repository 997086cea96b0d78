"""`vkformer serve` when its device fails (issue 39), the vkfault layer armed in the running
server between requests (fault_control.c, preloaded; tests/fault_layer/README.md):
  - the device lost under an embedding request: 503 device_lost naming vkQueueSubmit; the
    language model is loaded again too (told by the embedder, before any completion fails),
    and both then give the vectors and the text they gave before;
  - lost under a streamed completion: its final event is the 503 device_lost error, then
    [DONE]; the embedder is loaded again with the model; the same vectors and text after;
  - out of device memory in a step: 503 out_of_memory, the model kept (no reload), /health ok;
  - the device failing from then on: 503s, /health 503 "degraded" with the reason (loading
    again did not work) and requests refused with it; once the fault is gone the server
    recovers by itself (its retries) and serves the same text;
  - exit 0 after SIGTERM, no validation message.
Usage: device_recovery_test.py VKFORMER TINY_DIR LAYER_DIR"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

from serve_harness import Checks, Server, wait_until

vkformer, tiny_dir, layer_dir = sys.argv[1:4]
here = os.path.dirname(os.path.abspath(__file__))
c = Checks()
scratch = tempfile.mkdtemp(prefix="serve_recovery_")
shim = os.path.join(scratch, "fault_control.so")
subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", shim, os.path.join(here, "fault_control.c"), "-ldl", "-lpthread"],
               check=True)
bert = os.path.join(scratch, "tiny_bert")
subprocess.run([sys.executable, os.path.join(here, "..", "fault_layer", "make_tiny_bert.py"), bert], check=True,
               stdout=subprocess.DEVNULL)
control = os.path.join(scratch, "fault_control")
os.environ.update({
    "VK_ADD_LAYER_PATH": layer_dir,
    "VK_INSTANCE_LAYERS": "VK_LAYER_VKFORMER_fault",  # above the validation layer --validation enables
    "VKFORMER_FAULT": "count",
    "VKFORMER_FAULT_REPORT": os.path.join(scratch, "vkfault.txt"),
    "VKFORMER_FAULT_CONTROL": control,
    "VKFORMER_FAULT_LAYER": os.path.join(os.path.abspath(layer_dir), "libVkLayer_vkformer_fault.so"),
    "LD_PRELOAD": shim + (":" + os.environ["LD_PRELOAD"] if os.environ.get("LD_PRELOAD") else ""),
})


def arm(spec):
    """Hands the spec to the layer in the server; its answer must be "ok"."""
    with open(control + ".tmp", "w") as f:
        f.write(spec)
    os.rename(control + ".tmp", control)
    done = wait_until(lambda: os.path.exists(control + ".done"), timeout=60)
    answer = open(control + ".done").read() if done else "no answer"
    if done:
        os.unlink(control + ".done")
    if answer != "ok":
        raise RuntimeError("arming %r: %s" % (spec, answer))


def post(path, body):
    """(status, JSON reply); for a stream, (200, list of events) or its error event's status."""
    req = urllib.request.Request(server.base + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            if not body.get("stream"):
                return r.status, json.loads(r.read())
            events = [line.decode().strip()[6:] for line in r if line.startswith(b"data: ")]
            return r.status, [e if e == "[DONE]" else json.loads(e) for e in events]
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def complete(stream=False):
    return post("/v1/completions", {"model": "tiny", "prompt": "the cat sat on", "max_tokens": 6, "temperature": 0,
                                    "stream": stream})


def embed():
    return post("/v1/embeddings", {"model": "tiny_bert", "input": ["the cat sat on the mat", "a big dog"]})


def health():
    try:
        with urllib.request.urlopen(server.base + "/health", timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def healthy():
    return wait_until(lambda: health()[0] == 200, timeout=120)


def vectors(reply):
    return [d["embedding"] for d in reply["data"]]


def same_vectors(a, b):
    return max(abs(x - y) for va, vb in zip(a, b) for x, y in zip(va, vb)) <= 1e-5


def error_of(status, reply):
    """(status, code, message) of an error reply, or of a stream's final error event."""
    if isinstance(reply, list):
        errors = [e for e in reply if isinstance(e, dict) and "error" in e]
        if not errors:
            return status, None, "no error event"
        c.check(reply[-1] == "[DONE]", "the stream ends with [DONE] after its error event: %s" % reply[-2:])
        return 503, errors[0]["error"].get("code"), errors[0]["error"].get("message", "")
    return status, reply["error"].get("code"), reply["error"].get("message", "")


server = Server(vkformer, ["--model", os.path.join(tiny_dir, "tiny_llama_untied.gguf"), "--model-name", "tiny",
                           "--embedding-model", bert, "--ctx", "64", "--parallel", "2", "--batch-tokens", "16"])
try:
    status, reply = complete()
    text = reply["choices"][0]["text"]
    status, reply = embed()
    vecs = vectors(reply)
    c.check(len(text) > 0 and len(vecs) == 2, "the references: %r, %d vectors" % (text, len(vecs)))

    def reloads():
        return int(server.metric_value("vkformer_model_reloads_total"))

    # 1. Lost under an embedding request.
    arm("vkQueueSubmit:1")
    status, code, message = error_of(*embed())
    c.check(status == 503 and code == "device_lost" and "vkQueueSubmit" in message,
            "embedding on a lost device: %s %s %s" % (status, code, message[:300]))
    c.check(healthy(), "/health 200 again after the embedder's loss: %s" % (health(),))
    c.check(wait_until(lambda: reloads() == 1, timeout=120),
            "the language model was loaded again once (told by the embedder): %d reloads" % reloads())
    status, reply = complete()
    c.check(status == 200 and reply["choices"][0]["text"] == text, "text after the loss: %s %s" % (status, reply))
    status, reply = embed()
    c.check(status == 200 and same_vectors(vectors(reply), vecs), "vectors after the loss: %s" % status)

    # 2. Lost under a streamed completion.
    arm("vkQueueSubmit:1")
    status, code, message = error_of(*complete(stream=True))
    c.check(status == 503 and code == "device_lost" and "vkQueueSubmit" in message,
            "stream on a lost device: %s %s %s" % (status, code, message[:300]))
    c.check(healthy(), "/health 200 again after the stream's loss: %s" % (health(),))
    c.check(reloads() == 2, "%d reloads after the second loss, expected 2" % reloads())
    status, reply = embed()
    c.check(status == 200 and same_vectors(vectors(reply), vecs), "vectors after the second loss: %s" % status)
    status, reply = complete()
    c.check(status == 200 and reply["choices"][0]["text"] == text, "text after the second loss: %s %s" % (status, reply))

    # 3. Out of device memory in a step: the model is kept.
    arm("vkQueueSubmit:1=VK_ERROR_OUT_OF_DEVICE_MEMORY")
    status, code, message = error_of(*complete())
    c.check(status == 503 and code == "out_of_memory" and "vkQueueSubmit" in message,
            "a step out of device memory: %s %s %s" % (status, code, message[:300]))
    c.check(health()[0] == 200, "/health after out of memory: %s" % (health(),))
    status, reply = complete()
    c.check(status == 200 and reply["choices"][0]["text"] == text, "text after out of memory: %s %s" % (status, reply))
    c.check(reloads() == 2, "out of memory reloaded the model: %d reloads" % reloads())

    # 4. A device that keeps failing: degraded with the reason, then back once it works.
    arm("vkQueueSubmit:1+")
    status, code, message = error_of(*complete())
    c.check(status == 503 and code == "device_lost", "completion on a failing device: %s %s %s" % (status, code, message[:300]))
    degraded = wait_until(lambda: "did not work" in health()[1].get("reason", ""), timeout=120)
    status, body = health()
    c.check(degraded and status == 503 and body.get("status") == "degraded",
            "/health while loading again fails: %s %s" % (status, body))
    status, code, message = error_of(*complete())
    c.check(status == 503 and code == "device_lost" and "did not work" in message and "vkQueueSubmit" in message,
            "a request while degraded: %s %s %s" % (status, code, message[:300]))
    arm("")  # the device works again: the server's next try succeeds
    c.check(healthy(), "/health 200 once the device works again: %s" % (health(),))
    status, reply = complete()
    c.check(status == 200 and reply["choices"][0]["text"] == text, "text after recovering: %s %s" % (status, reply))
    status, reply = embed()
    c.check(status == 200 and same_vectors(vectors(reply), vecs), "vectors after recovering: %s" % status)
    print("losses %d, reloads %d" % (server.metric_value("vkformer_device_losses_total"), reloads()))
    server.stop()
finally:
    server.kill()
    shutil.rmtree(scratch, ignore_errors=True)  # the shim, the tiny BERT and the layer's report
c.finish()
