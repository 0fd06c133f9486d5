#!/usr/bin/env python3
"""The table of docs/quantization.md, from one run: every quantization preset
of a model, measured against its F16 copy on one text.

    quant_table.py --brisk build/tools/brisk --model SmolLM2.gguf [--model M2 ...]
                   [--text bench/text/eval.txt] [-c 128] [--chunks 0] [-t 2]
                   [--gen 32] [--workdir DIR] [--presets F16,Q8_0,...]
                   [--imatrix-text bench/text/calib.txt] [--imatrix-presets Q4_K_M,Q4_0]
                   [--speed-only]

Per model: an F16 copy (`brisk quantize M F16`) is the base; its perplexity
run saves the base log-probabilities (--kl-divergence-base). Each preset is
then quantized from the F16 copy (as llama-quantize is used), and measured:
file size, bits per weight (all tensor bytes * 8 / all elements), perplexity,
mean and 99th-percentile KL divergence and top-1 agreement against the F16
base (brisk perplexity --kl-divergence), and decode tokens/s (brisk bench
-p 0 -n GEN -r 1, batch 1 after a warm-up). Quantization and evaluation
files go to --workdir (default: a temporary folder), never into the
repository. Prints a markdown table, the CPU model and the load average
before and after.

With --imatrix-text, `brisk imatrix` collects an importance matrix of the F16
copy over that (other) text, and the --imatrix-presets are measured again
quantized with it (rows "PRESET + imatrix"), to show what it buys in KL
divergence.

A model argument "1b" makes the 1b random-weight model with
../shared/models/make_models.py (F16, seed 0) in the work folder first: its
perplexity is meaningless (random weights) but its KL divergence and speed
are not.

--speed-only skips the perplexity and KL divergence runs (those columns
read "-"): file size, bits per weight and decode speed only, for the 1b
random model, whose perplexity and KL divergence say nothing about a real
model and whose evaluation windows cost most of the run's CPU time."""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

PRESETS = ["F16", "Q8_0", "Q6_K", "Q5_K_M", "Q5_K_S", "Q4_K_M", "Q4_K_S", "Q4_0"]


def sh(cmd, timeout=3600):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{p.stderr}")
    return p.stdout


def cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def load():
    return " ".join(open("/proc/loadavg").read().split()[:3])


def table_for(args, model, work):
    name = os.path.basename(model)
    if model == "1b":
        model = os.path.join(work, "1b-f16.gguf")
        if not os.path.exists(model):
            maker = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "models",
                                 "make_models.py")
            sh([sys.executable, maker, "random", "--preset", "1b", "--type", "f16", "--out", model])
        name = "1b random (F16 source)"
    base = os.path.join(work, "base-F16.gguf")
    sh([args.brisk, "quantize", model, base, "F16", "-t", str(args.t)])
    kld = os.path.join(work, "base.kld")
    ppl_args = ["-f", args.text, "-c", str(args.c), "-t", str(args.t), "--json"]
    if args.chunks:
        ppl_args += ["--chunks", str(args.chunks)]
    b = None
    if not args.speed_only:
        b = json.loads(sh([args.brisk, "perplexity", base, *ppl_args, "--kl-divergence-base", kld]))
    rows = []
    jobs = [(p, None) for p in args.presets]
    if args.imatrix_text:
        im = os.path.join(work, "imatrix.gguf")
        sh([args.brisk, "imatrix", base, "-f", args.imatrix_text, "-o", im, "-c", str(args.c), "-t",
            str(args.t), "--json"])
        jobs += [(p, im) for p in args.imatrix_presets.split(",")]
    for preset, im in jobs:
        out = os.path.join(work, f"{preset}.gguf")
        t0 = time.time()
        extra = ["--imatrix", im] if im else []
        q = json.loads(sh([args.brisk, "quantize", base, out, preset, "-t", str(args.t), "--json", *extra]))
        qs = time.time() - t0
        label = preset + (" + imatrix" if im else "")
        k = None
        if not args.speed_only:
            k = json.loads(sh([args.brisk, "perplexity", out, "--kl-divergence-base", kld, "--kl-divergence",
                               "-t", str(args.t), "--json"]))
        bench = json.loads(sh([args.brisk, "bench", "-m", out, "-p", "0", "-n", str(args.gen), "-r", "1",
                               "-t", str(args.t), "--json"]))
        ev = (k["ppl"], k["kld"], k["kld_99"], k["same_top"]) if k else (None,) * 4
        rows.append((label, os.path.getsize(out), q["bits_per_weight"], *ev, bench["tg"]["median_tps"], qs))
        print(f"  {label}: {os.path.getsize(out) / 1048576:.1f} MiB, {q['bits_per_weight']:.2f} bits/weight, "
              f"{bench['tg']['median_tps']:.2f} tok/s, quantized in {qs:.1f} s, load {load()}", file=sys.stderr,
              flush=True)
        if out != base:
            os.remove(out)
    return name, b, rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--brisk", required=True)
    ap.add_argument("--model", action="append", required=True)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--text", default=os.path.join(here, "text", "eval.txt"))
    ap.add_argument("-c", type=int, default=128)
    ap.add_argument("--chunks", type=int, default=0)
    ap.add_argument("-t", type=int, default=2)
    ap.add_argument("--gen", type=int, default=32)
    ap.add_argument("--workdir")
    ap.add_argument("--presets", default=",".join(PRESETS))
    ap.add_argument("--imatrix-text")
    ap.add_argument("--imatrix-presets", default="Q4_K_M,Q4_0")
    ap.add_argument("--speed-only", action="store_true")
    args = ap.parse_args()
    args.presets = args.presets.split(",")
    print(f"CPU: {cpu_model()}; {args.t} threads; load average before: {load()}")
    for model in args.model:
        with tempfile.TemporaryDirectory(dir=args.workdir) as work:
            name, b, rows = table_for(args, model, work)
        print(f"\n### {name}\n")
        if b:
            print(f"Text: {os.path.basename(args.text)}, {b['tokens']} tokens; -c {b['n_ctx']}, {b['chunks']} windows, "
                  f"{b['scored']} tokens scored. F16 perplexity {b['ppl']:.4f} +/- {b['ppl_unc']:.4f}.\n")
        else:
            print("Speed only (--speed-only): no perplexity or KL divergence runs.\n")
        print("| preset | file MiB | bits/weight | PPL | mean KLD | 99% KLD | same top-1 | decode tok/s | quantize s |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for p, size, bpw, ppl, kl, kl99, top, tps, qs in rows:
            ev = (f"{ppl:.4f} | {kl:.5f} | {kl99:.4f} | {100 * top:.2f} %" if ppl is not None else "- | - | - | -")
            print(f"| {p} | {size / 1048576:.1f} | {bpw:.2f} | {ev} | {tps:.1f} | {qs:.1f} |")
    print(f"\nload average after: {load()}")


if __name__ == "__main__":
    main()
