"""Cross-check of tool calls in chat against the families' official templates
(llama.cpp's models/templates in the peer's cache, ../shared/peer/setup.sh;
read there, never copied): brisk_chat_apply_tools must render conversations
with tools, tool calls and tool results byte for byte as jinja2 renders
Qwen2.5-7B-Instruct (chatml), Llama-3.1-8B-Instruct (llama3) and
Mistral-Nemo-Instruct-2407 (mistral-v3-tekken), with transformers' tojson
(json.dumps, keys in order, no ASCII escaping). Then brisk_chat_parse_tool_calls
reads each family's call text back into the same calls, and the GBNF of
brisk_tool_call_grammar compiles. Usage: tools_check.py LIBBRISK.so.
Exit 77 (skip) without jinja2 or the templates."""
import ctypes
import json
import os
import sys

try:
    import jinja2
except ImportError as e:
    print(f"SKIP: {e}")
    sys.exit(77)

cache = os.environ.get("BRISK_PEER_CACHE", "/tmp/brisk-peer")
tdir = None
for rel in ("llama.cpp/models/templates", "pypi/src/vendor/llama.cpp/models/templates"):
    if os.path.isdir(os.path.join(cache, rel)):
        tdir = os.path.join(cache, rel)
if not tdir:
    print(f"SKIP: llama.cpp's models/templates is not in {cache} (../shared/peer/setup.sh fetches it)")
    sys.exit(77)

lib = ctypes.CDLL(sys.argv[1])


class Msg(ctypes.Structure):
    _fields_ = [("role", ctypes.c_char_p), ("content", ctypes.c_char_p)]


lib.brisk_chat_apply_tools.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(Msg), ctypes.c_size_t,
                                       ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t,
                                       ctypes.POINTER(ctypes.c_size_t)]
lib.brisk_chat_parse_tool_calls.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t,
                                            ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_void_p)]
lib.brisk_tool_call_grammar.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                                        ctypes.POINTER(ctypes.c_void_p)]
lib.brisk_string_free.argtypes = [ctypes.c_void_p]
lib.brisk_last_error.restype = ctypes.c_char_p


def tojson(x, indent=None, **kw):
    return json.dumps(x, ensure_ascii=False, indent=indent, separators=(",", ": ") if indent else None)


env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
env.filters["tojson"] = tojson


def raise_exception(msg):
    raise jinja2.exceptions.TemplateError(msg)


def reference(name, messages, tools, bos):
    with open(os.path.join(tdir, name)) as f:
        t = env.from_string(f.read())
    out = t.render(messages=messages, tools=tools, add_generation_prompt=True, bos_token=bos, eos_token="</s>",
                   raise_exception=raise_exception)
    return out[len(bos):] if out.startswith(bos) else out


def ours(family, messages, tools):
    msgs = []
    for m in messages:
        if "tool_calls" in m:
            calls = [{"id": c.get("id"), "type": "function",
                      "function": {"name": c["function"]["name"], "arguments": c["function"]["arguments"]}}
                     for c in m["tool_calls"]]
            msgs.append(("tool_calls", json.dumps(calls)))
        elif m["role"] == "tool":
            role = "tool:" + m["tool_call_id"] if "tool_call_id" in m else "tool"
            msgs.append((role, m["content"]))
        else:
            msgs.append((m["role"], m["content"]))
    arr = (Msg * len(msgs))(*[Msg(r.encode(), c.encode()) for r, c in msgs])
    n = ctypes.c_size_t(0)
    tj = json.dumps(tools).encode()
    lib.brisk_chat_apply_tools(None, family.encode(), arr, len(msgs), tj, 1, None, 0, ctypes.byref(n))
    buf = ctypes.create_string_buffer(n.value + 1)
    st = lib.brisk_chat_apply_tools(None, family.encode(), arr, len(msgs), tj, 1, buf, n.value + 1,
                                    ctypes.byref(n))
    assert st == 0, (family, st, lib.brisk_last_error())
    return buf.raw[:n.value].decode()


TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather — in °C",
        "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "a \"city\""},
                                                         "days": {"type": "integer", "minimum": 1}},
                       "required": ["city"]}}},
    {"type": "function", "function": {"name": "now", "description": "The time",
                                      "parameters": {"type": "object", "properties": {}}}},
]
ARGS = {"city": "Zürich", "days": 2}
CALL = {"id": "abc123XYZ", "type": "function", "function": {"name": "get_weather", "arguments": ARGS}}

convs = [
    [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Weather in Zürich?"}],
    [{"role": "system", "content": "S"}, {"role": "user", "content": "Weather?"},
     {"role": "assistant", "content": "", "tool_calls": [CALL]},
     {"role": "tool", "tool_call_id": "abc123XYZ", "content": "{\"temp\": 3}"},
     {"role": "assistant", "content": "It is 3 degrees."}, {"role": "user", "content": "Thanks"}],
]
checks = [("Qwen-Qwen2.5-7B-Instruct.jinja", "chatml", ""),
          ("meta-llama-Llama-3.1-8B-Instruct.jinja", "llama3", "<|begin_of_text|>"),
          ("mistralai-Mistral-Nemo-Instruct-2407.jinja", "mistral-v3-tekken", "<s>")]
bad = 0
for tname, family, bos in checks:
    if not os.path.exists(os.path.join(tdir, tname)):
        print(f"{tname}: absent, skipped")
        continue
    for i, conv in enumerate(convs):
        want, got = reference(tname, conv, TOOLS, bos), ours(family, conv, TOOLS)
        if want != got:
            bad += 1
            print(f"FAIL {family} conversation {i}:\n--- reference\n{want!r}\n--- brisk\n{got!r}")
    print(f"{family}: {len(convs)} conversations compared")

# Parsing each family's call text back.
outputs = {
    "chatml": 'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Zürich", "days": 2}}\n'
              '</tool_call>\n<tool_call>\n{"name": "now", "arguments": {}}\n</tool_call>',
    "llama3": '{"name": "get_weather", "parameters": {"city": "Zürich", "days": 2}}',
    "mistral-v3-tekken": '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Zürich", "days": 2}}, '
                         '{"name": "now", "arguments": {}}]',
}
for family, text in outputs.items():
    raw = text.encode()
    calls, content = ctypes.c_void_p(), ctypes.c_void_p()
    assert lib.brisk_chat_parse_tool_calls(None, family.encode(), raw, len(raw), ctypes.byref(calls),
                                           ctypes.byref(content)) == 0
    got = json.loads(ctypes.string_at(calls.value).decode())
    want = [{"name": "get_weather", "arguments": ARGS}] + ([{"name": "now", "arguments": {}}]
                                                           if family != "llama3" else [])
    if got != want:
        bad += 1
        print(f"FAIL parse {family}: {got}")
    if family == "chatml" and ctypes.string_at(content.value).decode().strip() != "Let me check.":
        bad += 1
        print("FAIL chatml content:", ctypes.string_at(content.value))
    lib.brisk_string_free(calls)
    lib.brisk_string_free(content)
    # plain text is content, no calls
    calls, content = ctypes.c_void_p(), ctypes.c_void_p()
    assert lib.brisk_chat_parse_tool_calls(None, family.encode(), b"Hello {", 7, ctypes.byref(calls),
                                           ctypes.byref(content)) == 0
    assert not calls.value and ctypes.string_at(content.value) == b"Hello {"
    lib.brisk_string_free(content)
    g = ctypes.c_void_p()
    assert lib.brisk_tool_call_grammar(None, family.encode(), json.dumps(TOOLS).encode(), None, ctypes.byref(g)) == 0, \
        lib.brisk_last_error()
    assert b"get_weather" in ctypes.string_at(g.value)
    lib.brisk_string_free(g)
print("parse and grammar: ok")
sys.exit(1 if bad else 0)
