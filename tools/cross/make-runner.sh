#!/bin/sh
# Writes OUT, a script that runs PROGRAM through RUNNER (an emulator such as
# qemu-aarch64 with its options) with the script's arguments: how scripts
# and tests of a cross build run the CLI. `make-runner.sh OUT PROGRAM RUNNER...`
set -eu
out=$1 prog=$2
shift 2
{
  echo '#!/bin/sh'
  printf 'exec'
  for a in "$@" "$prog"; do printf " '%s'" "$a"; done
  echo ' "$@"'
} >"$out.tmp"
chmod +x "$out.tmp"
mv "$out.tmp" "$out"
