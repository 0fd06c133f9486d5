/* The OpenAI answer mapping: a job's accumulated output becomes a
 * chat.completion / text_completion object, or, streaming, the
 * chat.completion.chunk / text_completion events of server-sent events.
 * Called with sv_server.mu held (the router appends to the same choices). */
#include "serve.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at p (1..4), or 0 if invalid. */
static size_t utf8_len(const unsigned char *p, size_t n) {
  if (p[0] < 0x80) return 1;
  size_t len = (p[0] & 0xe0) == 0xc0   ? 2
               : (p[0] & 0xf0) == 0xe0 ? 3
               : (p[0] & 0xf8) == 0xf0 ? 4
                                       : 0;
  if (!len || len > n || (len == 2 && p[0] < 0xc2)) return 0;
  for (size_t i = 1; i < len; i++)
    if ((p[i] & 0xc0) != 0x80) return 0;
  if (len == 3 && ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] >= 0xa0))) return 0;
  if (len == 4 && ((p[0] == 0xf0 && p[1] < 0x90) || p[0] > 0xf4 || (p[0] == 0xf4 && p[1] >= 0x90)))
    return 0;
  return len;
}

bool sv_buf_append_utf8(char **buf, size_t *len, size_t *cap, const char *data, size_t n) {
  for (size_t i = 0; i < n;) {
    size_t l = utf8_len((const unsigned char *)data + i, n - i), run = 0;
    if (!l) {
      if (!sv_buf_append(buf, len, cap, "\xef\xbf\xbd", 3)) return false;
      i++;
      continue;
    }
    while (i + run < n && (l = utf8_len((const unsigned char *)data + i + run, n - i - run)))
      run += l;
    if (!sv_buf_append(buf, len, cap, data + i, run)) return false;
    i += run;
  }
  return true;
}

/* A JSON string of bytes that may be partial UTF-8 (one token's piece):
 * invalid bytes become U+FFFD, as OpenAI's "token" fields do. */
static json_object *piece_string(const char *b, size_t n) {
  char out[4 * 256];
  size_t o = 0;
  for (size_t i = 0; i < n && o + 4 <= sizeof out;) {
    size_t l = utf8_len((const unsigned char *)b + i, n - i);
    if (l) {
      memcpy(out + o, b + i, l);
      o += l;
      i += l;
    } else {
      memcpy(out + o, "\xef\xbf\xbd", 3);
      o += 3;
      i++;
    }
  }
  return json_object_new_string_len(out, (int)o);
}

static json_object *token_object(sv_server *s, int32_t token, float logprob, bool top_list) {
  char piece[256];
  size_t n = 0;
  if (brisk_token_to_piece(s->model, token, BRISK_DETOKENIZE_RENDER_SPECIAL, piece, sizeof piece,
                           &n) != BRISK_OK)
    n = 0;
  if (n > sizeof piece) n = sizeof piece;
  json_object *o = json_object_new_object(), *bytes = json_object_new_array();
  for (size_t i = 0; i < n; i++)
    json_object_array_add(bytes, json_object_new_int((unsigned char)piece[i]));
  json_object_object_add(o, "token", piece_string(piece, n));
  /* JSON has no -Infinity: a forbidden token reads -9999, as OpenAI writes it */
  json_object_object_add(o, "logprob",
                         json_object_new_double(isfinite(logprob) ? logprob : -9999.0));
  json_object_object_add(o, "bytes", bytes);
  (void)top_list;
  return o;
}

/* Chat logprobs of tokens [from, to): {"content": [...], "refusal": null}. */
static json_object *chat_logprobs(sv_server *s, const sv_job *job, const sv_choice *c, size_t from,
                                  size_t to) {
  json_object *lp = json_object_new_object(), *content = json_object_new_array();
  for (size_t i = from; i < to; i++) {
    const sv_token *t = &c->tokens[i];
    json_object *o = token_object(s, t->token, t->logprob, false), *top = json_object_new_array();
    for (int32_t k = 0; k < t->n_top && k < job->want_top; k++)
      json_object_array_add(top, token_object(s, t->top[k].token, t->top[k].logprob, true));
    json_object_object_add(o, "top_logprobs", top);
    json_object_array_add(content, o);
  }
  json_object_object_add(lp, "content", content);
  json_object_object_add(lp, "refusal", NULL);
  return lp;
}

