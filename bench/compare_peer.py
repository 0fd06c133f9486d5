#!/usr/bin/env python3
"""brisk against the peer (llama.cpp, see ../shared/peer/README.md), side by
side in one run. Called by compare_peer.sh, which finds the programs.

    compare_peer.py --brisk BRISK --peer PEER_LLAMA [--pylib DIR]
                    [-p 512] [-n 128] [-t 2] [-r 3] [--rounds 1]
                    [--tokenize VOCAB ...] [--text FILE] MODEL...

For each model: `brisk bench` and `peer_llama bench` with the same -p/-n/-t/-r
on the same file, back to back (alternating which goes first each round),
then a markdown table with both medians and brisk/peer. With --rounds > 1 the
table shows the median over rounds of each side's median. Each row carries
the load average, since the machine may be shared.

Tokenizers: MB/s over the whole text (default: 4 MB from make_text.py) in
one call, and in one call per paragraph (as a server tokenizes many short
prompts; the peer's rate then includes a Python ctypes call per paragraph,
about a microsecond each), median of -r reps after a warm-up, vocabulary load
not counted. brisk: `brisk bench --tokenize`. Peer: llama.cpp's llama_tokenize
through the llama_cpp Python package that setup.sh's PyPI route builds
(--pylib); skipped with a message when that package is absent. Token counts
are printed for both: they should be equal."""
import argparse
import importlib
import json
import os
import statistics
import subprocess
import sys
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))


def load_avg():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "unknown"


def brisk_bench(a, model):
    out = subprocess.run([a.brisk, "bench", "-m", model, "-p", str(a.p), "-n", str(a.n), "-t",
                          str(a.t), "-r", str(a.r), "--json"], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"brisk bench failed on {model}: {out.stderr.strip()}")
    j = json.loads(out.stdout)
    return {"pp": j["pp"]["median_tps"] if "pp" in j else None,
            "tg": j["tg"]["median_tps"] if "tg" in j else None,
            "mbu": j.get("mbu"), "mbu_ok": j.get("mbu_meaningful", False),
            "bw": j["mem_read_gbs"]}


def peer_bench(a, model):
    out = subprocess.run([a.peer, "bench", model, "-p", str(a.p), "-n", str(a.n), "-t", str(a.t),
                          "-r", str(a.r)], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"peer_llama bench failed on {model}: {out.stderr.strip()[-500:]}")
    res = {"pp": None, "tg": None}
    for line in out.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] in (f"pp{a.p}", f"tg{a.n}"):
            res[parts[0][:2]] = float(parts[1])
    return res


def ratio(x, y):
    return f"{x / y:.2f}" if x and y else "-"


def fmt(x):
    return f"{x:.2f}" if x is not None else "-"


