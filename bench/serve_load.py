#!/usr/bin/env python3
"""Bounded load test of OpenAI-compatible servers on loopback, side by side.

Starts `brisk serve` (and, with --llama-server, llama.cpp's llama-server) on
the same GGUF, sends each the same closed-loop load (-c clients, -n streaming
/v1/completions requests in all, greedy, fixed output length), and prints
per server: requests/s, output tokens/s, client-side TTFT and TPOT
p50/p90/p99, goodput (requests/s meeting --slo-ttft-ms and --slo-tpot-ms),
and the ratios brisk / llama-server. For brisk it also reads the in-process
TPOT of the same requests from /metrics and prints the HTTP overhead per
token (client TPOT / in-process TPOT - 1).

  python3 bench/serve_load.py --model MODEL.gguf [--llama-server PATH] [-c 8] [-n 64]
      [--max-tokens 64] [--prompt-words 64] [-t 2] [--slo-ttft-ms 500] [--slo-tpot-ms 50] [--json]

Only the standard library; a run takes -n requests per server, nothing else.
"""
import argparse
import http.client
import json
import math
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_ready(port, proc, timeout=300):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit(f"server exited with {proc.returncode}")
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/health")
            r = c.getresponse()
            r.read()
            if r.status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    sys.exit("server did not become ready")


def nearest_rank(v, p):
    if not v:
        return 0.0
    v = sorted(v)
    return v[min(max(math.ceil(p / 100 * len(v)), 1), len(v)) - 1]


def one_request(port, prompt, max_tokens):
    """Streams one completion; returns (ttft_s, tpot_s or None, tokens, e2e_s)."""
    body = json.dumps({"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": True,
                       "ignore_eos": True, "stream_options": {"include_usage": True}})
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    t0 = time.perf_counter()
    c.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        raise RuntimeError(f"HTTP {r.status}: {r.read()[:200]}")
    first = last = None
    tokens = None
    for line in r:
        line = line.strip()
        if not line.startswith(b"data: ") or line == b"data: [DONE]":
            continue
        ev = json.loads(line[6:])
        if ev.get("usage"):
            tokens = ev["usage"]["completion_tokens"]
        for ch in ev.get("choices") or []:
            if ch.get("text"):
                now = time.perf_counter()
                first = first or now
                last = now
    c.close()
    end = time.perf_counter()
    if first is None:
        raise RuntimeError("no text streamed")
    tokens = tokens or max_tokens
    tpot = (last - first) / (tokens - 1) if tokens > 1 else None
    return first - t0, tpot, tokens, end - t0


def metrics(port):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            k, v = line.rsplit(" ", 1)
            out[k] = float(v)
    return out


