/* Tool calls in chat: tool definitions rendered into the prompt, and the
 * model's tool-call output parsed back into calls, for the families whose
 * reference templates define them:
 *   chatml             Qwen 2.5 / Qwen 3 (Hermes style): the tools as JSON
 *                      lines inside <tools></tools> in the system turn; a
 *                      call is <tool_call>\n{"name": .., "arguments": ..}\n
 *                      </tool_call>; results are <tool_response> blocks in
 *                      a user turn
 *   llama3             Llama 3.1/3.2/3.3: "Environment: ipython" in the
 *                      system turn, the tools (JSON, indent 4) in the first
 *                      user turn; a call is {"name": .., "parameters": ..};
 *                      results are ipython turns
 *   mistral-v3(-tekken) [AVAILABLE_TOOLS][..][/AVAILABLE_TOOLS] before the
 *                      last user turn; calls are [TOOL_CALLS][{"name": ..,
 *                      "arguments": .., "id": ..}]; results are
 *                      [TOOL_RESULTS]{"content": .., "call_id": ..}
 * Each is written out in C as its reference template renders it (JSON as
 * the templates' tojson writes it: Python's json.dumps, keys in order, no
 * ASCII escaping), never by running a template. */
#ifndef BRISK_EXPERIMENTAL
#  define BRISK_EXPERIMENTAL /* the tool-call API is experimental */
#endif
#include "chat/chat.h"

#include "core/alloc.h"
#include "core/error.h"

#include <json-c/json.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef struct sbuf {
  char *s;
  size_t n, cap;
  int oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
  if (b->oom) return;
  if (b->n + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + n + 1) cap *= 2;
    char *p = brisk_realloc(b->s, cap);
    if (!p) {
      b->oom = 1;
      return;
    }
    b->s = p;
    b->cap = cap;
  }
  memcpy(b->s + b->n, s, n);
  b->n += n;
  b->s[b->n] = 0;
}

static void sb_puts(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

static void sb_trimmed(sbuf *b, const char *s) {
  const char *e = s + strlen(s);
  while (s < e && (*s == ' ' || (*s >= '\t' && *s <= '\r'))) s++;
  while (e > s && (e[-1] == ' ' || (e[-1] >= '\t' && e[-1] <= '\r'))) e--;
  sb_put(b, s, (size_t)(e - s));
}

/* A JSON string as Python's json.dumps(ensure_ascii=False) writes it. */
static void sb_json_str(sbuf *b, const char *s, size_t n) {
  sb_puts(b, "\"");
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    char esc[8];
    const char *r = NULL;
    switch (c) {
    case '"': r = "\\\""; break;
    case '\\': r = "\\\\"; break;
    case '\n': r = "\\n"; break;
    case '\r': r = "\\r"; break;
    case '\t': r = "\\t"; break;
    case '\b': r = "\\b"; break;
    case '\f': r = "\\f"; break;
    default:
      if (c < 0x20) {
        snprintf(esc, sizeof esc, "\\u%04x", c);
        r = esc;
      }
    }
    if (r)
      sb_puts(b, r);
    else
      sb_put(b, (const char *)&c, 1);
  }
  sb_puts(b, "\"");
}

static void sb_indent(sbuf *b, int indent, int level) {
  sb_puts(b, "\n");
  for (int i = 0; i < indent * level; i++) sb_puts(b, " ");
}

/* v as json.dumps(v, ensure_ascii=False, indent=indent or None) writes it
 * (indent 0: one line, ", " and ": " separators). */