def compare_models(a):
    print(f"## Models: -p {a.p} -n {a.n} -t {a.t} -r {a.r}, {a.rounds} round(s), tokens/s "
          f"(median)\n")
    print("| model | brisk pp | peer pp | pp ratio | brisk tg | peer tg | tg ratio | brisk MBU "
          "| load avg |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for model in a.models:
        b_runs, p_runs = [], []
        loads = [load_avg()]
        for rnd in range(a.rounds):
            if rnd % 2 == 0:
                b_runs.append(brisk_bench(a, model))
                p_runs.append(peer_bench(a, model))
            else:
                p_runs.append(peer_bench(a, model))
                b_runs.append(brisk_bench(a, model))
        loads.append(load_avg())

        def med(runs, key):
            v = [r[key] for r in runs if r[key] is not None]
            return statistics.median(v) if v else None

        bp, bt, pp, pt = med(b_runs, "pp"), med(b_runs, "tg"), med(p_runs, "pp"), med(p_runs, "tg")
        mbu = med(b_runs, "mbu")
        mbu_s = f"{100 * mbu:.0f}%" if mbu is not None else "-"
        if mbu is not None and not b_runs[0]["mbu_ok"]:
            mbu_s += " (in cache)"
        print(f"| {os.path.basename(model)} | {fmt(bp)} | {fmt(pp)} | {ratio(bp, pp)} | {fmt(bt)} "
              f"| {fmt(pt)} | {ratio(bt, pt)} | {mbu_s} | {loads[0]} -> {loads[1]} |", flush=True)
    print()


def peer_tokenizer(pylib):
    """llama_tokenize from the llama_cpp package, or None (with the reason)."""
    # Only the low-level ctypes module: the package's __init__ also imports
    # the high-level API and its dependencies (diskcache, jinja2, numpy), so
    # stand in an empty package whose path points at the real one.
    pkg_dir = os.path.join(pylib or "", "llama_cpp")
    if not os.path.exists(os.path.join(pkg_dir, "llama_cpp.py")):
        return None, f"no llama_cpp package under {pylib} (setup.sh's PyPI route builds it)"
    pkg = types.ModuleType("llama_cpp")
    pkg.__path__ = [pkg_dir]
    sys.modules["llama_cpp"] = pkg
    try:
        lc = importlib.import_module("llama_cpp.llama_cpp")
    except Exception as e:  # a missing dependency or library
        return None, f"llama_cpp.llama_cpp not importable ({e})"
    return lc, None


def split_paragraphs(text):
    """Pieces up to and including each blank line, as brisk's --paragraphs."""
    pieces, pos = [], 0
    while True:
        end = text.find(b"\n\n", pos)
        end = len(text) if end < 0 else end + 2
        pieces.append(text[pos:end])
        pos = end
        if pos >= len(text):
            return pieces


def peer_tokenize_mbs(lc, vocab_path, text, reps, paragraphs):
    params = lc.llama_model_default_params()
    params.vocab_only = True
    model = lc.llama_model_load_from_file(vocab_path.encode(), params)
    if not model:
        raise RuntimeError(f"llama.cpp could not load {vocab_path}")
    vocab = lc.llama_model_get_vocab(model)
    pieces = split_paragraphs(text) if paragraphs else [text]
    cap = max(len(p) for p in pieces) + 16
    toks = (lc.llama_token * cap)()
    tok = lc.llama_tokenize

    def run():
        total = 0
        for p in pieces:
            n = tok(vocab, p, len(p), toks, cap, True, False)
            if n < 0:
                raise RuntimeError(f"llama_tokenize needs {-n} tokens")
            total += n
        return total

    n = run()  # warm-up
    rates = []
    for _ in range(reps):
        t0 = time.perf_counter()
        run()
        rates.append(len(text) / (time.perf_counter() - t0) / 1e6)
    lc.llama_model_free(model)
    return statistics.median(rates), n


def compare_tokenizers(a):
    text_path = a.text
    if not text_path:
        text_path = "/tmp/brisk-bench-text-4mb.txt"
        subprocess.run([sys.executable, os.path.join(HERE, "make_text.py"), text_path, "--mb", "4"],
                       check=True)
    with open(text_path, "rb") as f:
        text = f.read()
    lc, why = peer_tokenizer(a.pylib)
    if lc is not None:
        lc.llama_backend_init()
        # Silence llama.cpp's loading log (the callback must stay referenced).
        a.quiet_log = lc.llama_log_callback(lambda level, text, user: None)
        lc.llama_log_set(a.quiet_log, None)
    print(f"## Tokenizers: {len(text)} bytes of {os.path.basename(text_path)}, MB/s (median of "
          f"{a.r}), BOS added\n")
    if why:
        print(f"(peer skipped: {why})\n")
    print("| vocab | type | calls | brisk MB/s | peer MB/s | ratio | brisk tokens | peer tokens "
          "| load avg |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---|")
    for vocab in a.tokenize:
        for paragraphs in (False, True):
            load = load_avg()
            cmd = [a.brisk, "bench", "--tokenize", vocab, text_path, "-r", str(a.r), "--json"]
            out = subprocess.run(cmd + (["--paragraphs"] if paragraphs else []),
                                 capture_output=True, text=True)
            if out.returncode != 0:
                raise RuntimeError(f"brisk bench --tokenize failed: {out.stderr.strip()}")
            j = json.loads(out.stdout)
            p_mbs, p_n = ((None, None) if lc is None else
                          peer_tokenize_mbs(lc, vocab, text, a.r, paragraphs))
            print(f"| {os.path.basename(vocab)} | {j['tokenizer']} | {j['pieces']} | "
                  f"{j['median_mbs']:.2f} | {fmt(p_mbs)} | {ratio(j['median_mbs'], p_mbs)} | "
                  f"{j['tokens']} | {p_n if p_n is not None else '-'} | {load} |", flush=True)
    print()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--brisk", required=True)
    ap.add_argument("--peer", required=True)
    ap.add_argument("--pylib", default=None)
    ap.add_argument("-p", type=int, default=512)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("-t", type=int, default=2)
    ap.add_argument("-r", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--tokenize", nargs="*", default=[])
    ap.add_argument("--text", default=None)
    ap.add_argument("models", nargs="*")
    a = ap.parse_args()
    print(f"machine: {os.cpu_count()} CPUs; load average at start {load_avg()}\n")
    if a.models:
        compare_models(a)
    if a.tokenize:
        compare_tokenizers(a)


if __name__ == "__main__":
    main()