def run_load(port, prompts, clients, max_tokens):
    results, lock, it = [], threading.Lock(), iter(prompts)

    def worker():
        while True:
            with lock:
                p = next(it, None)
            if p is None:
                return
            res = one_request(port, p, max_tokens)
            with lock:
                results.append(res)

    one_request(port, prompts[0], 2)  # warm-up
    t0 = time.perf_counter()
    ths = [threading.Thread(target=worker) for _ in range(clients)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    return results, time.perf_counter() - t0


def summarize(results, wall, slo_ttft, slo_tpot):
    ttft = [r[0] * 1e3 for r in results]
    tpot = [r[1] * 1e3 for r in results if r[1] is not None]
    good = sum(1 for r in results if r[0] * 1e3 <= slo_ttft and (r[1] is None or r[1] * 1e3 <= slo_tpot))
    return {"requests": len(results), "wall_s": wall, "requests_per_s": len(results) / wall,
            "output_tokens_per_s": sum(r[2] for r in results) / wall,
            "goodput_requests_per_s": good / wall, "good_fraction": good / len(results),
            "ttft_ms": {p: nearest_rank(ttft, int(p[1:])) for p in ("p50", "p90", "p99")},
            "tpot_ms": {p: nearest_rank(tpot, int(p[1:])) for p in ("p50", "p90", "p99")},
            "tpot_mean_ms": sum(tpot) / len(tpot) if tpot else 0.0}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--brisk", default=os.path.join(HERE, "..", "build", "tools", "brisk"))
    ap.add_argument("--llama-server", default=None, help="path, or 'auto' for ../shared/peer/server.sh")
    ap.add_argument("-c", "--clients", type=int, default=8)
    ap.add_argument("-n", "--requests", type=int, default=64)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--prompt-words", type=int, default=64)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--ctx", type=int, default=512, help="context per client")
    ap.add_argument("--slo-ttft-ms", type=float, default=500)
    ap.add_argument("--slo-tpot-ms", type=float, default=50)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    rnd = random.Random(a.seed)
    words = "the a little girl dog park sun ball happy big red tree house went saw played friend mom".split()
    prompts = [" ".join(rnd.choice(words) for _ in range(a.prompt_words)) for _ in range(a.requests)]
    servers = [("brisk", [a.brisk, "serve", "-m", a.model, "--port", "{port}", "-t", str(a.threads),
                          "--max-running", str(a.clients), "--kv-tokens", str(a.clients * a.ctx),
                          "--ctx-size", str(a.ctx)])]
    peer = a.llama_server
    if peer == "auto":
        peer = subprocess.run(["bash", os.path.join(HERE, "..", "..", "shared", "peer", "server.sh")],
                              capture_output=True, text=True).stdout.strip().splitlines()[-1]
    if peer:
        servers.append(("llama-server", [peer, "-m", a.model, "--host", "127.0.0.1", "--port", "{port}",
                                         "-t", str(a.threads), "-np", str(a.clients),
                                         "-c", str(a.clients * a.ctx)]))
    load = open("/proc/loadavg").read().split()[:3]
    report = {"model": os.path.basename(a.model), "clients": a.clients, "requests": a.requests,
              "max_tokens": a.max_tokens, "prompt_words": a.prompt_words, "threads": a.threads,
              "slo_ttft_ms": a.slo_ttft_ms, "slo_tpot_ms": a.slo_tpot_ms, "loadavg_before": load, "servers": {}}
    for name, cmd in servers:
        port = free_port()
        cmd = [x.replace("{port}", str(port)) for x in cmd]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_ready(port, proc)
            before = metrics(port) if name == "brisk" else None
            results, wall = run_load(port, prompts, a.clients, a.max_tokens)
            s = summarize(results, wall, a.slo_ttft_ms, a.slo_tpot_ms)
            if before is not None:
                after = metrics(port)
                k = "brisk_time_per_output_token_seconds"
                n = after[k + "_count"] - before[k + "_count"]
                inproc = (after[k + "_sum"] - before[k + "_sum"]) / n * 1e3 if n else 0
                s["inprocess_tpot_mean_ms"] = inproc
                s["http_overhead_per_token"] = s["tpot_mean_ms"] / inproc - 1 if inproc else None
            report["servers"][name] = s
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
    report["loadavg_after"] = open("/proc/loadavg").read().split()[:3]
    b, l = report["servers"].get("brisk"), report["servers"].get("llama-server")
    if b and l:
        report["ratios_brisk_over_llama_server"] = {
            k: (b[k] / l[k] if l[k] else None) for k in ("requests_per_s", "output_tokens_per_s",
                                                          "goodput_requests_per_s")}
    if a.json:
        print(json.dumps(report, indent=1))
        return
    print(f"model {report['model']}: {a.clients} clients, {a.requests} requests, {a.prompt_words}-word prompts, "
          f"{a.max_tokens} output tokens, -t {a.threads}; load average {' '.join(load)} -> "
          f"{' '.join(report['loadavg_after'])}")
    print(f"{'server':<13} {'req/s':>7} {'tok/s':>8} {'goodput':>8} {'TTFT p50/p90/p99 ms':>24} "
          f"{'TPOT p50/p90/p99 ms':>22}")
    for name, s in report["servers"].items():
        t, p = s["ttft_ms"], s["tpot_ms"]
        print(f"{name:<13} {s['requests_per_s']:7.2f} {s['output_tokens_per_s']:8.1f} "
              f"{s['goodput_requests_per_s']:8.2f} {t['p50']:8.1f}/{t['p90']:7.1f}/{t['p99']:7.1f} "
              f"{p['p50']:6.2f}/{p['p90']:6.2f}/{p['p99']:6.2f}")
    if b and "inprocess_tpot_mean_ms" in b:
        print(f"brisk TPOT mean: client {b['tpot_mean_ms']:.3f} ms, in-process {b['inprocess_tpot_mean_ms']:.3f} ms: "
              f"HTTP overhead per token {100 * (b['http_overhead_per_token'] or 0):+.1f}%")
    if "ratios_brisk_over_llama_server" in report:
        r = report["ratios_brisk_over_llama_server"]
        print("brisk / llama-server: " + ", ".join(f"{k} {v:.2f}x" for k, v in r.items() if v))


if __name__ == "__main__":
    main()
