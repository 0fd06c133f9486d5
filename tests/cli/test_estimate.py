#!/usr/bin/env python3
"""brisk estimate and --memory-limit: the estimate's JSON adds up and
follows the context options; a limit below it says it does not fit (exit
1); K/M/G suffixes are read as powers of 1024 and a bad value is a usage
error (exit 2); brisk run under a limit it cannot meet fails with the
limit named (exit 1), and runs under one it can.
Usage: test_estimate.py BRISK_BINARY SHARED_DIR"""
import json
import os
import subprocess
import sys

brisk, shared = sys.argv[1], sys.argv[2]
stories = os.path.join(shared, "models", "stories260K.gguf")
if not os.path.exists(stories):
    print(f"SKIP: {stories} does not exist")
    sys.exit(77)


def run(*args):
    return subprocess.run([brisk, *args], capture_output=True, text=True, timeout=120)


def estimate(*args):
    p = run("estimate", "-m", stories, "--json", *args)
    assert p.returncode in (0, 1), (args, p.returncode, p.stderr)
    return p.returncode, json.loads(p.stdout)


rc, e = estimate()
assert rc == 0, e
assert e["total"] == e["weights"] + e["model_other"] + e["kv"] + e["buffers"], e
assert e["weights"] == 0 and e["mapped"] > 0, e  # stories260K is F32: used mapped
# The KV pool follows the options: twice the tokens, twice the pool; F32, twice again.
_, e2 = estimate("--kv-tokens", "1024")
_, e4 = estimate("--kv-tokens", "1024", "--kv-type", "f32")
_, e1 = estimate("--kv-tokens", "512")
assert e2["kv"] == 2 * e1["kv"] and e4["kv"] == 2 * e2["kv"], (e1, e2, e4)
# Read into memory: the file counts.
_, er = estimate("--no-mmap")
assert er["weights"] >= os.path.getsize(stories) and er["mapped"] == 0, er
# A limit: fits or not, suffixes as powers of 1024.
rc, e = estimate("--memory-limit", "1G")
assert rc == 0 and e["fits"] is True and e["memory_limit"] == 1 << 30, e
rc, e = estimate("--memory-limit", "1K")
assert rc == 1 and e["fits"] is False and e["memory_limit"] == 1024, e
for value, want in (("3M", 3 << 20), ("2MiB", 2 << 20), ("5k", 5 << 10), ("4096", 4096)):
    _, e = estimate("--memory-limit", value)
    assert e["memory_limit"] == want, (value, e)
text = run("estimate", stories)
assert text.returncode == 0 and "total" in text.stdout and "kv" in text.stdout, text
for bad in ("2x", "-1", "K", "1.5G", "99999999999999999999"):
    p = run("estimate", "-m", stories, "--memory-limit", bad)
    assert p.returncode == 2 and "--memory-limit" in p.stderr, (bad, p.returncode, p.stderr)
assert run("estimate").returncode == 2

# brisk run under a limit it cannot meet, and one it can.
p = run("run", "-m", stories, "-t", "1", "-p", "Once upon a time", "-n", "4", "--memory-limit", "200K")
assert p.returncode == 1 and "process-wide memory limit of 204800 bytes" in p.stderr, p.stderr
p = run("run", "-m", stories, "-t", "1", "-p", "Once upon a time", "-n", "4", "--memory-limit", "64M")
assert p.returncode == 0, p.stderr
print("estimate and --memory-limit: all checks passed")
