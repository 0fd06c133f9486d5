/* The grammar of a tool call in a chat family's format (see lib/chat/tools.c
 * for the formats), each call's arguments constrained by its tool's
 * parameters schema: the constraint behind tool_choice "required" or a
 * named tool. Each tool's schema grammar is renamed into its own rules
 * (t<i>_...), so tools never share or clash over rule names. */
#include "grammar/grammar.h"

#include "core/alloc.h"
#include "core/error.h"
#include "format/json.h"

#include <json-c/json.h>
#include <stdio.h>
#include <string.h>

/* Appends GBNF text g with every rule name prefixed: identifiers outside
 * literals, classes and comments are rule names. */
static void put_renamed(gr_buf *b, const char *g, const char *prefix) {
  for (const char *p = g; *p;) {
    if (*p == '"' || *p == '[') {
      char close = *p == '"' ? '"' : ']';
      const char *q = p + 1;
      while (*q && *q != close) q += q[0] == '\\' && q[1] ? 2 : 1;
      if (*q) q++;
      gr_buf_put(b, p, (size_t)(q - p));
      p = q;
    } else if (*p == '#') {
      while (*p && *p != '\n') p++;
    } else if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_') {
      const char *q = p;
      while ((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9') ||
             *q == '_' || *q == '-')
        q++;
      gr_buf_puts(b, prefix);
      gr_buf_put(b, p, (size_t)(q - p));
      p = q;
    } else {
      gr_buf_put(b, p++, 1);
    }
  }
}

/* OpenAI's rule for function names: [a-zA-Z0-9_-]{1,64}; such a name
 * needs no escaping in JSON or GBNF. */
static int plain_name(const char *s) {
  size_t n = strlen(s);
  if (n < 1 || n > 64) return 0;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
          *s == '_' || *s == '-'))
      return 0;
  return 1;
}

static json_object *field(json_object *o, const char *k) {
  json_object *v = NULL;
  return o && json_object_is_type(o, json_type_object) && json_object_object_get_ex(o, k, &v)
             ? v
             : NULL;
}

BRISK_API brisk_status brisk_tool_call_grammar(const brisk_model *model, const char *template_name,
                                               const char *tools_json, const char *tool_name,
                                               char **gbnf) {
  if (!tools_json || !gbnf)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_tool_call_grammar: tools_json or gbnf is NULL");
  *gbnf = NULL;
  const char *fam = template_name ? template_name : brisk_chat_template_name(model);
  int chatml = fam && !strcmp(fam, "chatml"), llama3 = fam && !strcmp(fam, "llama3");
  int mistral = fam && (!strcmp(fam, "mistral-v3") || !strcmp(fam, "mistral-v3-tekken"));
  if (!chatml && !llama3 && !mistral)
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "tool calls: the %s template family has no tool format here (chatml, "
                       "llama3, mistral-v3 and mistral-v3-tekken do)",
                       fam ? fam : "model's (unrecognized)");
  json_object *tools = NULL;
  brisk_status st = brisk_json_parse(tools_json, strlen(tools_json), true, "tools", &tools);
  if (st) return st == BRISK_E_FORMAT ? BRISK_E_INVALID_ARGUMENT : st;
  gr_buf rules = {0}, alts = {0};
  size_t n =
      tools && json_object_is_type(tools, json_type_array) ? json_object_array_length(tools) : 0;
  int n_used = 0;
  for (size_t i = 0; i < n && !st; i++) {
    json_object *f = field(json_object_array_get_idx(tools, i), "function");
    json_object *name = field(f, "name"), *params = field(f, "parameters");
    if (!name || !json_object_is_type(name, json_type_string)) {
      st = brisk_error(BRISK_E_INVALID_ARGUMENT, "tools[%zu]: no function name", i);
      break;
    }
    const char *nm = json_object_get_string(name);
    if (!plain_name(nm)) {
      st = brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "tools[%zu]: the function name must be 1-64 of a-z, A-Z, 0-9, _ and -", i);
      break;
    }
    if (tool_name && strcmp(tool_name, nm)) continue;
    const char *schema = params ? json_object_to_json_string_ext(params, JSON_C_TO_STRING_PLAIN)
                                : "{\"type\": \"object\"}";
    char *g = NULL;
    if ((st = gr_schema_to_gbnf(schema, strlen(schema), &g))) {
      char msg[600];
      snprintf(msg, sizeof msg, "%s", brisk_last_error());
      st = brisk_error(BRISK_E_INVALID_ARGUMENT, "tools[%zu] (%s).function.parameters: %s", i, nm,
                       msg);
      break;
    }
    char prefix[32];
    snprintf(prefix, sizeof prefix, "t%zu_", i);
    put_renamed(&rules, g, prefix);
    brisk_free(g);
    /* call_i ::= {"name": "NAME", "arguments": ARGS} */
    gr_buf_printf(&rules,
                  "call%zu ::= \"{\\\"name\\\": \\\"%s\\\", \\\"%s\\\": \" t%zu_root \"}\"\n", i,
                  nm, llama3 ? "parameters" : "arguments", i);
    gr_buf_printf(&alts, "%scall%zu", n_used ? " | " : "", i);
    n_used++;
  }
  if (!st && n_used == 0)
    st = brisk_error(BRISK_E_INVALID_ARGUMENT,
                     tool_name ? "tool_choice: no tool is named '%s'" : "tools: empty%s",
                     tool_name ? tool_name : "");
  if (!st) {
    gr_buf_printf(&rules, "call ::= %s\n", alts.s);
    if (chatml)
      gr_buf_puts(&rules, "tc ::= \"<tool_call>\\n\" call \"\\n</tool_call>\"\n"
                          "root ::= tc ( \"\\n\" tc )*\n");
    else if (llama3)
      gr_buf_puts(&rules, "root ::= call\n");
    else
      gr_buf_puts(&rules, "root ::= \"[\" call ( \", \" call )* \"]\"\n");
    if (rules.oom || alts.oom) st = brisk_error_oom();
  }
  brisk_json_free(tools);
  brisk_free(alts.s);
  if (st) {
    brisk_free(rules.s);
    return st;
  }
  *gbnf = rules.s;
  return BRISK_OK;
}
