#!/bin/sh
# Usage: check_symbols.sh NM LIBRARY — fails if LIBRARY exports a defined
# symbol whose name does not start with brisk_.
nm="$1"; lib="$2"
syms=$("$nm" -D --defined-only "$lib" | awk '$2 ~ /^[A-Z]$/ {print $3}') || exit 1
[ -n "$syms" ] || { echo "no exported symbols found in $lib"; exit 1; }
bad=$(printf '%s\n' "$syms" | grep -v '^brisk_' || true)
if [ -n "$bad" ]; then
  echo "symbols exported without the brisk_ prefix:"; printf '%s\n' "$bad"; exit 1
fi
echo "$(printf '%s\n' "$syms" | wc -l) exported symbols, all brisk_*"