static void sb_json(sbuf *b, json_object *v, int indent, int level) {
  switch (json_object_get_type(v)) {
  case json_type_null: sb_puts(b, "null"); break;
  case json_type_boolean: sb_puts(b, json_object_get_boolean(v) ? "true" : "false"); break;
  case json_type_int:
  case json_type_double:
    sb_puts(b, json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN));
    break;
  case json_type_string:
    sb_json_str(b, json_object_get_string(v), (size_t)json_object_get_string_len(v));
    break;
  case json_type_array: {
    size_t n = json_object_array_length(v);
    sb_puts(b, "[");
    for (size_t i = 0; i < n; i++) {
      if (i) sb_puts(b, indent ? "," : ", ");
      if (indent) sb_indent(b, indent, level + 1);
      sb_json(b, json_object_array_get_idx(v, i), indent, level + 1);
    }
    if (indent && n) sb_indent(b, indent, level);
    sb_puts(b, "]");
    break;
  }
  case json_type_object: {
    int first = 1;
    sb_puts(b, "{");
    json_object_object_foreach(v, key, val) {
      if (!first) sb_puts(b, indent ? "," : ", ");
      if (indent) sb_indent(b, indent, level + 1);
      first = 0;
      sb_json_str(b, key, strlen(key));
      sb_puts(b, ": ");
      sb_json(b, val, indent, level + 1);
    }
    if (indent && !first) sb_indent(b, indent, level);
    sb_puts(b, "}");
    break;
  }
  }
}

static json_object *parse_json(const char *s, size_t n) {
  json_tokener *t = json_tokener_new();
  if (!t) return NULL;
  json_tokener_set_flags(t, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
  json_object *o = n <= INT32_MAX ? json_tokener_parse_ex(t, s, (int)n) : NULL;
  if (o &&
      (json_tokener_get_error(t) != json_tokener_success || json_tokener_get_parse_end(t) != n)) {
    json_object_put(o);
    o = NULL;
  }
  json_tokener_free(t);
  return o;
}

static json_object *field(json_object *o, const char *k) {
  json_object *v = NULL;
  return o && json_object_is_type(o, json_type_object) && json_object_object_get_ex(o, k, &v)
             ? v
             : NULL;
}

static int is_str(json_object *v) { return v && json_object_is_type(v, json_type_string); }

/* The tools array: each {"type": "function", "function": {"name": ..}}. */
static brisk_status check_tools(json_object *tools) {
  if (!tools || !json_object_is_type(tools, json_type_array))
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "tools: must be a JSON array");
  for (size_t i = 0; i < json_object_array_length(tools); i++) {
    json_object *t = json_object_array_get_idx(tools, i), *f = field(t, "function");
    if (!f || !json_object_is_type(f, json_type_object) || !is_str(field(f, "name")))
      return brisk_error(BRISK_E_INVALID_ARGUMENT,
                         "tools[%zu]: must be {\"type\": \"function\", \"function\": {\"name\": "
                         "..., ...}}",
                         i);
    json_object *p = field(f, "parameters");
    if (p && !json_object_is_type(p, json_type_object))
      return brisk_error(BRISK_E_INVALID_ARGUMENT,
                         "tools[%zu].function.parameters: must be a JSON Schema object", i);
  }
  return BRISK_OK;
}

/* One assistant tool call of a "tool_calls" message: its function's name,
 * arguments (an object; a string of JSON is parsed, as the OpenAI API
 * sends them) and id. */
typedef struct call {
  const char *name, *id;
  json_object *args; /* owned when args_owned */
  int args_owned;
} call;

static brisk_status get_call(json_object *c, size_t mi, size_t ci, call *out) {
  json_object *f = field(c, "function");
  if (!f) f = c; /* {"name", "arguments"} directly */
  json_object *name = field(f, "name"), *args = field(f, "arguments"), *id = field(c, "id");
  if (!is_str(name))
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "chat message %zu: tool call %zu has no function name", mi, ci);
  *out =
      (call){json_object_get_string(name), is_str(id) ? json_object_get_string(id) : NULL, args, 0};
  if (is_str(args)) {
    json_object *p =
        parse_json(json_object_get_string(args), (size_t)json_object_get_string_len(args));
    if (!p)
      return brisk_error(BRISK_E_INVALID_ARGUMENT,
                         "chat message %zu: tool call %zu's arguments are not JSON", mi, ci);
    out->args = p;
    out->args_owned = 1;
  }
  return BRISK_OK;
}

typedef enum { R_SYSTEM, R_USER, R_ASSISTANT, R_TOOL, R_CALLS, R_BAD } trole;