/* Legacy completions logprobs of tokens [from, to); text offsets start at base. */
static json_object *completion_logprobs(sv_server *s, const sv_job *job, const sv_choice *c,
                                        size_t from, size_t to, size_t base) {
  json_object *lp = json_object_new_object(), *tokens = json_object_new_array(),
              *lps = json_object_new_array(), *tops = json_object_new_array(),
              *offs = json_object_new_array();
  for (size_t i = from; i < to; i++) {
    const sv_token *t = &c->tokens[i];
    json_object *o = token_object(s, t->token, t->logprob, false), *tok = NULL, *val = NULL;
    json_object_object_get_ex(o, "token", &tok);
    json_object_object_get_ex(o, "logprob", &val);
    json_object_array_add(tokens, json_object_get(tok));
    json_object_array_add(lps, json_object_get(val));
    json_object_put(o);
    json_object *top = json_object_new_object();
    for (int32_t k = 0; k < t->n_top && k < job->want_top; k++) {
      json_object *a = token_object(s, t->top[k].token, t->top[k].logprob, true), *at, *av;
      json_object_object_get_ex(a, "token", &at);
      json_object_object_get_ex(a, "logprob", &av);
      if (!json_object_object_get_ex(top, json_object_get_string(at), NULL))
        json_object_object_add(top, json_object_get_string(at), json_object_get(av));
      json_object_put(a);
    }
    json_object_array_add(tops, top);
    /* where this token's text starts: the text released before its event */
    size_t start = i > 0 ? c->tokens[i - 1].text_end : 0;
    json_object_array_add(offs, json_object_new_int64((int64_t)(base + start)));
  }
  json_object_object_add(lp, "tokens", tokens);
  json_object_object_add(lp, "token_logprobs", lps);
  json_object_object_add(lp, "top_logprobs", tops);
  json_object_object_add(lp, "text_offset", offs);
  return lp;
}

static const char *finish_reason(brisk_finish_reason r) {
  switch (r) {
  case BRISK_FINISH_EOG:
  case BRISK_FINISH_STOP: return "stop";
  case BRISK_FINISH_LENGTH: return "length";
  case BRISK_FINISH_CANCELLED: return "abort";
  default: return "error";
  }
}

/* With tools: the calls in choice c's text, as OpenAI's tool_calls array
 * (arguments as a JSON string, ids call_<index>_<n>), and the text around
 * them in *content (malloc'ed; NULL when blank). NULL when the text holds
 * no call (then *content is the whole text). */
static json_object *tool_calls(sv_server *s, const sv_job *job, size_t i, char **content) {
  const sv_choice *c = &job->choices[i];
  *content = NULL;
  char *calls = NULL, *rest = NULL;
  if (brisk_chat_parse_tool_calls(s->model, s->cfg.chat_template, c->text ? c->text : "", c->len,
                                  &calls, &rest))
    return NULL;
  json_object *arr = calls ? json_tokener_parse(calls) : NULL, *out = NULL;
  if (arr) {
    out = json_object_new_array();
    for (size_t k = 0; k < json_object_array_length(arr); k++) {
      json_object *x = json_object_array_get_idx(arr, k), *name = NULL, *args = NULL;
      json_object_object_get_ex(x, "name", &name);
      json_object_object_get_ex(x, "arguments", &args);
      char id[48];
      snprintf(id, sizeof id, "call%s_%zu_%zu", job->id + (strncmp(job->id, "chatcmpl", 8) ? 0 : 8),
               i, k);
      json_object *tc = json_object_new_object(), *fn = json_object_new_object();
      json_object_object_add(tc, "id", json_object_new_string(id));
      json_object_object_add(tc, "type", json_object_new_string("function"));
      json_object_object_add(fn, "name", json_object_get(name));
      json_object_object_add(fn, "arguments",
                             json_object_new_string(json_object_to_json_string_ext(
                                 args, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)));
      json_object_object_add(tc, "function", fn);
      json_object_array_add(out, tc);
    }
    json_object_put(arr);
  }
  /* the content without the blank around the calls */
  const char *a = rest ? rest : "", *z = a + strlen(a);
  while (a < z && strchr(" \t\r\n", *a)) a++;
  while (z > a && strchr(" \t\r\n", z[-1])) z--;
  if (z > a && (*content = malloc((size_t)(z - a) + 1))) {
    memcpy(*content, a, (size_t)(z - a));
    (*content)[z - a] = 0;
  }
  brisk_string_free(calls);
  brisk_string_free(rest);
  return out;
}

