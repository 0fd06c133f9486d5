#!/usr/bin/env bash
# MPI as a plugin: libbrisk links no MPI library (it opens libbrisk-mpi.so
# with dlopen when a process joins an MPI world); the plugin exports only
# its entry point and needs no brisk symbol it cannot get (brisk's own
# calls inside it go to the host table), and it is what links libmpi.
# Usage: check_mpi_plugin.sh LIBBRISK.so [LIBBRISK_MPI.so]
set -euo pipefail
core=$1 plugin=${2:-}
fail=0
core_needed=$(objdump -p "$core" | awk '$1 == "NEEDED" {print $2}')
echo "libbrisk needs:" $core_needed
if grep -Eqi 'mpi|open-pal|open-rte|pmix' <<<"$core_needed"; then
  echo "libbrisk links an MPI library:" $core_needed; fail=1
fi
if nm -D --undefined-only "$core" | awk '{print $2}' | grep -q '^MPI_'; then
  echo "libbrisk calls MPI directly"; fail=1
fi
if [ -n "$plugin" ]; then
  exported=$(nm -D --defined-only "$plugin" | awk '$2 ~ /^[TDBRVW]$/ {print $3}')
  if [ "$exported" != "brisk_mpi_plugin_entry_v1" ]; then
    echo "the MPI plugin exports more than its entry point:" $exported; fail=1
  fi
  undefined=$(nm -D --undefined-only "$plugin" | awk '{print $2}' | grep '^brisk_' || true)
  if [ -n "$undefined" ]; then
    echo "the MPI plugin needs brisk symbols it cannot get (dlopen fails):" $undefined; fail=1
  fi
  plugin_needed=$(objdump -p "$plugin" | awk '$1 == "NEEDED" {print $2}')
  echo "libbrisk-mpi needs:" $plugin_needed
  grep -q 'libmpi' <<<"$plugin_needed" || { echo "the MPI plugin does not link libmpi"; fail=1; }
fi
[ $fail -eq 0 ] && echo "ok"
exit $fail