/* Roles: system, user, assistant; "tool" (a result; "tool:ID" names the
 * call it answers, which the mistral families need) and "tool_calls" (the
 * assistant's calls: content is the OpenAI tool_calls array). */
static trole role_of(const char *r, const char **call_id) {
  *call_id = NULL;
  if (!r) return R_BAD;
  if (!strcmp(r, "system")) return R_SYSTEM;
  if (!strcmp(r, "user")) return R_USER;
  if (!strcmp(r, "assistant")) return R_ASSISTANT;
  if (!strcmp(r, "tool")) return R_TOOL;
  if (!strncmp(r, "tool:", 5)) {
    *call_id = r + 5;
    return R_TOOL;
  }
  if (!strcmp(r, "tool_calls")) return R_CALLS;
  return R_BAD;
}

/* The calls of message i (content: a JSON array); *n and *calls owned by
 * the caller (free_calls). */
static brisk_status parse_calls(const char *content, size_t mi, call **calls, size_t *n,
                                json_object **root) {
  *calls = NULL;
  *n = 0;
  *root = parse_json(content, strlen(content));
  if (!*root || !json_object_is_type(*root, json_type_array))
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "chat message %zu (tool_calls): content must be a JSON array of calls", mi);
  size_t k = json_object_array_length(*root);
  if (k == 0)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "chat message %zu (tool_calls): no calls", mi);
  *calls = brisk_calloc(k, sizeof **calls);
  if (!*calls) return brisk_error_oom();
  for (size_t j = 0; j < k; j++) {
    brisk_status st = get_call(json_object_array_get_idx(*root, j), mi, j, &(*calls)[j]);
    if (st) return st;
    *n = j + 1;
  }
  return BRISK_OK;
}

static void free_calls(call *calls, size_t n, json_object *root) {
  for (size_t j = 0; j < n; j++)
    if (calls[j].args_owned) json_object_put(calls[j].args);
  brisk_free(calls);
  if (root) json_object_put(root);
}

static void args_json(sbuf *b, json_object *args) {
  if (args)
    sb_json(b, args, 0, 0);
  else
    sb_puts(b, "{}");
}

static brisk_status chatml(sbuf *b, const brisk_chat_message *m, size_t n, json_object *tools,
                           int gen) {
  const char *id;
  size_t start = 0;
  sb_puts(b, "<|im_start|>system\n");
  if (n > 0 && role_of(m[0].role, &id) == R_SYSTEM) {
    sb_puts(b, m[0].content);
    start = 1;
  }
  sb_puts(b, "\n\n# Tools\n\nYou may call one or more functions to assist with the user "
             "query.\n\nYou are provided with function signatures within <tools></tools> XML "
             "tags:\n<tools>");
  for (size_t i = 0; i < json_object_array_length(tools); i++) {
    sb_puts(b, "\n");
    sb_json(b, json_object_array_get_idx(tools, i), 0, 0);
  }
  sb_puts(b, "\n</tools>\n\nFor each function call, return a json object with function name "
             "and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
             "<function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n");
  for (size_t i = start; i < n; i++) {
    trole r = role_of(m[i].role, &id);
    if (r == R_SYSTEM || r == R_USER || r == R_ASSISTANT) {
      sb_puts(b, "<|im_start|>");
      sb_puts(b, m[i].role);
      sb_puts(b, "\n");
      sb_puts(b, m[i].content);
      sb_puts(b, "<|im_end|>\n");
    } else if (r == R_CALLS) {
      call *c;
      size_t k;
      json_object *root;
      brisk_status st = parse_calls(m[i].content, i, &c, &k, &root);
      if (st) {
        free_calls(c, k, root);
        return st;
      }
      sb_puts(b, "<|im_start|>assistant");
      for (size_t j = 0; j < k; j++) {
        sb_puts(b, "\n<tool_call>\n{\"name\": \"");
        sb_puts(b, c[j].name);
        sb_puts(b, "\", \"arguments\": ");
        args_json(b, c[j].args);
        sb_puts(b, "}\n</tool_call>");
      }
      sb_puts(b, "<|im_end|>\n");
      free_calls(c, k, root);
    } else {
      const char *pid;
      if (i == 0 || role_of(m[i - 1].role, &pid) != R_TOOL) sb_puts(b, "<|im_start|>user");
      sb_puts(b, "\n<tool_response>\n");
      sb_puts(b, m[i].content);
      sb_puts(b, "\n</tool_response>");
      if (i + 1 == n || role_of(m[i + 1].role, &pid) != R_TOOL) sb_puts(b, "<|im_end|>\n");
    }
  }
  if (gen) sb_puts(b, "<|im_start|>assistant\n");
  return BRISK_OK;
}

