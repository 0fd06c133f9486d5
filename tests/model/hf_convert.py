#!/usr/bin/env python3
"""Converts Hugging Face folders to GGUF with llama.cpp's own converter.

Usage: hf_convert.py LLAMA_CPP_DIR OUT_DIR [novocab:]FOLDER...

Runs convert_hf_to_gguf.py from the llama.cpp sources in LLAMA_CPP_DIR (its
own gguf-py, as the script does by default) on each FOLDER, in one process
so that torch is imported once, writing OUT_DIR/<folder name>.gguf as F32.
Prints "ok NAME" or "FAIL NAME: reason" per folder; exits 0 once all were
tried.

Two things of the test folders are not what the converter expects, and
neither changes a weight or a hyper-parameter:

- the random-weight decoder folders carry no tokenizer (their test feeds
  token ids); for a folder named as novocab:FOLDER the converter's set_vocab
  is skipped, so the GGUF has no tokenizer.ggml.* keys;
- a tokenizer.json the converter does not know by its hash (the tiny test
  BERT's) makes get_vocab_base_pre raise; it then names the pre-tokenizer
  "default" (WordPiece vocabularies ignore the name, in llama.cpp and brisk).
"""
import contextlib
import io
import os
import sys
import traceback


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    src, out_dir, folders = sys.argv[1], sys.argv[2], sys.argv[3:]
    sys.path.insert(0, src)
    os.makedirs(out_dir, exist_ok=True)
    import logging

    logging.disable(logging.WARNING)  # the converter's chatter
    import convert_hf_to_gguf as conv  # noqa: E402  (imports torch and its gguf-py)
    from conversion import base

    orig_pre = base.TextModel.get_vocab_base_pre

    def vocab_pre(self, tokenizer):
        try:
            return orig_pre(self, tokenizer)
        except NotImplementedError:
            return "default"

    base.TextModel.get_vocab_base_pre = vocab_pre
    orig_get_class = conv.get_model_class

    def get_class(name, mmproj=False):
        cls = orig_get_class(name, mmproj)
        if not get_class.novocab:
            return cls
        return type(cls.__name__, (cls,), {"set_vocab": lambda self: None,
                                           "model_arch": cls.model_arch})

    conv.get_model_class = get_class
    for folder in folders:
        get_class.novocab = folder.startswith("novocab:")
        folder = folder[len("novocab:"):] if get_class.novocab else folder
        name = os.path.basename(os.path.normpath(folder))
        out = os.path.join(out_dir, name + ".gguf")
        sys.argv = ["convert_hf_to_gguf.py", folder, "--outfile", out, "--outtype", "f32"]
        log = io.StringIO()
        try:
            with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
                conv.main()
            print(f"ok {name}", flush=True)
        except BaseException as e:  # SystemExit included: the converter exits on errors
            why = traceback.format_exception_only(type(e), e)[-1].strip()
            tail = " | ".join(log.getvalue().strip().splitlines()[-3:])
            print(f"FAIL {name}: {why}{' (' + tail + ')' if tail else ''}", flush=True)
            with contextlib.suppress(OSError):
                os.remove(out)


if __name__ == "__main__":
    main()
