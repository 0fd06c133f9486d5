#!/usr/bin/env bash
# Every C source and header under lib/, include/, tests/, tools/, examples/,
# bench/ and kernels/ is formatted as .clang-format says, except the files
# listed in tests/arch/format_exempt.txt (formatted before this check
# existed). Usage: check_format.sh SOURCE_ROOT. Skips (exit 77) without
# clang-format.
set -euo pipefail
cd "${1:-.}"
if ! command -v clang-format > /dev/null; then
  echo "SKIP: clang-format is not installed"
  exit 77
fi
files=()
while IFS= read -r f; do
  grep -qxF "$f" tests/arch/format_exempt.txt || files+=("$f")
done < <(find lib include tests tools examples bench kernels -type f \
  \( -name '*.c' -o -name '*.h' -o -name '*.cu' \) 2> /dev/null | sort)
# One clang-format for all files; it names each file it would change.
report=$(clang-format --dry-run --Werror "${files[@]}" 2>&1 || true)
bad=$(grep -oE '^[^:]+\.(c|h|cu):[0-9]+:[0-9]+: (error|warning)' <<< "$report" | cut -d: -f1 |
  sort -u || true)
if [ -n "$bad" ]; then
  while IFS= read -r f; do echo "$f is not formatted: run clang-format -i $f"; done <<< "$bad"
  echo "$(wc -l <<< "$bad") of ${#files[@]} files are not formatted"
  exit 1
fi
echo "${#files[@]} files formatted"
