/* The OpenAI request mapping: a /v1/completions or /v1/chat/completions body
 * becomes the prompts, sampler params and limits of brisk engine requests.
 * Every field is type- and range-checked here, so that a bad request gets a
 * 400 naming the field instead of a failed submission; fields brisk does not
 * implement are refused by name rather than ignored. */
#include "serve.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

bool sv_fail(sv_error *e, unsigned http_status, const char *param, const char *fmt, ...) {
  e->http_status = http_status;
  e->type = http_status == 401   ? "authentication_error"
            : http_status == 404 ? "not_found_error"
            : http_status == 429 ? "rate_limit_error"
            : http_status >= 500 ? "server_error"
                                 : "invalid_request_error";
  e->code = NULL;
  snprintf(e->param, sizeof e->param, "%s", param ? param : "");
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->message, sizeof e->message, fmt, ap);
  va_end(ap);
  return false;
}

static json_object *get(json_object *o, const char *key) {
  json_object *v = NULL;
  if (!json_object_object_get_ex(o, key, &v)) return NULL;
  return v; /* NULL also for an explicit null: treated as absent, like OpenAI */
}

static bool is_number(json_object *v) {
  return json_object_is_type(v, json_type_int) || json_object_is_type(v, json_type_double);
}

/* A number field in [lo, hi] (absent: *out unchanged). */
static bool get_num(json_object *o, const char *key, double lo, double hi, double *out,
                    sv_error *e) {
  json_object *v = get(o, key);
  if (!v) return true;
  if (!is_number(v)) return sv_fail(e, 400, key, "'%s' must be a number", key);
  double d = json_object_get_double(v);
  if (!isfinite(d) || d < lo || d > hi)
    return sv_fail(e, 400, key, "'%s' must be between %g and %g, got %g", key, lo, hi, d);
  *out = d;
  return true;
}

/* An integer field in [lo, hi]. */
static bool get_int(json_object *o, const char *key, int64_t lo, int64_t hi, int64_t *out,
                    sv_error *e) {
  json_object *v = get(o, key);
  if (!v) return true;
  if (!json_object_is_type(v, json_type_int))
    return sv_fail(e, 400, key, "'%s' must be an integer", key);
  errno = 0;
  int64_t i = json_object_get_int64(v);
  if (errno || i < lo || i > hi)
    return sv_fail(e, 400, key, "'%s' must be between %lld and %lld", key, (long long)lo,
                   (long long)hi);
  *out = i;
  return true;
}

static bool get_bool(json_object *o, const char *key, bool *out, sv_error *e) {
  json_object *v = get(o, key);
  if (!v) return true;
  if (!json_object_is_type(v, json_type_boolean))
    return sv_fail(e, 400, key, "'%s' must be a boolean", key);
  *out = json_object_get_boolean(v);
  return true;
}

/* Tokenizes text (malloc'ed ids). */
static bool tokenize(const brisk_model *m, const char *text, size_t len, uint32_t flags,
                     int32_t **out, int32_t *n, const char *param, sv_error *e) {
  size_t need = 0;
  brisk_status st = brisk_tokenize(m, text, len, NULL, 0, flags, &need);
  if (st && st != BRISK_E_BUFFER_TOO_SMALL)
    return sv_fail(e, 400, param, "cannot tokenize '%s': %s", param, brisk_last_error());
  if (need > INT32_MAX / 2) return sv_fail(e, 400, param, "'%s' is too long", param);
  int32_t *ids = malloc((need ? need : 1) * sizeof *ids);
  if (!ids) return sv_fail(e, 500, NULL, "out of memory");
  if (need && (st = brisk_tokenize(m, text, len, ids, need, flags, &need))) {
    free(ids);
    return sv_fail(e, 400, param, "cannot tokenize '%s': %s", param, brisk_last_error());
  }
  *out = ids;
  *n = (int32_t)need;
  return true;
}

