#!/usr/bin/env bash
# Writes a man page from the program's own --help text (help2man), so the
# pages never say other than the program: `tools/man.sh BRISK OUT.1` for
# brisk itself, `tools/man.sh BRISK OUT.1 CMD "what CMD does"` for a
# subcommand (page brisk-CMD). Run by the build (tools/meson.build).
set -euo pipefail
brisk=$1 out=$2 cmd=${3:-} name=${4:-"run LLMs on the brisk library"}
if [ -z "$cmd" ]; then
  help2man --no-info --name="$name" --output="$out" "$brisk"
  exit 0
fi
tmp="$out.tmp"
help2man --no-info --name="$name" --help-option="$cmd --help" \
  --version-option="$cmd --version" --output="$tmp" "$brisk"
# help2man names the page after the program; this one is brisk-CMD.
upper=$(printf '%s' "brisk-$cmd" | tr '[:lower:]' '[:upper:]')
sed -e "s/^\.TH BRISK /.TH $upper /" -e "s/^brisk \\\\- /brisk-$cmd \\\\- /" "$tmp" >"$out"
rm -f "$tmp"
