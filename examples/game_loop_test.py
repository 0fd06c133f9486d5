"""Runs examples/game_loop under Xvfb for a fixed number of frames, takes a
screenshot (the example saves the pixels of its last frame as a BMP), and
checks that the reply was drawn: white pixels (the colour used only for
text) in the speech box, as many as the characters the example says it
drew, and none when nothing is generated.

Usage: game_loop_test.py SHARED_DIR EXECUTABLE|- [--bench MODEL]
Exit 77 (skip) when SDL2 was not found at build time (EXECUTABLE is '-'),
xvfb-run is missing, or the model (../shared/models/stories260K.gguf) is.
--bench MODEL: frame work time p50/p99 without generation, with the engine
ticked on the render thread within a frame budget, and on a worker thread.
"""
import os
import shutil
import struct
import subprocess
import sys
import tempfile

shared, exe = sys.argv[1], sys.argv[2]
bench_model = sys.argv[4] if len(sys.argv) > 4 and sys.argv[3] == "--bench" else None
if exe == "-":
    print("SKIP: SDL2 (libsdl2-dev) was not found when brisk was configured")
    sys.exit(77)
if not shutil.which("xvfb-run"):
    print("SKIP: xvfb-run (Debian package xvfb) is not installed")
    sys.exit(77)
model = bench_model or os.path.join(shared, "models", "stories260K.gguf")
if not os.path.exists(model):
    print(f"SKIP: {model} does not exist")
    sys.exit(77)


def run(*args):
    argv = ["xvfb-run", "-a", "-s", "-screen 0 640x360x24", exe, model, *args]
    # SDL's X11 and D-Bus libraries keep allocations until exit, which
    # LeakSanitizer reports in a sanitizer build; brisk's own leaks are
    # checked by the C tests, so leak detection is off for this program.
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = env.get("ASAN_OPTIONS", "") + ":detect_leaks=0"
    p = subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=240,
                       env=env)
    print("$", " ".join(argv))
    print(p.stdout, end="")
    print(p.stderr, end="", file=sys.stderr)
    assert p.returncode == 0, p.returncode
    line = [l for l in p.stdout.splitlines() if l.startswith("frames ")][-1].split()
    return {line[i]: line[i + 1] for i in range(0, len(line) - 1, 2)}


def bmp_pixels(path):
    """(width, height, rows top-down of (r, g, b)) of an uncompressed BMP."""
    data = open(path, "rb").read()
    assert data[:2] == b"BM", "not a BMP"
    off, = struct.unpack_from("<I", data, 10)
    w, h, _, bpp, comp = struct.unpack_from("<iiHHI", data, 18)
    assert bpp in (24, 32) and comp in (0, 3), (bpp, comp)
    step = bpp // 8
    stride = (w * step + 3) // 4 * 4
    rows = []
    for y in range(abs(h)):
        r = off + (abs(h) - 1 - y if h > 0 else y) * stride
        rows.append([(data[r + x * step + 2], data[r + x * step + 1], data[r + x * step])
                     for x in range(w)])
    return w, abs(h), rows


def white_in_box(path):
    w, h, rows = bmp_pixels(path)
    assert (w, h) == (640, 360), (w, h)
    return sum(1 for y in range(20, 140) for x in range(20, 620) if rows[y][x] == (255, 255, 255))


if bench_model:
    for args in (["--no-generate"], ["--budget-us", "4000"], ["--worker"]):
        s = run("--frames", "600", *args)
        print(f"{s['mode']:>14}: frame work p50 {int(s['work_p50_us']) / 1000:.2f} ms, "
              f"p99 {int(s['work_p99_us']) / 1000:.2f} ms; frame interval p50 "
              f"{int(s['frame_p50_us']) / 1000:.2f} ms, p99 {int(s['frame_p99_us']) / 1000:.2f} ms; "
              f"{s['tokens']} tokens in {s['frames']} frames")
    sys.exit(0)

with tempfile.TemporaryDirectory() as tmp:
    shot = os.path.join(tmp, "frame.bmp")
    s = run("--frames", "120", "--screenshot", shot)
    assert int(s["frames"]) == 120, s
    assert int(s["tokens"]) > 0, s
    chars = int(s["chars"])
    assert chars > 0, s
    white = white_in_box(shot)
    # Every glyph but '.' lights at least 2 of its 3x5 cells, each 2x2 pixels.
    assert white >= 4 * chars, (white, chars)
    idle = os.path.join(tmp, "idle.bmp")
    s = run("--frames", "30", "--no-generate", "--screenshot", idle)
    assert int(s["chars"]) == 0 and white_in_box(idle) == 0, s
    print(f"ok: {chars} characters drawn, {white} text pixels in the speech box")