static bool add_prompt(sv_job *job, int32_t *ids, int32_t n, char *text, sv_error *e) {
  size_t k = job->n_subs;
  int32_t **p = realloc(job->prompts, (k + 1) * sizeof *p);
  if (p) job->prompts = p;
  int32_t *np = p ? realloc(job->n_prompts, (k + 1) * sizeof *np) : NULL;
  if (np) job->n_prompts = np;
  char **pt = np ? realloc(job->prompt_texts, (k + 1) * sizeof *pt) : NULL;
  if (pt) job->prompt_texts = pt;
  if (!pt) {
    free(ids);
    free(text);
    return sv_fail(e, 500, NULL, "out of memory");
  }
  job->prompts[k] = ids;
  job->n_prompts[k] = n;
  job->prompt_texts[k] = text;
  job->n_subs = k + 1;
  return true;
}

/* /v1/completions "prompt": a string, an array of strings, an array of token
 * ids, or an array of arrays of token ids. */
static bool parse_prompt(sv_server *s, json_object *v, sv_job *job, sv_error *e) {
  const int32_t n_vocab = brisk_model_n_vocab(s->model);
  if (!v) return sv_fail(e, 400, "prompt", "'prompt' is required");
  if (json_object_is_type(v, json_type_string)) {
    const char *t = json_object_get_string(v);
    size_t len = (size_t)json_object_get_string_len(v);
    int32_t *ids, n;
    if (!tokenize(s->model, t, len, BRISK_TOKENIZE_ADD_SPECIAL, &ids, &n, "prompt", e))
      return false;
    char *copy = strndup(t, len);
    if (!copy) {
      free(ids);
      return sv_fail(e, 500, NULL, "out of memory");
    }
    return add_prompt(job, ids, n, copy, e);
  }
  if (!json_object_is_type(v, json_type_array))
    return sv_fail(e, 400, "prompt", "'prompt' must be a string or an array");
  size_t n = json_object_array_length(v);
  if (n == 0) return sv_fail(e, 400, "prompt", "'prompt' must not be empty");
  json_object *first = json_object_array_get_idx(v, 0);
  if (json_object_is_type(first, json_type_int)) { /* one prompt of token ids */
    int32_t *ids = malloc(n * sizeof *ids);
    if (!ids) return sv_fail(e, 500, NULL, "out of memory");
    for (size_t i = 0; i < n; i++) {
      json_object *t = json_object_array_get_idx(v, i);
      int64_t id = json_object_is_type(t, json_type_int) ? json_object_get_int64(t) : -1;
      if (id < 0 || id >= n_vocab) {
        free(ids);
        return sv_fail(e, 400, "prompt", "'prompt'[%zu] is not a token id in [0, %d)", i, n_vocab);
      }
      ids[i] = (int32_t)id;
    }
    return add_prompt(job, ids, (int32_t)n, NULL, e);
  }
  if (n > 64) return sv_fail(e, 400, "prompt", "at most 64 prompts per request");
  for (size_t i = 0; i < n; i++) {
    json_object *p = json_object_array_get_idx(v, i);
    if (!json_object_is_type(p, json_type_string) && !json_object_is_type(p, json_type_array))
      return sv_fail(e, 400, "prompt", "'prompt'[%zu] must be a string or an array of token ids",
                     i);
    if (json_object_is_type(p, json_type_array) &&
        (json_object_array_length(p) == 0 ||
         json_object_is_type(json_object_array_get_idx(p, 0), json_type_array)))
      return sv_fail(e, 400, "prompt", "'prompt'[%zu] must be a non-empty array of token ids", i);
    if (!parse_prompt(s, p, job, e)) return false;
  }
  return true;
}

/* A chat message's content: a string, or an array of {"type":"text"} parts
 * (concatenated). Returns a malloc'ed string. */
