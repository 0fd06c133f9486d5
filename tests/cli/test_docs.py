#!/usr/bin/env python3
"""The C programs of docs/getting-started.md work as written: each block
marked `/* getting-started: NAME */` is compiled against the built library
(with -Wall -Wextra -Werror) and run on stories260K, and its greedy text is
the text `brisk run --raw` generates for the same prompt (the engine's
three requests too, each as if alone).
Usage: test_docs.py SOURCE_ROOT BUILD_ROOT BRISK_BINARY SHARED_DIR [SANITIZE]
(SANITIZE: the build's b_sanitize, so the programs link a sanitized library)."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

root, build, brisk, shared = sys.argv[1:5]
sanitize = sys.argv[5] if len(sys.argv) > 5 and sys.argv[5] not in ("", "none") else None
stories = os.path.join(shared, "models", "stories260K.gguf")
cc = shutil.which("cc") or shutil.which("gcc")
if not os.path.exists(stories) or not cc:
    print("SKIP: ../shared models or a C compiler are absent")
    sys.exit(77)
doc = open(os.path.join(root, "docs", "getting-started.md")).read()
blocks = dict((m.group(1), m.group(0)) for m in
              (re.match(r"/\* getting-started: (\w+) \*/.*", b, re.S)
               for b in re.findall(r"```c\n(.*?)```", doc, re.S)) if m)
assert set(blocks) == {"generate", "engine"}, blocks.keys()
lib_dir = os.path.dirname(next(os.path.join(dp, f) for dp, _, fs in os.walk(build) for f in fs
                               if f.startswith("libbrisk.so")))


def cli_text(prompt, n):
    p = subprocess.run([brisk, "run", "-m", stories, "--raw", "-p", prompt, "-n", str(n), "--json"],
                       capture_output=True, text=True, check=True)
    return json.loads(p.stdout)["text"]


with tempfile.TemporaryDirectory() as d:
    exe = {}
    for name, code in blocks.items():
        src = os.path.join(d, name + ".c")
        open(src, "w").write(code)
        exe[name] = os.path.join(d, name)
        subprocess.run([cc, "-std=c11", "-Wall", "-Wextra", "-Werror", src, "-o", exe[name],
                        "-I" + os.path.join(root, "include"), "-L" + lib_dir, "-lbrisk",
                        "-Wl,-rpath," + lib_dir] + ([f"-fsanitize={sanitize}"] if sanitize else []),
                       check=True)
    p = subprocess.run([exe["generate"], stories, "Once upon a time"], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout == cli_text("Once upon a time", 64) + "\n", (p.stdout, cli_text("Once upon a time", 64))
    p = subprocess.run([exe["engine"], stories], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    prompts = ["Once upon a time", "The little dog", "In the forest"]
    for i, prompt in enumerate(prompts):
        want = f"[{i}] {prompt}{cli_text(prompt, 24)}"
        assert want in p.stdout, (want, p.stdout)
    assert len(lines) >= 3, lines
print("getting-started programs: all checks passed")
