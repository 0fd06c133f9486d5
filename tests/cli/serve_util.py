"""Shared by the brisk serve tests: start a server on a free loopback port, talk to it."""
import http.client
import json
import re
import signal
import subprocess
import sys
import time

import openai


class Server:
    """brisk serve on a free loopback port; stop() sends SIGTERM and checks exit 0."""

    def __init__(self, brisk, model, *args, key=None):
        cmd = [brisk, "serve", "-m", model, "--port", "0", "-t", "1", *args]
        if key:
            cmd += ["--api-key", key]
        self.p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.port, self.key = None, key
        deadline = time.time() + 120
        while time.time() < deadline:
            line = self.p.stdout.readline()
            if not line:
                break
            m = re.match(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                break
        if not self.port:
            self.p.kill()
            sys.exit(f"brisk serve did not start: {self.p.stderr.read()}")
        self.client = openai.OpenAI(base_url=f"http://127.0.0.1:{self.port}/v1", api_key=key or "none",
                                    max_retries=0, timeout=120)

    def raw(self, method, path, body=None, headers=None, key=""):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        h = dict(headers or {})
        key = self.key if key == "" else key
        if key:
            h["Authorization"] = "Bearer " + key
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, dict(r.getheaders()), data

    def metrics(self):
        status, _, data = self.raw("GET", "/metrics")
        assert status == 200, (status, data)
        out = {}
        for line in data.decode().splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                out[name] = float(value)
        return out

    def alive(self):
        status, _, data = self.raw("GET", "/health", key=None)
        return status == 200 and json.loads(data) == {"status": "ok"}

    def stop(self, timeout=30):
        self.p.send_signal(signal.SIGTERM)
        try:
            rc = self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            sys.exit("brisk serve did not exit after SIGTERM")
        err = self.p.stderr.read()
        assert rc == 0, (rc, err)
        return err