static bool message_content(json_object *c, size_t i, char **out, sv_error *e) {
  if (!c) return sv_fail(e, 400, "messages", "'messages'[%zu] has no 'content'", i);
  if (json_object_is_type(c, json_type_string)) {
    *out = strndup(json_object_get_string(c), (size_t)json_object_get_string_len(c));
    return *out ? true : sv_fail(e, 500, NULL, "out of memory");
  }
  if (!json_object_is_type(c, json_type_array))
    return sv_fail(e, 400, "messages", "'messages'[%zu].content must be a string or an array", i);
  char *buf = NULL;
  size_t len = 0, cap = 0;
  for (size_t k = 0; k < json_object_array_length(c); k++) {
    json_object *part = json_object_array_get_idx(c, k), *type = get(part, "type"),
                *text = get(part, "text");
    if (!type || strcmp(json_object_get_string(type), "text") || !text ||
        !json_object_is_type(text, json_type_string)) {
      free(buf);
      return sv_fail(e, 400, "messages",
                     "'messages'[%zu].content[%zu]: only parts of type 'text' are supported", i, k);
    }
    if (!sv_buf_append(&buf, &len, &cap, json_object_get_string(text),
                       (size_t)json_object_get_string_len(text))) {
      free(buf);
      return sv_fail(e, 500, NULL, "out of memory");
    }
  }
  if (!sv_buf_append(&buf, &len, &cap, "", 1)) {
    free(buf);
    return sv_fail(e, 500, NULL, "out of memory");
  }
  *out = buf;
  return true;
}

/* "messages" through the model's chat template (brisk_chat_apply). */
static bool parse_messages(sv_server *s, json_object *v, sv_job *job, sv_error *e) {
  if (!v || !json_object_is_type(v, json_type_array) || json_object_array_length(v) == 0)
    return sv_fail(e, 400, "messages", "'messages' must be a non-empty array");
  size_t n = json_object_array_length(v);
  if (n > 4096) return sv_fail(e, 400, "messages", "at most 4096 messages");
  brisk_chat_message *msgs = calloc(n, sizeof *msgs);
  char **contents = calloc(n, sizeof *contents);
  char(*roles)[48] = calloc(n, sizeof *roles);
  char *prompt = NULL;
  bool ok = false;
  if (!msgs || !contents || !roles) {
    sv_fail(e, 500, NULL, "out of memory");
    goto done;
  }
  for (size_t i = 0; i < n; i++) {
    json_object *m = json_object_array_get_idx(v, i), *role = get(m, "role");
    if (!json_object_is_type(m, json_type_object) || !role ||
        !json_object_is_type(role, json_type_string)) {
      sv_fail(e, 400, "messages", "'messages'[%zu] must be an object with a string 'role'", i);
      goto done;
    }
    const char *r = json_object_get_string(role);
    if (!strcmp(r, "developer")) r = "system"; /* OpenAI's newer name for it */
    if (strcmp(r, "system") && strcmp(r, "user") && strcmp(r, "assistant") &&
        (strcmp(r, "tool") || !job->tools_json)) {
      sv_fail(e, 400, "messages",
              "'messages'[%zu].role '%s' is not supported (system, developer, user, assistant; "
              "tool with 'tools')",
              i, r);
      goto done;
    }
    json_object *calls = get(m, "tool_calls");
    if (get(m, "function_call") || (calls && !job->tools_json)) {
      sv_fail(e, 400, "messages", "'messages'[%zu]: tool calls need 'tools' in the request", i);
      goto done;
    }
    if (calls) { /* the assistant's calls, as the library's "tool_calls" role takes them */
      const char *j = json_object_to_json_string_ext(calls, JSON_C_TO_STRING_PLAIN);
      if (!(contents[i] = strdup(j))) {
        sv_fail(e, 500, NULL, "out of memory");
        goto done;
      }
      msgs[i] = (brisk_chat_message){"tool_calls", contents[i]};
      continue;
    }
    if (!message_content(get(m, "content"), i, &contents[i], e)) goto done;
    if (!strcmp(r, "tool")) { /* "tool:ID" carries the call id (mistral needs it) */
      json_object *cid = get(m, "tool_call_id");
      snprintf(roles[i], sizeof roles[i], "tool%s%.40s",
               cid && json_object_is_type(cid, json_type_string) ? ":" : "",
               cid && json_object_is_type(cid, json_type_string) ? json_object_get_string(cid)
                                                                 : "");
      r = roles[i];
    }
    msgs[i] = (brisk_chat_message){r, contents[i]};
  }
  size_t len = 0;
  const char *tpl = s->cfg.chat_template, *tools = job->tools_json;
  brisk_status st = tools ? brisk_chat_apply_tools(s->model, tpl, msgs, n, tools, 1, NULL, 0, &len)
                          : brisk_chat_apply(s->model, tpl, msgs, n, 1, NULL, 0, &len);
  if (st == BRISK_E_BUFFER_TOO_SMALL || st == BRISK_OK) {
    prompt = malloc(len + 1);
    st = !prompt ? BRISK_E_OUT_OF_MEMORY
         : tools ? brisk_chat_apply_tools(s->model, tpl, msgs, n, tools, 1, prompt, len + 1, &len)
                 : brisk_chat_apply(s->model, tpl, msgs, n, 1, prompt, len + 1, &len);
  }
  if (st == BRISK_E_UNSUPPORTED) {
    sv_fail(e, 400, "messages",
            "%s (the server can be started with --chat-template NAME to choose a format)",
            brisk_last_error());
    goto done;
  }
  if (st) {
    sv_fail(e, st == BRISK_E_OUT_OF_MEMORY ? 500 : 400, "messages", "%s", brisk_last_error());
    goto done;
  }
  int32_t *ids, n_ids;
  if (!tokenize(s->model, prompt, len, BRISK_TOKENIZE_ADD_SPECIAL | BRISK_TOKENIZE_PARSE_SPECIAL,
                &ids, &n_ids, "messages", e))
    goto done;
  ok = add_prompt(job, ids, n_ids, NULL, e);
done:
  for (size_t i = 0; contents && i < n; i++) free(contents[i]);
  free(contents);
  free(roles);
  free(msgs);
  free(prompt);
  return ok;
}