static json_object *usage(const sv_job *job) {
  int64_t prompt = 0, gen = 0, cached = 0;
  for (size_t k = 0; k < job->n_subs; k++) {
    prompt += job->subs[k].n_prompt;
    cached += job->subs[k].n_cached;
  }
  for (size_t i = 0; i < job->n_choices; i++) gen += job->choices[i].n_generated;
  json_object *u = json_object_new_object();
  json_object_object_add(u, "prompt_tokens", json_object_new_int64(prompt));
  json_object_object_add(u, "completion_tokens", json_object_new_int64(gen));
  json_object_object_add(u, "total_tokens", json_object_new_int64(prompt + gen));
  json_object *details = json_object_new_object();
  json_object_object_add(details, "cached_tokens", json_object_new_int64(cached));
  json_object_object_add(u, "prompt_tokens_details", details);
  return u;
}

static json_object *envelope(sv_server *s, const sv_job *job, const char *object) {
  json_object *o = json_object_new_object();
  json_object_object_add(o, "id", json_object_new_string(job->id));
  json_object_object_add(o, "object", json_object_new_string(object));
  json_object_object_add(o, "created", json_object_new_int64(job->created));
  json_object_object_add(o, "model", json_object_new_string(s->cfg.model_name));
  return o;
}

/* The prompt's text for echo: the request's string, or its tokens' text. */
static bool echo_text(sv_server *s, const sv_job *job, size_t k, char **out, size_t *len) {
  if (job->prompt_texts[k]) {
    *out = strdup(job->prompt_texts[k]);
    *len = *out ? strlen(*out) : 0;
    return *out != NULL;
  }
  size_t need = 0;
  brisk_detokenize(s->model, job->prompts[k], (size_t)job->n_prompts[k],
                   BRISK_DETOKENIZE_REMOVE_SPECIAL, NULL, 0, &need);
  char *raw = malloc(need + 1);
  if (!raw) return false;
  if (brisk_detokenize(s->model, job->prompts[k], (size_t)job->n_prompts[k],
                       BRISK_DETOKENIZE_REMOVE_SPECIAL, raw, need, &need))
    need = 0;
  /* Token ids can spell bytes that are not UTF-8 (half a character, a byte
   * token): JSON must be UTF-8, so those become U+FFFD as in the output. */
  size_t cap = 0;
  *out = NULL;
  *len = 0;
  bool ok = sv_buf_append(out, len, &cap, "", 0) && sv_buf_append_utf8(out, len, &cap, raw, need);
  free(raw);
  if (!ok) {
    free(*out);
    *out = NULL;
  }
  return ok;
}

static char *to_string_free(json_object *o) {
  const char *j =
      json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
  char *copy = j ? strdup(j) : NULL;
  json_object_put(o);
  return copy;
}

