#!/usr/bin/env bash
# brisk against the peer (llama.cpp) on the same model files, in one run:
#
#   bench/compare_peer.sh MODEL...         pp / tg tokens/s of both, brisk/peer
#   bench/compare_peer.sh --tokenizers     tokenizer MB/s of both (SPM and BPE)
#   bench/compare_peer.sh --tokenizers MODEL...   both
#
# Knobs (environment): P=512 N=128 T=2 R=3 ROUNDS=1; BRISK (the brisk binary,
# default build/tools/brisk); PEER (peer_llama; default
# $BRISK_PEER_CACHE/peer_llama, cache /tmp/brisk-peer); TEXT (the tokenizer
# input; default 4 MB from bench/make_text.py); VOCABS (tokenizer files).
# Exits 0 with a message when the peer is not set up: it is never built
# from here (that is ../shared/peer/setup.sh, minutes to build).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
shared="$root/../shared"
cache="${BRISK_PEER_CACHE:-/tmp/brisk-peer}"
BRISK="${BRISK:-$root/build/tools/brisk}"
PEER="${PEER:-$cache/peer_llama}"

tokenizers=0
if [ "${1:-}" = "--tokenizers" ]; then
  tokenizers=1
  shift
fi
if [ $# -eq 0 ] && [ $tokenizers -eq 0 ]; then
  sed -n '2,12p' "$0" >&2
  exit 2
fi
if [ ! -x "$BRISK" ]; then
  echo "compare_peer: no brisk binary at $BRISK (build it, or set BRISK)" >&2
  exit 1
fi
if [ ! -x "$PEER" ]; then
  echo "compare_peer: SKIP: the peer is not set up ($PEER missing);" \
    "run 'bash $shared/peer/setup.sh' first, or set PEER" >&2
  exit 0
fi
echo "peer: $PEER ($(cat "$cache/peer_llama.build" 2>/dev/null | head -1 || echo 'build unknown'))"
echo "brisk: $BRISK ($("$BRISK" version | head -1))"

args=(--brisk "$BRISK" --peer "$PEER" --pylib "$cache/pylib"
  -p "${P:-512}" -n "${N:-128}" -t "${T:-2}" -r "${R:-3}" --rounds "${ROUNDS:-1}")
if [ $tokenizers -eq 1 ]; then
  vocabs=${VOCABS:-"$shared/tokenizer/ggml-vocab-llama-spm.gguf $shared/tokenizer/ggml-vocab-llama-bpe.gguf"}
  # shellcheck disable=SC2206
  args+=(--tokenize $vocabs)
  [ -n "${TEXT:-}" ] && args+=(--text "$TEXT")
fi
exec python3 "$root/bench/compare_peer.py" "${args[@]}" -- "$@"