static bool parse_stop(json_object *v, sv_job *job, sv_error *e) {
  if (!v) return true;
  size_t n = json_object_is_type(v, json_type_array) ? json_object_array_length(v) : 1;
  if (!json_object_is_type(v, json_type_string) && !json_object_is_type(v, json_type_array))
    return sv_fail(e, 400, "stop", "'stop' must be a string or an array of strings");
  if (n > 16) return sv_fail(e, 400, "stop", "at most 16 stop strings");
  job->stop = calloc(n ? n : 1, sizeof *job->stop);
  if (!job->stop) return sv_fail(e, 500, NULL, "out of memory");
  for (size_t i = 0; i < n; i++) {
    json_object *t = json_object_is_type(v, json_type_array) ? json_object_array_get_idx(v, i) : v;
    if (!json_object_is_type(t, json_type_string) || json_object_get_string_len(t) == 0)
      return sv_fail(e, 400, "stop", "'stop'[%zu] must be a non-empty string", i);
    if (!(job->stop[job->n_stop++] = strdup(json_object_get_string(t))))
      return sv_fail(e, 500, NULL, "out of memory");
  }
  return true;
}

/* "logit_bias": {"token id": bias in [-100, 100]}; -100 forbids the token. */
static bool parse_logit_bias(sv_server *s, json_object *v, sv_job *job, sv_error *e) {
  if (!v) return true;
  if (!json_object_is_type(v, json_type_object))
    return sv_fail(e, 400, "logit_bias", "'logit_bias' must be an object");
  size_t n = (size_t)json_object_object_length(v), k = 0;
  if (n > 1024) return sv_fail(e, 400, "logit_bias", "at most 1024 logit_bias entries");
  job->bias = calloc(n ? n : 1, sizeof *job->bias);
  if (!job->bias) return sv_fail(e, 500, NULL, "out of memory");
  json_object_object_foreach(v, key, val) {
    char *end;
    long id = strtol(key, &end, 10);
    if (!*key || *end || id < 0 || id >= brisk_model_n_vocab(s->model))
      return sv_fail(e, 400, "logit_bias", "'logit_bias' key '%s' is not a token id in [0, %d)",
                     key, brisk_model_n_vocab(s->model));
    double b = is_number(val) ? json_object_get_double(val) : NAN;
    if (!(b >= -100 && b <= 100))
      return sv_fail(e, 400, "logit_bias", "'logit_bias' values must be numbers in [-100, 100]");
    job->bias[k++] = (brisk_logit_bias){(int32_t)id, b <= -100 ? -INFINITY : (float)b};
  }
  job->sampler.logit_bias = job->bias;
  job->sampler.n_logit_bias = k;
  return true;
}