static const char LLAMA3_ASK[] =
    "Given the following functions, please respond with a JSON for a function call with its "
    "proper arguments that best answers the given prompt.\n\nRespond in the format {\"name\": "
    "function name, \"parameters\": dictionary of argument name and its value}.Do not use "
    "variables.\n\n";

static brisk_status llama3(sbuf *b, const brisk_chat_message *m, size_t n, json_object *tools,
                           int gen) {
  const char *id;
  size_t i = 0;
  sb_puts(b, "<|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\nCutting "
             "Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n");
  if (n > 0 && role_of(m[0].role, &id) == R_SYSTEM) sb_trimmed(b, m[i++].content);
  sb_puts(b, "<|eot_id|>");
  if (i >= n)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "the llama3 template puts the tools in the first user message, and there "
                       "is none");
  sb_puts(b, "<|start_header_id|>user<|end_header_id|>\n\n");
  sb_puts(b, LLAMA3_ASK);
  for (size_t t = 0; t < json_object_array_length(tools); t++) {
    sb_json(b, json_object_array_get_idx(tools, t), 4, 0);
    sb_puts(b, "\n\n");
  }
  sb_trimmed(b, m[i++].content);
  sb_puts(b, "<|eot_id|>");
  for (; i < n; i++) {
    trole r = role_of(m[i].role, &id);
    if (r == R_SYSTEM || r == R_USER || r == R_ASSISTANT) {
      sb_puts(b, "<|start_header_id|>");
      sb_puts(b, m[i].role);
      sb_puts(b, "<|end_header_id|>\n\n");
      sb_trimmed(b, m[i].content);
      sb_puts(b, "<|eot_id|>");
    } else if (r == R_CALLS) {
      call *c;
      size_t k;
      json_object *root;
      brisk_status st = parse_calls(m[i].content, i, &c, &k, &root);
      if (!st && k != 1)
        st = brisk_error(BRISK_E_INVALID_ARGUMENT,
                         "chat message %zu: the llama3 template takes one tool call per turn", i);
      if (!st) {
        sb_puts(b, "<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"");
        sb_puts(b, c[0].name);
        sb_puts(b, "\", \"parameters\": ");
        args_json(b, c[0].args);
        sb_puts(b, "}<|eot_id|>");
      }
      free_calls(c, k, root);
      if (st) return st;
    } else {
      /* The reference writes a string result through tojson (a string is
       * iterable to Jinja): quoted. */
      sb_puts(b, "<|start_header_id|>ipython<|end_header_id|>\n\n");
      sb_json_str(b, m[i].content, strlen(m[i].content));
      sb_puts(b, "<|eot_id|>");
    }
  }
  if (gen) sb_puts(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
  return BRISK_OK;
}

/* A value of a tool's function object as the mistral templates write it:
 * strings raw between quotes, the rest through tojson. */
static void mistral_tools(sbuf *b, json_object *tools, int tekken) {
  sb_puts(b, tekken ? "[AVAILABLE_TOOLS][" : "[AVAILABLE_TOOLS] [");
  size_t nt = json_object_array_length(tools);
  for (size_t t = 0; t < nt; t++) {
    json_object *f = field(json_object_array_get_idx(tools, t), "function");
    sb_puts(b, "{\"type\": \"function\", \"function\": {");
    int first = 1;
    json_object_object_foreach(f, key, val) {
      if (!strcmp(key, "return")) continue;
      if (!first) sb_puts(b, ", ");
      first = 0;
      sb_puts(b, "\"");
      sb_puts(b, key);
      sb_puts(b, "\": ");
      if (is_str(val)) {
        sb_puts(b, "\"");
        sb_puts(b, json_object_get_string(val));
        sb_puts(b, "\"");
      } else {
        sb_json(b, val, 0, 0);
      }
    }
    sb_puts(b, "}}");
    sb_puts(b, t + 1 < nt ? ", " : "]");
  }
  sb_puts(b, "[/AVAILABLE_TOOLS]");
}

static brisk_status mistral(sbuf *b, brisk_chat_family f, const brisk_chat_message *m, size_t n,
                            json_object *tools) {
  const char *id, *sys = NULL;
  int tekken = f == BRISK_CHAT_MISTRAL_V3_TEKKEN;
  size_t start = 0, last_user = n;
  if (n > 0 && role_of(m[0].role, &id) == R_SYSTEM) sys = m[start++].content;
  for (size_t i = start; i < n; i++)
    if (role_of(m[i].role, &id) == R_USER) last_user = i;
  for (size_t i = start; i < n; i++) {
    trole r = role_of(m[i].role, &id);
    if (r == R_USER) {
      if (i == last_user) mistral_tools(b, tools, tekken);
      sb_puts(b, tekken ? "[INST]" : "[INST] ");
      if (sys && i + 1 == n) {
        sb_puts(b, sys);
        sb_puts(b, "\n\n");
      }
      sb_puts(b, m[i].content);
      sb_puts(b, "[/INST]");
    } else if (r == R_ASSISTANT) {
      if (!tekken) sb_puts(b, " ");
      if (tekken)
        sb_puts(b, m[i].content);
      else
        sb_trimmed(b, m[i].content);
      sb_puts(b, "</s>");
    } else if (r == R_CALLS) {
      call *c;
      size_t k;
      json_object *root;
      brisk_status st = parse_calls(m[i].content, i, &c, &k, &root);
      for (size_t j = 0; !st && j < k; j++)
        if (!c[j].id || strlen(c[j].id) != 9)
          st = brisk_error(BRISK_E_INVALID_ARGUMENT,
                           "chat message %zu: the mistral templates need tool call ids of 9 "
                           "alphanumeric characters",
                           i);
      if (!st) {
        sb_puts(b, tekken ? "[TOOL_CALLS][" : "[TOOL_CALLS] [");
        for (size_t j = 0; j < k; j++) {
          sb_puts(b, "{\"name\": ");
          sb_json_str(b, c[j].name, strlen(c[j].name));
          sb_puts(b, ", \"arguments\": ");
          args_json(b, c[j].args);
          sb_puts(b, ", \"id\": \"");
          sb_puts(b, c[j].id);
          sb_puts(b, j + 1 < k ? "\"}, " : "\"}]</s>");
        }
      }
      free_calls(c, k, root);
      if (st) return st;
    } else if (r == R_TOOL) {
      if (!id || strlen(id) != 9)
        return brisk_error(BRISK_E_INVALID_ARGUMENT,
                           "chat message %zu: the mistral templates need the call id of a tool "
                           "result (role \"tool:ID\", 9 alphanumeric characters)",
                           i);
      sb_puts(b, tekken ? "[TOOL_RESULTS]{\"content\": " : "[TOOL_RESULTS] {\"content\": ");
      sb_puts(b, m[i].content);
      sb_puts(b, ", \"call_id\": \"");
      sb_puts(b, id);
      sb_puts(b, "\"}[/TOOL_RESULTS]");
    } else {
      return brisk_error(BRISK_E_INVALID_ARGUMENT,
                         "chat message %zu: the mistral templates take a system message only "
                         "first",
                         i);
    }
  }
  return BRISK_OK;
}

static brisk_status tool_family(const brisk_model *model, const char *name, brisk_chat_family *f) {
  if (!name) name = brisk_chat_template_name(model);
  if (!name)
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "tool calls: the model's chat template is not recognized; pass a template "
                       "name (chatml, llama3, mistral-v3, mistral-v3-tekken)");
  *f = brisk_chat_family_by_name(name);
  if (*f != BRISK_CHAT_CHATML && *f != BRISK_CHAT_LLAMA3 && *f != BRISK_CHAT_MISTRAL_V3 &&
      *f != BRISK_CHAT_MISTRAL_V3_TEKKEN)
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "tool calls: the %s template family has no tool format here (chatml, "
                       "llama3, mistral-v3 and mistral-v3-tekken do)",
                       name);
  return BRISK_OK;
}

