#!/usr/bin/env bash
# Cross-builds brisk for aarch64 Linux (gcc-aarch64-linux-gnu) and runs the
# whole test suite under qemu-user: `tools/cross-aarch64.sh [BUILD_DIR]
# [meson test arguments...]` (default build-aarch64; e.g. `... build-aarch64
# backend_matmul_neon` runs one test).
#
# What it needs, installed here when missing (as root; Debian/Ubuntu):
# the cross compiler, qemu-user, and the arm64 builds of the libraries brisk
# and its tests link (cmocka, json-c, pcre2, libmicrohttpd, libedit) as
# Debian multiarch packages, which takes `dpkg --add-architecture arm64`.
# Nothing is built from source or vendored. The tests run through the cross
# file's exe_wrapper (qemu-aarch64, with the multiarch arm64 libc as the
# loader; the cross file says why not the cross sysroot's); the Python CLI
# tests run the CLI through the same emulator (tools/meson.build). The
# language-binding suites are skipped: their interpreters are the build
# machine's. qemu's default CPU ("max") has DotProd and I8MM, so the suite
# runs at level i8mm; backend_matmul_neon also runs the plain NEON kernels.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build-aarch64}
shift || true

pkgs=(gcc-aarch64-linux-gnu g++-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user)
arm=(libcmocka-dev:arm64 libjson-c-dev:arm64 libpcre2-dev:arm64 libmicrohttpd-dev:arm64
     libedit-dev:arm64)
missing=()
for p in "${pkgs[@]}" "${arm[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "the aarch64 cross build needs: ${missing[*]} (run as root or install them)" >&2
    exit 1
  fi
  echo "installing: ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  dpkg --print-foreign-architectures | grep -qx arm64 || dpkg --add-architecture arm64
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
fi

start=$(date +%s)
[ -f "$dir/build.ninja" ] ||
  meson setup "$dir" --cross-file tools/cross/aarch64-linux-gnu.ini -Dcuda=disabled -Dfuzz=disabled
ninja -C "$dir"
built=$(date +%s)
# The Python-driven tests start the cross-built programs themselves:
# tools/cross/pyshim (sitecustomize) runs those through the exe_wrapper.
# Under qemu everything runs several times slower: meson's timeouts and the
# tests' own time limits (examples/smoke_test.py) scale by one factor.
export BRISK_TEST_TIME_SCALE=${BRISK_TEST_TIME_SCALE:-4}
PYTHONPATH="$PWD/tools/cross/pyshim${PYTHONPATH:+:$PYTHONPATH}" \
  meson test -C "$dir" --print-errorlogs --timeout-multiplier "$BRISK_TEST_TIME_SCALE" "$@"
echo "aarch64: build $((built - start)) s, tests under qemu $(( $(date +%s) - built )) s"
