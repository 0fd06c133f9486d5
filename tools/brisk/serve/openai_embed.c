/* POST /v1/embeddings (OpenAI's format): "input" is a string, an array of
 * strings, an array of token ids or an array of arrays of token ids; each
 * input becomes one engine embedding request (brisk_engine_submit_embed),
 * so the engine packs them, and other clients' inputs, into its steps next
 * to generation. "encoding_format" is "float" (default) or "base64" (the
 * little-endian float32 bytes, what the official client asks for);
 * "dimensions" must be the model's own; "user" is ignored. brisk's own
 * fields: "pooling" ("mean", "cls", "last"; default the model folder's) and
 * "normalize" (default true: OpenAI's vectors have unit length). */
#include "serve.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { SV_MAX_INPUTS = 2048 }; /* OpenAI's limit */

static json_object *field(json_object *o, const char *key) {
  json_object *v = NULL;
  return json_object_object_get_ex(o, key, &v) ? v : NULL; /* null: absent */
}

/* One input: a text (copied) or token ids (checked against the vocabulary
 * here so the error names the input). */
static bool add_input(sv_server *s, sv_job *job, json_object *v, size_t i, sv_error *e) {
  size_t k = job->n_subs;
  if (k >= SV_MAX_INPUTS)
    return sv_fail(e, 400, "input", "at most %d inputs per request", SV_MAX_INPUTS);
  int32_t **p = realloc(job->prompts, (k + 1) * sizeof *p);
  if (p) job->prompts = p;
  int32_t *np = p ? realloc(job->n_prompts, (k + 1) * sizeof *np) : NULL;
  if (np) job->n_prompts = np;
  char **pt = np ? realloc(job->prompt_texts, (k + 1) * sizeof *pt) : NULL;
  if (pt) job->prompt_texts = pt;
  if (!pt) return sv_fail(e, 500, NULL, "out of memory");
  job->prompts[k] = NULL;
  job->n_prompts[k] = 0;
  job->prompt_texts[k] = NULL;
  job->n_subs = k + 1; /* sv_job_clear frees what is set */
  if (json_object_is_type(v, json_type_string)) {
    size_t len = (size_t)json_object_get_string_len(v);
    if (len == 0) return sv_fail(e, 400, "input", "'input'[%zu] is an empty string", i);
    if (!(job->prompt_texts[k] = strndup(json_object_get_string(v), len)))
      return sv_fail(e, 500, NULL, "out of memory");
    return true;
  }
  size_t n = json_object_array_length(v);
  if (n == 0) return sv_fail(e, 400, "input", "'input'[%zu] is an empty array", i);
  if (n > INT32_MAX / 2) return sv_fail(e, 400, "input", "'input'[%zu] is too long", i);
  int32_t *ids = malloc(n * sizeof *ids);
  if (!ids) return sv_fail(e, 500, NULL, "out of memory");
  job->prompts[k] = ids;
  job->n_prompts[k] = (int32_t)n;
  const int32_t n_vocab = brisk_model_n_vocab(s->model);
  for (size_t t = 0; t < n; t++) {
    json_object *x = json_object_array_get_idx(v, t);
    int64_t id = json_object_is_type(x, json_type_int) ? json_object_get_int64(x) : -1;
    if (id < 0 || id >= n_vocab)
      return sv_fail(e, 400, "input", "'input'[%zu][%zu] is not a token id in [0, %d)", i, t,
                     n_vocab);
    ids[t] = (int32_t)id;
  }
  return true;
}

static bool parse_input(sv_server *s, json_object *v, sv_job *job, sv_error *e) {
  if (!v) return sv_fail(e, 400, "input", "'input' is required");
  if (json_object_is_type(v, json_type_string)) return add_input(s, job, v, 0, e);
  if (!json_object_is_type(v, json_type_array))
    return sv_fail(e, 400, "input", "'input' must be a string or an array");
  size_t n = json_object_array_length(v);
  if (n == 0) return sv_fail(e, 400, "input", "'input' must not be empty");
  if (json_object_is_type(json_object_array_get_idx(v, 0), json_type_int))
    return add_input(s, job, v, 0, e); /* one input of token ids */
  for (size_t i = 0; i < n; i++) {
    json_object *x = json_object_array_get_idx(v, i);
    if (!json_object_is_type(x, json_type_string) &&
        !(json_object_is_type(x, json_type_array) &&
          !json_object_is_type(json_object_array_get_idx(x, 0), json_type_array)))
      return sv_fail(e, 400, "input", "'input'[%zu] must be a string or an array of token ids", i);
    if (!add_input(s, job, x, i, e)) return false;
  }
  return true;
}

static bool parse_options(sv_server *s, json_object *o, sv_job *job, sv_error *e) {
  json_object *v = field(o, "encoding_format");
  if (v) {
    const char *f = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
    if (!strcmp(f, "base64"))
      job->base64 = true;
    else if (strcmp(f, "float"))
      return sv_fail(e, 400, "encoding_format",
                     "'encoding_format' must be \"float\" or \"base64\"");
  }
  if ((v = field(o, "dimensions")) &&
      (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) != job->n_embd))
    return sv_fail(e, 400, "dimensions",
                   "'dimensions' must be the model's embedding size %d (vectors are not cut)",
                   (int)job->n_embd);
  if ((v = field(o, "user")) && !json_object_is_type(v, json_type_string))
    return sv_fail(e, 400, "user", "'user' must be a string");
  job->embed_normalize = 1;
  if ((v = field(o, "normalize"))) {
    if (!json_object_is_type(v, json_type_boolean))
      return sv_fail(e, 400, "normalize", "'normalize' must be a boolean");
    job->embed_normalize = json_object_get_boolean(v) ? 1 : 0;
  }
  if ((v = field(o, "pooling"))) {
    static const char *const names[] = {"default", "mean", "cls", "last"};
    const char *p = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
    int32_t k = 0;
    while (k < 4 && strcmp(p, names[k])) k++;
    if (k == 4)
      return sv_fail(e, 400, "pooling", "'pooling' must be \"mean\", \"cls\" or \"last\"");
    job->embed_pooling = k; /* brisk_embed_pooling's order */
  }
  (void)s;
  return true;
}