BRISK_API brisk_status brisk_chat_apply_tools(const brisk_model *model, const char *template_name,
                                              const brisk_chat_message *messages, size_t n_messages,
                                              const char *tools_json, int add_assistant_prefix,
                                              char *buf, size_t capacity, size_t *len) {
  if ((!messages && n_messages > 0) || (!buf && capacity > 0) || !tools_json)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_chat_apply_tools: messages, buf or tools_json is NULL");
  brisk_chat_family f;
  brisk_status st = tool_family(model, template_name, &f);
  if (st) return st;
  for (size_t i = 0; i < n_messages; i++) {
    const char *id;
    if (role_of(messages[i].role, &id) == R_BAD || !messages[i].content)
      return brisk_error(BRISK_E_INVALID_ARGUMENT,
                         "chat message %zu: role '%s' is not system, user, assistant, tool, "
                         "tool:ID or tool_calls, or its content is NULL",
                         i, messages[i].role ? messages[i].role : "(null)");
  }
  json_object *tools = parse_json(tools_json, strlen(tools_json));
  if (!tools) return brisk_error(BRISK_E_INVALID_ARGUMENT, "tools: not valid JSON");
  sbuf b = {0};
  if (!(st = check_tools(tools))) {
    if (f == BRISK_CHAT_CHATML)
      st = chatml(&b, messages, n_messages, tools, add_assistant_prefix);
    else if (f == BRISK_CHAT_LLAMA3)
      st = llama3(&b, messages, n_messages, tools, add_assistant_prefix);
    else
      st = mistral(&b, f, messages, n_messages, tools);
  }
  json_object_put(tools);
  if (!st && b.oom) st = brisk_error_oom();
  if (!st) {
    if (len) *len = b.n;
    if (b.n + 1 > capacity) {
      if (capacity > 0) {
        memcpy(buf, b.s, capacity - 1);
        buf[capacity - 1] = 0;
      }
      st = brisk_error(BRISK_E_BUFFER_TOO_SMALL,
                       "brisk_chat_apply_tools: the prompt needs %zu bytes, the buffer has %zu",
                       b.n + 1, capacity);
    } else {
      memcpy(buf, b.s ? b.s : "", b.n + 1);
    }
  }
  brisk_free(b.s);
  return st;
}

