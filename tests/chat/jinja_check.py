"""Cross-check: brisk's chatml rendering against jinja2 rendering the real
SmolLM2-135M-Instruct template read from the model file (never copied).
Usage: jinja_check.py CHAT_DUMP. Exit 77 (skip) without jinja2, gguf or the model."""
import os
import subprocess
import sys

try:
    import gguf
    import jinja2
except ImportError as e:
    print(f"SKIP: {e}")
    sys.exit(77)

cache = os.environ.get("BRISK_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "brisk")
path = os.path.join(cache, "SmolLM2-135M-Instruct.Q4_1.gguf")
if not os.path.exists(path):
    print(f"SKIP: {path} is absent (brisk run fetches it)")
    sys.exit(77)
field = gguf.GGUFReader(path).fields["tokenizer.chat_template"]
template = jinja2.Environment().from_string(bytes(field.parts[field.data[0]]).decode())

# Conversations that start with a system message: SmolLM2's template adds a
# model-specific default system prompt otherwise, which brisk does not.
convs = [
    [("system", "You are terse."), ("user", "Hello")],
    [("system", "S"), ("user", " a\n b "), ("assistant", " Hi! "), ("user", "ünïcödé <tag>")],
    [("system", ""), ("user", "x"), ("assistant", "y"), ("system", "late"), ("user", "z")],
]
for conv in convs:
    for gen in (0, 1):
        args = [sys.argv[1], path, str(gen)] + [s for pair in conv for s in pair]
        got = subprocess.run(args, capture_output=True, check=True).stdout.decode()
        msgs = [{"role": r, "content": c} for r, c in conv]
        want = template.render(messages=msgs, add_generation_prompt=bool(gen))
        if got != want:
            sys.exit(f"mismatch for {conv} gen={gen}:\n got  {got!r}\n want {want!r}")
print(f"OK: {len(convs) * 2} renderings match jinja2")