char *sv_response_json(sv_server *s, sv_job *job) {
  if (job->kind == SV_EMBEDDING) return sv_embedding_json(s, job);
  const bool chat = job->kind == SV_CHAT;
  json_object *o = envelope(s, job, chat ? "chat.completion" : "text_completion"),
              *choices = json_object_new_array();
  for (size_t i = 0; i < job->n_choices; i++) {
    const sv_choice *c = &job->choices[i];
    json_object *ch = json_object_new_object();
    json_object_object_add(ch, "index", json_object_new_int64((int64_t)i));
    size_t base = 0;
    if (chat) {
      json_object *msg = json_object_new_object();
      json_object_object_add(msg, "role", json_object_new_string("assistant"));
      json_object *calls = NULL;
      char *content = NULL;
      if (job->tools_json && (calls = tool_calls(s, job, i, &content))) {
        json_object_object_add(msg, "content", content ? json_object_new_string(content) : NULL);
        json_object_object_add(msg, "tool_calls", calls);
      } else {
        json_object_object_add(msg, "content",
                               json_object_new_string_len(c->text ? c->text : "", (int)c->len));
      }
      free(content);
      json_object_object_add(msg, "refusal", NULL);
      json_object_object_add(ch, "message", msg);
      if (calls) {
        json_object_object_add(ch, "logprobs", NULL);
        json_object_object_add(ch, "finish_reason", json_object_new_string("tool_calls"));
        json_object_array_add(choices, ch);
        continue;
      }
    } else {
      char *echo = NULL;
      size_t echo_len = 0;
      if (job->echo && !echo_text(s, job, i / (size_t)job->n, &echo, &echo_len)) {
        json_object_put(ch);
        json_object_put(choices);
        json_object_put(o);
        return NULL;
      }
      char *all = malloc(echo_len + c->len + 1);
      if (all) {
        if (echo_len) memcpy(all, echo, echo_len);
        if (c->len) memcpy(all + echo_len, c->text, c->len);
        json_object_object_add(ch, "text",
                               json_object_new_string_len(all, (int)(echo_len + c->len)));
      }
      free(all);
      free(echo);
      base = echo_len;
    }
    json_object *lp = NULL;
    if (job->logprobs)
      lp = chat ? chat_logprobs(s, job, c, 0, c->n_tokens)
                : completion_logprobs(s, job, c, 0, c->n_tokens, base);
    json_object_object_add(ch, "logprobs", lp);
    json_object_object_add(ch, "finish_reason", json_object_new_string(finish_reason(c->reason)));
    json_object_array_add(choices, ch);
  }
  json_object_object_add(o, "choices", choices);
  json_object_object_add(o, "usage", usage(job));
  return to_string_free(o);
}

/* One streaming chunk for choice i: its new text (from, n), its new tokens'
 * logprobs, and its finish reason (NULL while open). */
static json_object *chunk(sv_server *s, sv_job *job, size_t i, const char *text, size_t n,
                          bool role, size_t tok_from, size_t tok_to, const char *finish) {
  const bool chat = job->kind == SV_CHAT;
  const sv_choice *c = &job->choices[i];
  json_object *o = envelope(s, job, chat ? "chat.completion.chunk" : "text_completion"),
              *choices = json_object_new_array(), *ch = json_object_new_object();
  json_object_object_add(ch, "index", json_object_new_int64((int64_t)i));
  if (chat) {
    json_object *delta = json_object_new_object();
    if (role) json_object_object_add(delta, "role", json_object_new_string("assistant"));
    if (role || n)
      json_object_object_add(delta, "content", json_object_new_string_len(text, (int)n));
    json_object_object_add(ch, "delta", delta);
  } else {
    json_object_object_add(ch, "text", json_object_new_string_len(text, (int)n));
  }
  json_object *lp = NULL;
  if (job->logprobs && tok_to > tok_from)
    lp = chat ? chat_logprobs(s, job, c, tok_from, tok_to)
              : completion_logprobs(s, job, c, tok_from, tok_to, 0);
  json_object_object_add(ch, "logprobs", lp);
  json_object_object_add(ch, "finish_reason", finish ? json_object_new_string(finish) : NULL);
  json_object_array_add(choices, ch);
  json_object_object_add(o, "choices", choices);
  return o;
}

static bool emit(char **out, size_t *len, size_t *cap, json_object *o) {
  bool ok = sv_buf_sse(out, len, cap, o);
  json_object_put(o);
  return ok;
}