/* ---- parsing the model's output ---- */

/* {"name": .., "arguments"|"parameters": {..}} as a call of the output
 * array: {"name": .., "arguments": {..}}; 0 if o is not one. */
static int add_call(json_object *calls, json_object *o) {
  json_object *name = field(o, "name"), *args = field(o, "arguments");
  if (!args) args = field(o, "parameters");
  if (!is_str(name) || (args && !json_object_is_type(args, json_type_object))) return 0;
  json_object *c = json_object_new_object();
  if (!c) return -1;
  json_object_object_add(c, "name", json_object_get(name));
  json_object_object_add(c, "arguments", args ? json_object_get(args) : json_object_new_object());
  json_object_array_add(calls, c);
  return 1;
}

static const char *find(const char *s, const char *e, const char *needle) {
  size_t n = strlen(needle);
  for (const char *p = s; p + n <= e; p++)
    if (!memcmp(p, needle, n)) return p;
  return NULL;
}

static const char *skip_ws(const char *s, const char *e) {
  while (s < e && (*s == ' ' || *s == '\n' || *s == '\r' || *s == '\t')) s++;
  return s;
}

static const char *trim_end(const char *s, const char *e) {
  while (e > s && (e[-1] == ' ' || e[-1] == '\n' || e[-1] == '\r' || e[-1] == '\t')) e--;
  return e;
}

