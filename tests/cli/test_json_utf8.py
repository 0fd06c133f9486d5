#!/usr/bin/env python3
"""JSON from the CLI is valid UTF-8 even where the text is not: `tokenize
--json` on every vocabulary in ../shared/tokenizer (byte-level BPE pieces
are often part of a character) over its test-vector text. The output must
decode as strict UTF-8 and parse; each piece must be its exact bytes
("bytes") decoded the way Python's own decoder replaces invalid bytes (one
U+FFFD per maximal invalid subpart, as Unicode recommends).
Usage: test_json_utf8.py BRISK_BINARY SHARED_DIR. Exit 77 without ../shared."""
import glob
import json
import os
import subprocess
import sys

brisk, shared = sys.argv[1], sys.argv[2]
vocabs = sorted(glob.glob(os.path.join(shared, "tokenizer", "ggml-vocab-*.gguf")))
if not vocabs:
    print("SKIP: ../shared/tokenizer is absent")
    sys.exit(77)
split_pieces = 0
for vocab in vocabs:
    inp = vocab + ".inp"
    if not os.path.exists(inp):
        continue
    p = subprocess.run([brisk, "tokenize", vocab, "--file", inp, "--json"], capture_output=True,
                       timeout=120)
    assert p.returncode == 0, (vocab, p.stderr)
    text = p.stdout.decode("utf-8")  # strict: raises on any invalid byte
    j = json.loads(text)
    assert len(j["ids"]) == len(j["pieces"]) == len(j["bytes"]), vocab
    for piece, raw in zip(j["pieces"], j["bytes"]):
        assert all(0 <= b < 256 for b in raw), raw
        want = bytes(raw).decode("utf-8", errors="replace")
        assert piece == want, (vocab, piece, raw, want)
        split_pieces += "\ufffd" in want
# The vectors include CJK and emoji text, so byte-level vocabularies split
# characters: the replacement path is exercised, not only clean text.
assert split_pieces > 0, "no piece was part of a character: the check proved nothing"
print(f"json utf-8: {len(vocabs)} vocabularies, {split_pieces} partial-character pieces, all valid")