bool sv_stream_chunks(sv_server *s, sv_job *job, char **out, size_t *len, size_t *cap, bool *done) {
  *done = false;
  if (job->error) {
    sv_error e;
    sv_fail(&e, 500, NULL, "generation failed: %s",
            job->error_message[0] ? job->error_message : "sampling or memory");
    char *j = sv_error_json(&e);
    bool ok = j && sv_buf_append(out, len, cap, "data: ", 6) &&
              sv_buf_append(out, len, cap, j, strlen(j)) &&
              sv_buf_append(out, len, cap, "\n\ndata: [DONE]\n\n", 16);
    free(j);
    *done = true;
    return ok;
  }
  bool all_sent = true;
  for (size_t i = 0; i < job->n_choices; i++) {
    sv_choice *c = &job->choices[i];
    bool role = job->kind == SV_CHAT && !c->sent_role;
    if (job->kind == SV_COMPLETION && job->echo && !c->sent_role) {
      char *echo;
      size_t echo_len;
      if (!echo_text(s, job, i / (size_t)job->n, &echo, &echo_len)) return false;
      bool ok =
          !echo_len || emit(out, len, cap, chunk(s, job, i, echo, echo_len, false, 0, 0, NULL));
      free(echo);
      if (!ok) return false;
    }
    c->sent_role = true;
    size_t tok_to = c->n_tokens;
    if (job->tools_json && job->kind == SV_CHAT) {
      /* With tools the text may be a call: held until the choice ends,
       * then sent as content or as tool_calls. */
      if (role && !emit(out, len, cap, chunk(s, job, i, "", 0, true, 0, 0, NULL))) return false;
      if (c->finished && !c->sent_finish) {
        char *content = NULL;
        json_object *calls = tool_calls(s, job, i, &content);
        json_object *o;
        if (calls) {
          o = chunk(s, job, i, content ? content : "", content ? strlen(content) : 0, false, 0, 0,
                    NULL);
          json_object *ch = json_object_array_get_idx(json_object_object_get(o, "choices"), 0);
          json_object *delta = json_object_object_get(ch, "delta");
          for (size_t k = 0; k < json_object_array_length(calls); k++)
            json_object_object_add(json_object_array_get_idx(calls, k), "index",
                                   json_object_new_int64((int64_t)k));
          json_object_object_add(delta, "tool_calls", calls);
        } else {
          o = chunk(s, job, i, c->text ? c->text : "", c->len, false, 0, 0, NULL);
        }
        free(content);
        if (!emit(out, len, cap, o) ||
            !emit(out, len, cap,
                  chunk(s, job, i, "", 0, false, 0, 0,
                        calls ? "tool_calls" : finish_reason(c->reason))))
          return false;
        c->sent_len = c->len;
        c->sent_finish = true;
      }
      all_sent &= c->sent_finish;
      continue;
    }
    if (role || c->len > c->sent_len || tok_to > c->sent_tokens) {
      if (!emit(out, len, cap,
                chunk(s, job, i, c->text ? c->text + c->sent_len : "", c->len - c->sent_len, role,
                      c->sent_tokens, tok_to, NULL)))
        return false;
      c->sent_len = c->len;
      c->sent_tokens = tok_to;
    }
    if (c->finished && !c->sent_finish) {
      if (!emit(out, len, cap, chunk(s, job, i, "", 0, false, 0, 0, finish_reason(c->reason))))
        return false;
      c->sent_finish = true;
    }
    all_sent &= c->sent_finish;
  }
  if (!all_sent) return true;
  if (job->include_usage) {
    json_object *o =
        envelope(s, job, job->kind == SV_CHAT ? "chat.completion.chunk" : "text_completion");
    json_object_object_add(o, "choices", json_object_new_array());
    json_object_object_add(o, "usage", usage(job));
    if (!emit(out, len, cap, o)) return false;
  }
  *done = true;
  return sv_buf_append(out, len, cap, "data: [DONE]\n\n", 14);
}

char *sv_error_json(const sv_error *e) {
  json_object *o = json_object_new_object(), *err = json_object_new_object();
  json_object_object_add(err, "message", json_object_new_string(e->message));
  json_object_object_add(err, "type", json_object_new_string(e->type ? e->type : "server_error"));
  json_object_object_add(err, "param", e->param[0] ? json_object_new_string(e->param) : NULL);
  json_object_object_add(err, "code", e->code ? json_object_new_string(e->code) : NULL);
  json_object_object_add(o, "error", err);
  return to_string_free(o);
}