bool sv_parse_embedding(sv_server *s, const char *body, size_t len, sv_job *job, sv_error *e) {
  memset(job, 0, sizeof *job);
  job->kind = SV_EMBEDDING;
  job->n = 1;
  job->n_embd = brisk_model_n_embd(s->model);
  json_object *o = sv_parse_body(s, body, len, e);
  bool ok = o && parse_options(s, o, job, e) && parse_input(s, field(o, "input"), job, e);
  if (ok) {
    job->n_choices = job->n_subs;
    job->subs = calloc(job->n_subs, sizeof *job->subs);
    job->choices = calloc(job->n_choices, sizeof *job->choices);
    job->vectors = calloc(job->n_subs * (size_t)job->n_embd, sizeof *job->vectors);
    if (!job->subs || !job->choices || !job->vectors) ok = sv_fail(e, 500, NULL, "out of memory");
  }
  job->created = (int64_t)time(NULL);
  json_object_put(o);
  return ok;
}

void sv_route_embedding(sv_server *s, sv_sub *sub, const brisk_engine_event *ev) {
  sv_job *job = sub->job;
  size_t k = (size_t)(sub - job->subs), n = 0;
  job->wake = true;
  sub->n_open--;
  s->n_engine_open--;
  brisk_request_stats st = {.struct_size = sizeof st};
  brisk_status got = brisk_engine_request_stats(s->engine, ev->id, &st);
  if (got == BRISK_OK) sub->n_prompt = st.n_prompt_tokens;
  if (ev->reason == BRISK_FINISH_LENGTH &&
      brisk_engine_embedding(s->engine, ev->id, job->vectors + k * (size_t)job->n_embd,
                             (size_t)job->n_embd, &n) == BRISK_OK) {
    const float *v = job->vectors + k * (size_t)job->n_embd;
    size_t bad = 0;
    while (bad < n && isfinite(v[bad])) bad++;
    if (bad == n) return;
    job->error = true; /* JSON cannot carry it */
    snprintf(job->error_message, sizeof job->error_message,
             "input %zu: the model gave a non-finite value at element %zu", k, bad);
    return;
  }
  job->error = true;
  if (!job->error_message[0])
    snprintf(job->error_message, sizeof job->error_message, "%s",
             got == BRISK_OK && st.error[0]         ? st.error
             : ev->reason == BRISK_FINISH_CANCELLED ? "cancelled"
                                                    : brisk_last_error());
}

/* The vector's float32 values as little-endian bytes in base64 (what the
 * official client decodes with numpy.frombuffer(..., dtype="float32")). */
static json_object *base64_vector(const float *v, size_t d) {
  static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  size_t nb = d * 4, out_len = (nb + 2) / 3 * 4;
  unsigned char *b = malloc(nb ? nb : 1);
  char *out = malloc(out_len + 1);
  json_object *o = NULL;
  if (b && out) {
    for (size_t i = 0; i < d; i++) {
      uint32_t u;
      memcpy(&u, &v[i], 4);
      for (int j = 0; j < 4; j++) b[i * 4 + (size_t)j] = (unsigned char)(u >> (8 * j));
    }
    size_t w = 0;
    for (size_t i = 0; i < nb; i += 3) {
      uint32_t x = (uint32_t)b[i] << 16;
      if (i + 1 < nb) x |= (uint32_t)b[i + 1] << 8;
      if (i + 2 < nb) x |= b[i + 2];
      out[w++] = abc[(x >> 18) & 63];
      out[w++] = abc[(x >> 12) & 63];
      out[w++] = i + 1 < nb ? abc[(x >> 6) & 63] : '=';
      out[w++] = i + 2 < nb ? abc[x & 63] : '=';
    }
    o = json_object_new_string_len(out, (int)w);
  }
  free(b);
  free(out);
  return o;
}

char *sv_embedding_json(sv_server *s, sv_job *job) {
  json_object *o = json_object_new_object(), *data = json_object_new_array();
  int64_t tokens = 0;
  size_t d = (size_t)job->n_embd;
  for (size_t k = 0; k < job->n_subs; k++) {
    json_object *item = json_object_new_object(), *vec;
    json_object_object_add(item, "object", json_object_new_string("embedding"));
    json_object_object_add(item, "index", json_object_new_int64((int64_t)k));
    const float *v = job->vectors + k * d;
    if (job->base64) {
      vec = base64_vector(v, d);
    } else {
      vec = json_object_new_array();
      for (size_t i = 0; vec && i < d; i++)
        json_object_array_add(vec, json_object_new_double((double)v[i]));
    }
    json_object_object_add(item, "embedding", vec);
    json_object_array_add(data, item);
    tokens += job->subs[k].n_prompt;
  }
  json_object_object_add(o, "object", json_object_new_string("list"));
  json_object_object_add(o, "data", data);
  json_object_object_add(o, "model", json_object_new_string(s->cfg.model_name));
  json_object *usage = json_object_new_object();
  json_object_object_add(usage, "prompt_tokens", json_object_new_int64(tokens));
  json_object_object_add(usage, "total_tokens", json_object_new_int64(tokens));
  json_object_object_add(o, "usage", usage);
  const char *text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
  char *out = text ? strdup(text) : NULL;
  json_object_put(o);
  return out;
}
