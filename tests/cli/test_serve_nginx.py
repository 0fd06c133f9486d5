#!/usr/bin/env python3
"""Scale-out: two brisk serve replicas behind nginx (least connections) on
loopback, driven by the official openai client through nginx. Answers equal
a replica's own; concurrent requests reach both replicas; a client that drops
a stream through nginx cancels the request on its replica; the API key is
checked by the replicas behind the proxy.
Usage: test_serve_nginx.py BRISK_BINARY SHARED_DIR. Exit 77 (skip) without
../shared, nginx or the openai package."""
import concurrent.futures
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

brisk, shared = sys.argv[1], sys.argv[2]
stories = os.path.join(shared, "models", "stories260K.gguf")
if not os.path.exists(stories):
    print("SKIP: ../shared models are absent")
    sys.exit(77)
nginx = shutil.which("nginx") or ("/usr/sbin/nginx" if os.access("/usr/sbin/nginx", os.X_OK) else None)
if not nginx:
    print("SKIP: nginx is not installed (tools/deps.sh installs nginx-light)")
    sys.exit(77)
try:
    import openai
except ImportError:
    print("SKIP: the openai Python package is not installed (tools/deps.sh installs it)")
    sys.exit(77)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_util import Server  # noqa: E402

KEY = "sk-nginx-test"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


replicas = [Server(brisk, stories, "--kv-tokens", "8192", "--ctx-size", "4096", "--chat-template", "chatml",
                   key=KEY) for _ in range(2)]
tmp = tempfile.mkdtemp(prefix="brisk-nginx-")
proxy = None
try:
    port = free_port()
    upstreams = "\n".join(f"        server 127.0.0.1:{r.port};" for r in replicas)
    conf = os.path.join(tmp, "nginx.conf")
    with open(conf, "w") as f:
        f.write(f"""daemon off;
master_process off;
worker_processes 1;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    upstream brisk {{
        least_conn;
{upstreams}
        keepalive 16;
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://brisk;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_read_timeout 600s;
            client_max_body_size 8m;
        }}
    }}
}}
""")
    proxy = subprocess.Popen([nginx, "-p", tmp, "-c", conf], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if proxy.poll() is not None:
                sys.exit(f"nginx exited: {proxy.stderr.read().decode()}")
            time.sleep(0.1)
    else:
        sys.exit("nginx did not start")
    base = f"http://127.0.0.1:{port}/v1"
    client = openai.OpenAI(base_url=base, api_key=KEY, max_retries=0, timeout=120)

    # The same answers through nginx as from a replica directly, streaming or not.
    prompts = ["Once upon a time", "The little dog", "Lily wanted to", "One day", "The sun was", "A big red ball"]
    direct = [replicas[0].client.completions.create(model="stories260K", prompt=p, max_tokens=24,
                                                    temperature=0).choices[0].text for p in prompts]
    for p, want in zip(prompts, direct):
        r = client.completions.create(model="stories260K", prompt=p, max_tokens=24, temperature=0)
        assert r.choices[0].text == want, (p, r, want)
        got = "".join(ch.choices[0].text for ch in client.completions.create(
            model="stories260K", prompt=p, max_tokens=24, temperature=0, stream=True) if ch.choices)
        assert got == want, (p, got, want)
    chat = client.chat.completions.create(model="stories260K", max_tokens=8, temperature=0,
                                          messages=[{"role": "user", "content": "hi"}],
                                          extra_body={"ignore_eos": True})
    assert chat.usage.completion_tokens == 8, chat

    # Concurrent streams spread over both replicas (least connections).
    before = [r.metrics()["brisk_requests_submitted_total"] for r in replicas]

    def one(i):
        cl = openai.OpenAI(base_url=base, api_key=KEY, max_retries=0, timeout=120)
        return "".join(ch.choices[0].text for ch in cl.completions.create(
            model="stories260K", prompt=prompts[i % len(prompts)], max_tokens=24, temperature=0, stream=True)
            if ch.choices)

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        outs = list(pool.map(one, range(32)))
    assert outs == [direct[i % len(prompts)] for i in range(32)]
    after = [r.metrics()["brisk_requests_submitted_total"] for r in replicas]
    assert all(a > b for a, b in zip(after, before)), (before, after)
    assert sum(after) - sum(before) == 32, (before, after)

    # The key is checked behind the proxy.
    try:
        openai.OpenAI(base_url=base, api_key="sk-wrong", max_retries=0).models.list()
        raise AssertionError("expected 401 through nginx")
    except openai.AuthenticationError:
        pass

    # A client dropping its stream at nginx cancels the request on the replica.
    cancelled = [r.metrics()["brisk_requests_cancelled_total"] for r in replicas]
    st = client.completions.create(model="stories260K", prompt=prompts[0], max_tokens=3500, temperature=0,
                                   stream=True, extra_body={"ignore_eos": True})
    next(iter(st))
    st.close()
    deadline = time.time() + 15
    while time.time() < deadline:
        ms = [r.metrics() for r in replicas]
        if sum(m["brisk_requests_cancelled_total"] for m in ms) > sum(cancelled) and \
                all(m["brisk_requests_running"] == 0 for m in ms):
            break
        time.sleep(0.05)
    else:
        raise AssertionError(f"the dropped stream was not cancelled: {ms}")
    print("nginx with two replicas: ok")
finally:
    if proxy:
        proxy.terminate()
        try:
            proxy.wait(10)
        except subprocess.TimeoutExpired:
            proxy.kill()
    for r in replicas:
        r.stop()
    shutil.rmtree(tmp, ignore_errors=True)