/* Fields of the OpenAI API that brisk does not implement: refused by name. */
static bool refuse_unsupported(json_object *o, sv_kind kind, sv_error *e) {
  static const char *const chat_only[] = {"functions", "function_call", "audio", "modalities",
                                          "prediction"};
  for (size_t i = 0; kind == SV_CHAT && i < sizeof chat_only / sizeof *chat_only; i++)
    if (get(o, chat_only[i]))
      return sv_fail(e, 400, chat_only[i], "'%s' is not supported", chat_only[i]);
  if (kind == SV_COMPLETION && get(o, "suffix"))
    return sv_fail(e, 400, "suffix", "'suffix' is not supported");
  return true;
}

static bool set_constraint(sv_job *job, brisk_constraint_kind kind, char *text, sv_error *e) {
  if (kind != BRISK_CONSTRAINT_JSON && !text) return sv_fail(e, 500, NULL, "out of memory");
  job->constraint.kind = kind;
  job->constraint.text = text;
  job->constraint_text = text;
  return true;
}

/* "response_format" (json_object: JSON mode; json_schema: its schema) and
 * "tools" / "tool_choice" (the tools go into the prompt; "required" or a
 * named function constrain the output to calls whose arguments follow the
 * tools' parameter schemas; "auto" lets the model choose and parses what
 * it wrote; "none" leaves the tools out). */
