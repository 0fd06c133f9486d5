#!/usr/bin/env python3
"""tools/deps.sh and tools/main.sh: deps.sh installs nothing when everything
is there (no pip, no apt-get on every call), main.sh prints the program's
output alone and the build's output only when the build fails.
Usage: test_scripts.py SOURCE_ROOT BUILD_ROOT."""
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile

root, build = sys.argv[1], sys.argv[2]
python = shutil.which("python3")

with tempfile.TemporaryDirectory() as d:
    # Shims that log every call of pip (through python3 -m pip) and apt-get.
    log = os.path.join(d, "calls.log")
    shims = os.path.join(d, "bin")
    os.mkdir(shims)
    with open(os.path.join(shims, "python3"), "w") as f:
        f.write(f'#!/bin/sh\nif [ "$1 $2" = "-m pip" ]; then echo "pip $*" >> {log}; exit 0; fi\n'
                f'exec {python} "$@"\n')
    with open(os.path.join(shims, "apt-get"), "w") as f:
        f.write(f'#!/bin/sh\necho "apt-get $*" >> {log}\n')
    for name in ("python3", "apt-get"):
        os.chmod(os.path.join(shims, name), 0o755)
    env = dict(os.environ, PATH=shims + os.pathsep + os.environ["PATH"])

    deps = os.path.join(root, "tools", "deps.sh")
    # Whether this machine has everything deps.sh would install, judged
    # here (not by deps.sh): the Debian packages of its list, the Python
    # packages of its pip lines.
    text = open(deps).read()
    pkgs = re.search(r"pkgs=\((.*?)\)", text, re.S).group(1).split()
    pips = [w for line in re.findall(r"pip install -q (.*?) 2>", text) for w in line.split()
            if not w.startswith("-")]
    missing = [p for p in pkgs if "install ok installed" not in subprocess.run(
        ["dpkg-query", "-W", "-f=${Status}", p], capture_output=True, text=True).stdout]
    missing += [m for m in pips if importlib.util.find_spec(m.replace("-", "_")) is None]
    if missing:
        print(f"SKIP: this machine lacks {missing}: installing them would be right")
        sys.exit(77)
    for _ in range(2):
        again = subprocess.run([deps], capture_output=True, text=True, env=env, timeout=300)
        assert again.returncode == 0 and again.stdout == "" and again.stderr == "", again
    assert not os.path.exists(log), open(log).read()

    # main.sh on a built tree: the program's output and nothing else.
    main = os.path.join(root, "tools", "main.sh")
    env = dict(os.environ, BRISK_BUILD_DIR=build)
    p = subprocess.run([main, "version"], capture_output=True, text=True, env=env, timeout=600)
    want = subprocess.run([os.path.join(build, "tools", "brisk"), "version"], capture_output=True,
                          text=True).stdout
    assert p.returncode == 0 and p.stdout == want and p.stderr == "", (p.stdout, p.stderr)
    # A build that fails shows its output and exits non-zero.
    broken = os.path.join(d, "broken")
    os.mkdir(broken)
    with open(os.path.join(broken, "build.ninja"), "w") as f:
        f.write("rule fail\n  command = echo compiler says no && false\n"
                "build all: fail\ndefault all\n")
    p = subprocess.run([main, "version"], capture_output=True, text=True,
                       env=dict(os.environ, BRISK_BUILD_DIR=broken), timeout=60)
    assert p.returncode != 0 and "compiler says no" in p.stderr and "build failed" in p.stderr, p
    assert p.stdout == "", p.stdout
print("cli scripts: all checks passed")
