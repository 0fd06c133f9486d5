#!/usr/bin/env bash
# Compares the exported ABI of BUILD_DIR/libbrisk.so with the committed
# baseline abi/libbrisk.abi (libabigail). `tools/abi-check.sh BUILD_DIR update`
# rewrites the baseline: do that in the commit that changes the ABI on
# purpose, with a CHANGELOG line.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
lib=$(readlink -f "$dir/libbrisk.so")
if [ "${2:-}" = update ]; then
  abidw --no-corpus-path --headers-dir include --out-file abi/libbrisk.abi "$lib"
  echo "abi/libbrisk.abi updated"
  exit 0
fi
abidiff --headers-dir2 include abi/libbrisk.abi "$lib" && echo "ABI matches abi/libbrisk.abi"