static bool parse_structured(sv_server *s, json_object *o, sv_kind kind, sv_job *job, sv_error *e) {
  brisk_constraint_params_init(&job->constraint);
  json_object *rf = get(o, "response_format"), *type = rf ? get(rf, "type") : NULL;
  const char *t =
      type && json_object_is_type(type, json_type_string) ? json_object_get_string(type) : NULL;
  if (rf && !t)
    return sv_fail(e, 400, "response_format", "'response_format' must be {\"type\": ...}");
  if (t && !strcmp(t, "json_object")) {
    if (!set_constraint(job, BRISK_CONSTRAINT_JSON, NULL, e)) return false;
  } else if (t && !strcmp(t, "json_schema")) {
    json_object *js = get(rf, "json_schema"), *schema = js ? get(js, "schema") : NULL;
    if (!schema || !json_object_is_type(schema, json_type_object))
      return sv_fail(e, 400, "response_format",
                     "'response_format'.json_schema.schema must be a JSON Schema object");
    if (!set_constraint(job, BRISK_CONSTRAINT_JSON_SCHEMA,
                        strdup(json_object_to_json_string_ext(schema, JSON_C_TO_STRING_PLAIN)), e))
      return false;
  } else if (t && strcmp(t, "text")) {
    return sv_fail(e, 400, "response_format",
                   "'response_format' type '%s' is not supported (text, json_object, json_schema)",
                   t);
  }
  json_object *tools = get(o, "tools"), *choice = get(o, "tool_choice");
  if (kind != SV_CHAT && (tools || choice))
    return sv_fail(e, 400, tools ? "tools" : "tool_choice", "tools are for chat completions");
  if (!tools) {
    if (choice) return sv_fail(e, 400, "tool_choice", "'tool_choice' needs 'tools'");
    return true;
  }
  if (!json_object_is_type(tools, json_type_array) || json_object_array_length(tools) == 0)
    return sv_fail(e, 400, "tools", "'tools' must be a non-empty array");
  const char *mode = "auto", *name = NULL;
  if (choice && json_object_is_type(choice, json_type_string)) {
    mode = json_object_get_string(choice);
    if (strcmp(mode, "auto") && strcmp(mode, "none") && strcmp(mode, "required"))
      return sv_fail(e, 400, "tool_choice", "'tool_choice' '%s' is not auto, none or required",
                     mode);
  } else if (choice) {
    json_object *fn = get(choice, "function"), *nm = fn ? get(fn, "name") : NULL;
    if (!nm || !json_object_is_type(nm, json_type_string))
      return sv_fail(e, 400, "tool_choice",
                     "'tool_choice' must be a string or {\"type\": \"function\", "
                     "\"function\": {\"name\": ...}}");
    mode = "required";
    name = json_object_get_string(nm);
  }
  if (!strcmp(mode, "none")) return true;
  if (!(job->tools_json = strdup(json_object_to_json_string_ext(tools, JSON_C_TO_STRING_PLAIN))))
    return sv_fail(e, 500, NULL, "out of memory");
  if (strcmp(mode, "required")) return true;
  if (job->constraint.kind != BRISK_CONSTRAINT_NONE)
    return sv_fail(e, 400, "tool_choice",
                   "a required tool call and 'response_format' cannot both constrain the output");
  char *g = NULL;
  brisk_status st =
      brisk_tool_call_grammar(s->model, s->cfg.chat_template, job->tools_json, name, &g);
  if (st)
    return sv_fail(e, st == BRISK_E_OUT_OF_MEMORY ? 500 : 400, "tools", "%s", brisk_last_error());
  char *copy = strdup(g);
  brisk_string_free(g);
  return set_constraint(job, BRISK_CONSTRAINT_GBNF, copy, e);
}

json_object *sv_parse_body(sv_server *s, const char *body, size_t len, sv_error *e) {
  json_tokener *tok = json_tokener_new();
  if (!tok) {
    sv_fail(e, 500, NULL, "out of memory");
    return NULL;
  }
  json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
  json_object *o = json_tokener_parse_ex(tok, body, (int)len);
  enum json_tokener_error jerr = json_tokener_get_error(tok);
  size_t used = json_tokener_get_parse_end(tok);
  json_tokener_free(tok);
  if (len > INT32_MAX || !o || jerr != json_tokener_success) {
    sv_fail(e, 400, NULL, "the body is not valid JSON: %s",
            !o && jerr == json_tokener_continue ? "unexpected end" : json_tokener_error_desc(jerr));
    goto fail;
  }
  for (size_t i = used; i < len; i++)
    if (!strchr(" \t\r\n", body[i])) {
      sv_fail(e, 400, NULL, "the body is not valid JSON: text after the value at byte %zu", i);
      goto fail;
    }
  if (!json_object_is_type(o, json_type_object)) {
    sv_fail(e, 400, NULL, "the body must be a JSON object");
    goto fail;
  }
  json_object *model = get(o, "model");
  if (model && (!json_object_is_type(model, json_type_string) ||
                (json_object_get_string_len(model) &&
                 strcmp(json_object_get_string(model), s->cfg.model_name)))) {
    sv_fail(e, 404, "model", "The model '%s' does not exist; this server serves '%s'",
            json_object_get_string(model), s->cfg.model_name);
    e->code = "model_not_found";
    goto fail;
  }
  return o;
fail:
  json_object_put(o);
  return NULL;
}

