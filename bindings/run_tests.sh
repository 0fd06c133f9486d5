#!/usr/bin/env bash
# Runs one binding's own test suite against the libbrisk.so of this build
# (meson passes the paths in the environment, see bindings/meson.build).
# Exit 77 (meson's "skipped") with a message when the toolchain is missing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
lang=$1
case "$lang" in
python)
  command -v python3 >/dev/null || { echo "SKIP: python3 is not installed"; exit 77; }
  exec python3 -m unittest discover -s "$here/python/tests" -v
  ;;
rust)
  command -v cargo >/dev/null || { echo "SKIP: cargo is not installed (rustup or Debian's cargo)"; exit 77; }
  export CARGO_TARGET_DIR="$BRISK_BINDINGS_BUILD/rust-target" BRISK_MODEL="$BRISK_TEST_MODEL"
  cd "$here/rust"
  exec cargo test --offline --quiet
  ;;
go)
  command -v go >/dev/null || { echo "SKIP: go is not installed (Debian's golang-go)"; exit 77; }
  export GOCACHE="$BRISK_BINDINGS_BUILD/go-cache" GOPATH="$BRISK_BINDINGS_BUILD/go-path"
  export GOFLAGS=-mod=mod GOTOOLCHAIN=local GOPROXY=off
  # The go build cache does not track headers outside the module: the
  # header's hash in the flags makes a changed brisk.h rebuild the package.
  hdr=$(sha256sum "$BRISK_INCLUDE_DIR/brisk.h" | cut -c1-16)
  export CGO_CFLAGS="-I$BRISK_INCLUDE_DIR -DBRISK_H_SHA=$hdr" CGO_LDFLAGS="-L$BRISK_LIB_DIR -Wl,-rpath,$BRISK_LIB_DIR"
  cd "$here/go"
  go vet ./...
  exec go test -count=1 -v ./...
  ;;
*)
  echo "unknown binding $lang" >&2
  exit 2
  ;;
esac
