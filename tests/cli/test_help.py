#!/usr/bin/env python3
"""brisk's command line itself, on every subcommand: --help and --version,
the one option parser (strict numbers, ranges named in the error, exit 2,
the nearest flag suggested, --flag=value), and the man pages generated from
the same help text. Needs no model: every value error is found before one
is loaded. Usage: test_help.py BRISK_BINARY [MAN_DIR]."""
import os
import re
import subprocess
import sys

brisk = sys.argv[1]
man_dir = sys.argv[2] if len(sys.argv) > 2 else None


def run(*args):
    return subprocess.run([brisk, *args], capture_output=True, text=True, timeout=60)


def usage_error(args, *needles):
    """args must fail with exit 2 and one stderr line holding every needle."""
    p = run(*args)
    assert p.returncode == 2, (args, p.returncode, p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("brisk"), (args, p.stderr)
    for n in needles:
        assert n in lines[0], (args, n, lines[0])
    assert p.stdout == "", (args, p.stdout)
    return lines[0]


top = run("--help")
assert top.returncode == 0 and top.stdout.startswith("usage: brisk COMMAND"), top
commands = re.findall(r"^  ([a-z][a-z-]+) {2,}", top.stdout.split("commands:")[1].split("general:")[0],
                      re.M)
assert {"run", "info", "tokenize", "quantize", "version", "bench", "serve-bench", "logits"} <= set(commands), commands
assert run("--version").stdout.startswith("brisk "), run("--version")
usage_error(["rnu"], "unknown command 'rnu'", "did you mean 'run'")
usage_error(["no-such-command"], "unknown command")
assert run().returncode == 2

# Value-taking options and their metavars, read from a help text.
OPT = re.compile(r"^  (?:-(\w), )?(?:--([a-z][a-z0-9-]*))?(?: ([A-Z][A-Z0-9.,|]*))?", re.M)
NUMERIC = {"N", "T", "K", "P", "R", "S", "X", "Y", "F"}

for cmd in commands:
    h = run(cmd, "--help")
    assert h.returncode == 0 and h.stderr == "", (cmd, h.stderr)
    assert h.stdout.startswith(f"usage: brisk {cmd} "), (cmd, h.stdout[:80])
    assert "\ngeneral:\n  -h, --help" in h.stdout and "--version" in h.stdout, cmd
    assert run(cmd, "-h").stdout == h.stdout, cmd
    assert run("help", cmd).stdout == h.stdout, cmd
    v = run(cmd, "--version")
    assert v.returncode == 0 and v.stdout.startswith(f"brisk {cmd} "), (cmd, v.stdout)
    # Unknown options: refused, the nearest known one suggested.
    usage_error([cmd, "--definitely-not-an-option"], "unknown option '--definitely-not-an-option'")
    usage_error([cmd, "--hepl"], "did you mean '--help'")
    usage_error([cmd, "--jsn"] if "--json" in h.stdout else [cmd, "--verison"], "did you mean")
    for short, long, meta in OPT.findall(h.stdout):
        if not long and not short:
            continue
        flag = f"--{long}" if long else f"-{short}"
        if meta in NUMERIC:
            # Strict numbers: words, trailing junk, empty and huge values are
            # refused with the flag, the value and what was expected.
            for bad in ("abc", "10x", "", "1e999", "99999999999999999999"):
                line = usage_error([cmd, flag, bad], flag, f"'{bad}'", "expected")
                assert "number" in line, line
            usage_error([cmd, f"{flag}=abc"], flag, "'abc'")
            usage_error([cmd, flag], flag, "needs a value")
            if short:
                usage_error([cmd, f"-{short}", "abc"], f"-{short}", "'abc'")
        elif meta == "":
            usage_error([cmd, f"{flag}=1"], flag, "takes no value")

# Ranges, named with the flag (not a C struct field), on the commands the
# issue lists.
usage_error(["run", "-n", "abc"], "-n 'abc'", "whole number from 0")
usage_error(["run", "-n", "10x"], "-n '10x'")
usage_error(["run", "-n", "-3"], "-n '-3'")
usage_error(["run", "--temp", "abc"], "--temp 'abc'", "from 0 to 100")
usage_error(["run", "--temp", "nan"], "--temp 'nan'")
usage_error(["run", "--top-p", "0"], "--top-p '0'", "> 0 and <= 1")
usage_error(["run", "--top-p", "2"], "--top-p '2'")
usage_error(["run", "--min-p", "-0.1"], "--min-p")
usage_error(["run", "--seed", "-1"], "--seed '-1'")
line = usage_error(["run", "-t", "1000"], "-t '1000'", "whole number from 0 to")
max_threads = int(line.rsplit(" ", 1)[1])
assert max_threads == min(1024, 4 * os.cpu_count()) and max_threads < 1000, line
usage_error(["run", "--tmep", "1"], "did you mean '--temp'")
usage_error(["run", "--top_k", "1"], "did you mean '--top-k'")
usage_error(["run", "-p", "x", "-f", "y"], "-p or -f")
usage_error(["run", "--chat", "--json"], "--chat does not combine")
usage_error(["run", "--chat", "--raw"], "--chat does not combine")
usage_error(["bench", "--ngram", "3,2"], "--ngram '3,2'", "MIN,MAX")
usage_error(["bench", "-p", "1", "-n", "1"], "exactly one of")
usage_error(["serve-bench", "--preempt", "later"], "--preempt 'later'", "recompute, swap")
usage_error(["serve-bench", "--rates", "1,x"], "--rates '1,x'")
usage_error(["serve-bench", "--prompt-len", "9..3"], "--prompt-len '9..3'", "A..B")
usage_error(["serve-bench"], "-m MODEL is required")
usage_error(["info"], "missing operand", "brisk info MODEL")
usage_error(["info", "a", "b"], "unexpected argument 'b'")
usage_error(["quantize", "a", "b"], "missing operand")
usage_error(["quantize", "a", "b", "q2_k"], "PRESET 'q2_k'")
usage_error(["tokenize", "vocab.gguf"], "give TEXT or --file")
usage_error(["logits", "m.gguf", "out.f32", "x"], "'x' is not a token id")
usage_error(["version", "extra"], "unexpected argument 'extra'")

# Man pages: one per command, made from the same help text (every long
# option of the help is in the page).
if man_dir is None or not os.path.exists(os.path.join(man_dir, "brisk.1")):
    print("man page checks skipped: help2man was not found at build time")
else:
    for cmd in commands:
        page = os.path.join(man_dir, f"brisk-{cmd}.1")
        assert os.path.exists(page), f"no man page for {cmd} (tools/meson.build reads the table in main.c)"
        text = open(page).read().replace("\\-", "-")
        assert text.startswith(".\\\"") and f"brisk-{cmd} - " in text, (cmd, text[:300])
        for long in re.findall(r"^  (?:-\w, )?--([a-z][a-z0-9-]*)", run(cmd, "--help").stdout, re.M):
            assert f"--{long}" in text, (cmd, long)
    top_page = open(os.path.join(man_dir, "brisk.1")).read().replace("\\-", "-")
    assert all(c in top_page for c in commands), top_page
print("cli help: all checks passed")