bool sv_parse_request(sv_server *s, sv_kind kind, const char *body, size_t len, sv_job *job,
                      sv_error *e) {
  if (kind == SV_EMBEDDING) return sv_parse_embedding(s, body, len, job, e);
  memset(job, 0, sizeof *job);
  job->kind = kind;
  job->n = 1;
  brisk_sampler_params_init(&job->sampler);
  bool ok = false;
  json_object *o = sv_parse_body(s, body, len, e);
  if (!o) goto done;
  if (!refuse_unsupported(o, kind, e)) goto done;
  if (!parse_structured(s, o, kind, job, e)) goto done;
  double d;
  int64_t i64;
  bool b;
  /* sampling: OpenAI's default temperature is 1 */
  d = 1.0;
  if (!get_num(o, "temperature", 0, 2, &d, e)) goto done;
  job->sampler.temperature = (float)d;
  d = 1.0;
  if (!get_num(o, "top_p", 0, 1, &d, e)) goto done;
  if (d <= 0) {
    sv_fail(e, 400, "top_p", "'top_p' must be greater than 0");
    goto done;
  }
  job->sampler.top_p = (float)d;
  d = 0;
  if (!get_num(o, "presence_penalty", -2, 2, &d, e)) goto done;
  job->sampler.presence_penalty = (float)d;
  d = 0;
  if (!get_num(o, "frequency_penalty", -2, 2, &d, e)) goto done;
  job->sampler.frequency_penalty = (float)d;
  /* extensions that llama.cpp's and vLLM's servers accept too */
  i64 = 0;
  if (!get_int(o, "top_k", -1, INT32_MAX, &i64, e)) goto done;
  job->sampler.top_k = i64 < 0 ? 0 : (int32_t)i64;
  d = 0;
  if (!get_num(o, "min_p", 0, 1, &d, e)) goto done;
  job->sampler.min_p = (float)d;
  d = 1;
  if (!get_num(o, "typical_p", 1e-6, 1, &d, e)) goto done;
  job->sampler.typical_p = (float)d;
  d = 1;
  if (!get_num(o, "repetition_penalty", 1e-6, 100, &d, e)) goto done;
  job->sampler.repeat_penalty = (float)d;
  i64 = 0;
  if (!get_int(o, "seed", INT64_MIN, INT64_MAX, &i64, e)) goto done;
  job->sampler.seed = (uint64_t)i64;
  if (!parse_logit_bias(s, get(o, "logit_bias"), job, e)) goto done;
  if (!parse_stop(get(o, "stop"), job, e)) goto done;
  if (!get_bool(o, "ignore_eos", &job->ignore_eos, e)) goto done;
  i64 = 0;
  if (!get_int(o, "spec_n_draft", 0, 64, &i64, e)) goto done;
  job->spec_n_draft = (int32_t)i64;
  i64 = 1;
  if (!get_int(o, "n", 1, s->max_running, &i64, e)) goto done;
  job->n = (int32_t)i64;
  if (get(o, "best_of")) {
    int64_t best_of = job->n;
    if (!get_int(o, "best_of", 1, s->max_running, &best_of, e)) goto done;
    if (best_of != job->n) {
      sv_fail(e, 400, "best_of", "'best_of' other than 'n' is not supported");
      goto done;
    }
  }
  if (!get_bool(o, "stream", &job->stream, e)) goto done;
  json_object *so = get(o, "stream_options");
  if (so) {
    if (!json_object_is_type(so, json_type_object)) {
      sv_fail(e, 400, "stream_options", "'stream_options' must be an object");
      goto done;
    }
    if (!get_bool(so, "include_usage", &job->include_usage, e)) goto done;
  }
  /* max_tokens: -1 until known (chat: the room the context leaves) */
  i64 = -1;
  if (!get_int(o, "max_tokens", 1, INT32_MAX, &i64, e)) goto done;
  if (kind == SV_CHAT && !get_int(o, "max_completion_tokens", 1, INT32_MAX, &i64, e)) goto done;
  if (kind == SV_COMPLETION && i64 < 0) i64 = 16; /* the legacy API's default */
  job->max_tokens = (int32_t)i64;
  if (kind == SV_CHAT) {
    b = false;
    if (!get_bool(o, "logprobs", &b, e)) goto done;
    i64 = 0;
    if (!get_int(o, "top_logprobs", 0, BRISK_MAX_LOGPROBS, &i64, e)) goto done;
    if (i64 > 0 && !b) {
      sv_fail(e, 400, "top_logprobs", "'top_logprobs' needs 'logprobs': true");
      goto done;
    }
    job->logprobs = b;
    job->want_top = (int32_t)i64;
    if (!parse_messages(s, get(o, "messages"), job, e)) goto done;
  } else {
    i64 = -1;
    if (!get_int(o, "logprobs", 0, BRISK_MAX_LOGPROBS, &i64, e)) goto done;
    job->logprobs = i64 >= 0;
    job->want_top = i64 > 0 ? (int32_t)i64 : 0;
    if (!get_bool(o, "echo", &job->echo, e)) goto done;
    if (job->echo && job->logprobs) {
      sv_fail(e, 400, "echo", "'echo' together with 'logprobs' is not supported");
      goto done;
    }
    if (!parse_prompt(s, get(o, "prompt"), job, e)) goto done;
  }
  /* Limits: every completion's prompt plus output must fit the context. */
  const int32_t ctx = s->cfg.ctx_size;
  for (size_t k = 0; k < job->n_subs; k++) {
    const char *param = kind == SV_CHAT ? "messages" : "prompt";
    if (job->n_prompts[k] == 0) {
      sv_fail(e, 400, param, "the prompt gives no tokens");
      goto done;
    }
    if (job->n_prompts[k] >= ctx) {
      sv_fail(e, 400, param,
              "This model's maximum context length is %d tokens; the prompt has %d tokens",
              (int)ctx, (int)job->n_prompts[k]);
      e->code = "context_length_exceeded";
      goto done;
    }
    if (job->max_tokens > 0 && (int64_t)job->n_prompts[k] + job->max_tokens > ctx) {
      sv_fail(e, 400, kind == SV_CHAT ? "max_tokens" : "max_tokens",
              "This model's maximum context length is %d tokens; the prompt has %d tokens and "
              "max_tokens asks for %d more",
              (int)ctx, (int)job->n_prompts[k], (int)job->max_tokens);
      e->code = "context_length_exceeded";
      goto done;
    }
  }
  if ((uint64_t)job->n_subs * (uint64_t)job->n > (uint64_t)s->max_running) {
    sv_fail(e, 400, "n", "prompts times 'n' must be at most %d", (int)s->max_running);
    goto done;
  }
  job->n_choices = job->n_subs * (size_t)job->n;
  job->subs = calloc(job->n_subs, sizeof *job->subs);
  job->choices = calloc(job->n_choices, sizeof *job->choices);
  if (!job->subs || !job->choices) {
    sv_fail(e, 500, NULL, "out of memory");
    goto done;
  }
  job->sampler.n_logprobs = 0; /* the engine's own logprobs field is used */
  job->created = (int64_t)time(NULL);
  ok = true;
done:
  json_object_put(o);
  return ok;
}

void sv_job_clear(sv_job *job) {
  free(job->constraint_text);
  free(job->tools_json);
  for (size_t i = 0; i < job->n_stop; i++) free(job->stop[i]);
  free(job->stop);
  free(job->bias);
  for (size_t i = 0; i < job->n_subs; i++) {
    free(job->prompts[i]);
    free(job->prompt_texts[i]);
  }
  free(job->prompts);
  free(job->n_prompts);
  free(job->prompt_texts);
  for (size_t i = 0; job->choices && i < job->n_choices; i++) {
    free(job->choices[i].text);
    free(job->choices[i].tokens);
  }
  free(job->choices);
  free(job->subs);
  free(job->vectors);
}
