#!/usr/bin/env python3
"""serve-bench's SVG plots as people see them: every series has its own
colour and dash pattern (15 series: five configurations at three rates), and
nothing is cut off: the picture rendered with rsvg-convert at its own size
equals the same picture rendered on a larger canvas, cropped (a legend
entry running past the right edge would only show on the larger one).
Usage: test_plots.py BRISK_BINARY SHARED_DIR. Skips without ../shared or
rsvg-convert (librsvg2-bin) for the rendered checks."""
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
import zlib

brisk, shared = sys.argv[1], sys.argv[2]
stories = os.path.join(shared, "models", "stories260K.gguf")
if not os.path.exists(stories):
    print("SKIP: ../shared models are absent")
    sys.exit(77)
SVG = "{http://www.w3.org/2000/svg}"


def png_pixels(path):
    """(width, height, bytes per pixel, rows) of an 8-bit RGB or RGBA PNG."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, color = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and color in (2, 6), (depth, color)
            bpp = 4 if color == 6 else 3
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw, stride, rows = zlib.decompress(idat), w * bpp, []
    prev = bytearray(stride)
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, bpp, rows


with tempfile.TemporaryDirectory() as d:
    out = os.path.join(d, "plots")
    p = subprocess.run([brisk, "serve-bench", "-m", stories, "-n", "4", "--rates", "0,50,400",
                        "--prompt-len", "4..12", "--output-len", "1..4", "--kv-tokens", "64",
                        "-t", "1", "--compare", "all", "--static-pad", "--out-dir", out, "--json"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    for name in sorted(os.listdir(out)):
        path = os.path.join(out, name)
        root = ET.parse(path).getroot()
        w, h = float(root.get("width")), float(root.get("height"))
        lines = root.findall(SVG + "polyline")
        styles = [(pl.get("stroke"), pl.get("stroke-dasharray") or "") for pl in lines]
        assert len(set(styles)) == len(styles), (name, styles)
        if "cdf" in name:
            assert len(lines) == 15, (name, len(lines))
        # Legend entries: one per series, in the same style as its curve.
        legend = [(ln.get("stroke"), ln.get("stroke-dasharray") or "")
                  for ln in root.findall(SVG + "line") if ln.get("stroke-width") == "3"]
        assert legend == styles, (name, legend, styles)
        for pl in lines:
            for pt in pl.get("points").split():
                x, y = map(float, pt.split(","))
                assert 0 <= x <= w and 0 <= y <= h, (name, x, y)
        if not shutil.which("rsvg-convert"):
            continue
        # Rendered: at its size, and on a canvas 400 px wider and taller.
        text = open(path).read()
        big = os.path.join(d, "big.svg")
        bw, bh = int(w) + 400, int(h) + 400
        head = re.sub(r'width="[^"]*" height="[^"]*" viewBox="[^"]*"',
                      f'width="{bw}" height="{bh}" viewBox="0 0 {bw} {bh}"', text, count=1)
        # The white background must not hide what spills over the edge.
        head = head.replace('<rect width="100%" height="100%" fill="white"/>',
                            f'<rect width="{w:.0f}" height="{h:.0f}" fill="white"/>', 1)
        open(big, "w").write(head)
        subprocess.run(["rsvg-convert", "-b", "white", "-o", os.path.join(d, "a.png"), path], check=True)
        subprocess.run(["rsvg-convert", "-b", "white", "-o", os.path.join(d, "b.png"), big], check=True)
        aw, ah, pa, a = png_pixels(os.path.join(d, "a.png"))
        _, _, pb, b = png_pixels(os.path.join(d, "b.png"))
        assert (aw, ah) == (int(w), int(h)), (aw, ah, w, h)
        for y in range(len(b)):
            row = b[y]
            outside = row[aw * pb:] if y < ah else row
            assert outside.count(255) == len(outside), f"{name}: drawn past the edge (row {y})"
        # The legend's names are drawn: text pixels in the legend column.
        legend_x = int(max(float(ln.get("x2")) for ln in root.findall(SVG + "line")
                           if ln.get("stroke-width") == "3"))
        assert any(a[y][legend_x * pa:].count(255) < len(a[y][legend_x * pa:]) for y in range(ah)), name
if not shutil.which("rsvg-convert"):
    print("rendered checks skipped: rsvg-convert (librsvg2-bin) is not installed")
print("cli plots: all checks passed")