/* Parses the calls out of text[0, len) into calls (array); the text
 * outside them into content. -1 on OOM. */
static int parse_output(brisk_chat_family f, const char *text, size_t len, json_object *calls,
                        sbuf *content) {
  const char *s = text, *e = text + len;
  if (f == BRISK_CHAT_CHATML) {
    for (;;) {
      const char *a = find(s, e, "<tool_call>");
      const char *z = a ? find(a + 11, e, "</tool_call>") : NULL;
      if (!a || !z) break;
      const char *js = skip_ws(a + 11, z), *je = trim_end(js, z);
      json_object *o = parse_json(js, (size_t)(je - js));
      int r = o ? add_call(calls, o) : 0;
      json_object_put(o);
      if (r < 0) return -1;
      if (r == 0) break; /* not a call: the rest is text */
      sb_put(content, s, (size_t)(a - s));
      s = z + 12;
    }
    sb_put(content, s, (size_t)(e - s));
    return 0;
  }
  const char *p = skip_ws(s, e);
  if (f == BRISK_CHAT_LLAMA3) {
    if (e - p >= 14 && !memcmp(p, "<|python_tag|>", 14)) p = skip_ws(p + 14, e);
    const char *pe = trim_end(p, e);
    json_object *o = pe > p && *p == '{' ? parse_json(p, (size_t)(pe - p)) : NULL;
    int r = o ? add_call(calls, o) : 0;
    json_object_put(o);
    if (r < 0) return -1;
    if (r == 0) sb_put(content, s, len);
    return 0;
  }
  /* mistral: [TOOL_CALLS] (or, when the control token's text was not
   * kept, the array alone) */
  const char *m = find(s, e, "[TOOL_CALLS]");
  const char *js = m ? skip_ws(m + 12, e) : p, *je = trim_end(js, e);
  json_object *o = je > js && *js == '[' ? parse_json(js, (size_t)(je - js)) : NULL;
  int ok = o && json_object_is_type(o, json_type_array) && json_object_array_length(o) > 0;
  for (size_t i = 0; ok && i < json_object_array_length(o); i++)
    if (!field(json_object_array_get_idx(o, i), "name")) ok = 0;
  for (size_t i = 0; ok && i < json_object_array_length(o); i++) {
    int r = add_call(calls, json_object_array_get_idx(o, i));
    if (r < 0) {
      json_object_put(o);
      return -1;
    }
  }
  json_object_put(o);
  if (ok)
    sb_put(content, s, (size_t)((m ? m : p) - s));
  else
    sb_put(content, s, len);
  return 0;
}

BRISK_API brisk_status brisk_chat_parse_tool_calls(const brisk_model *model,
                                                   const char *template_name, const char *text,
                                                   size_t len, char **calls_json, char **content) {
  if (!text || !calls_json)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_chat_parse_tool_calls: text or calls_json is NULL");
  *calls_json = NULL;
  if (content) *content = NULL;
  brisk_chat_family f;
  brisk_status st = tool_family(model, template_name, &f);
  if (st) return st;
  json_object *calls = json_object_new_array();
  if (!calls) return brisk_error_oom();
  sbuf c = {0}, out = {0};
  sb_put(&c, "", 0);
  if (parse_output(f, text, len, calls, &c) < 0) c.oom = 1;
  if (json_object_array_length(calls) > 0) sb_json(&out, calls, 0, 0);
  json_object_put(calls);
  if (c.oom || out.oom) {
    brisk_free(c.s);
    brisk_free(out.s);
    return brisk_error_oom();
  }
  *calls_json = out.s;
  if (content)
    *content = c.s;
  else
    brisk_free(c.s);
  return BRISK_OK;
}

BRISK_API void brisk_string_free(char *s) { brisk_free(s); }
