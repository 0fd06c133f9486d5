"""Runs one example program on a small model: it must exit 0 and print text.

Usage: smoke_test.py SHARED_DIR NAME EXECUTABLE
Uses ../shared/models/stories260K.gguf; the chat example also runs on
SmolLM2-135M-Instruct (whose template is recognized) when that file is in
brisk's cache. Exit 77 (skip) when no model is available.
"""
import os
import subprocess
import sys

shared, name, exe = sys.argv[1], sys.argv[2], sys.argv[3]
stories = os.path.join(shared, "models", "stories260K.gguf")
cache = os.environ.get("BRISK_CACHE_DIR") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "brisk")
smollm2 = os.path.join(cache, "SmolLM2-135M-Instruct.Q4_1.gguf")

runs = []
if os.path.exists(stories):
    if name == "simple":
        runs.append([exe, stories, "Once upon a time", "12"])
    elif name == "batched":
        runs.append([exe, stories, "Once upon a time", "3", "8"])
    elif name == "disaggregated":  # prefill in one process, decode in another
        runs.append([exe, stories, "Once upon a time", "24"])
    elif name == "speculative":  # prompt lookup, then the model as its own draft
        runs.append([exe, stories, "Once upon a time", "24"])
        runs.append([exe, stories, "Once upon a time", "24", stories])
    else:  # stories260K has no chat template: name one
        runs.append([exe, stories, "Hello", "chatml"])
if name == "chat" and os.path.exists(smollm2):
    runs.append([exe, smollm2, "What is 2+2?"])
if not runs:
    print(f"SKIP: neither {stories} nor {smollm2} exists")
    sys.exit(77)

# Each run's limit: 100 s natively, times BRISK_TEST_TIME_SCALE where a
# slower runner asks for it (tools/cross-aarch64.sh under qemu, which scales
# meson's own timeouts by the same factor).
limit = 100 * max(1.0, float(os.environ.get("BRISK_TEST_TIME_SCALE") or 1))

for argv in runs:
    p = subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=limit)
    print("$", " ".join(argv))
    print(p.stdout)
    print(p.stderr, file=sys.stderr)
    if p.returncode != 0:
        sys.exit(f"{name}: exit status {p.returncode}")
    if not p.stdout.strip():
        sys.exit(f"{name}: printed nothing")
    if name == "batched" and p.stdout.count("--- completion") != int(argv[3]):
        sys.exit("batched: wrong number of completions")
    if name == "speculative" and "drafted tokens accepted" not in p.stderr:
        sys.exit("speculative: no statistics line")
    if name == "speculative" and len(argv) > 4 and "24 tokens" in p.stderr and \
            " 0 of " in p.stderr:
        sys.exit("speculative: the model drafting for itself had nothing accepted")
    if name == "disaggregated" and "equal a single engine's" not in p.stdout:
        sys.exit("disaggregated: the decode engine's tokens differ from a single engine's")
    if name == "chat" and argv[1] == smollm2 and "template chatml" not in p.stderr:
        sys.exit("chat: SmolLM2's template was not recognized as chatml")
print("OK")
