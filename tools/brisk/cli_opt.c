#include "cli_opt.h"

#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HELP_COLUMN 26

int cli_usage_error(const char *cmd, const char *fmt, ...) {
  fprintf(stderr, "brisk %s: ", cmd);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  return CLI_EXIT_USAGE;
}

int cli_max_threads(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  if (n < 1) n = 1;
  return n > 256 ? 1024 : (int)n * 4;
}

static void fmt_num(double v, char *buf, size_t cap) {
  if (v == (double)(long long)v && fabs(v) < 1e15)
    snprintf(buf, cap, "%lld", (long long)v);
  else
    snprintf(buf, cap, "%g", v);
}

/* What a value of o must be: "a whole number from 0 to 64", ... */
static void describe(const cli_opt *o, char *buf, size_t cap) {
  char lo[32], hi[32];
  fmt_num(o->lo, lo, sizeof lo);
  fmt_num(o->hi, hi, sizeof hi);
  switch (o->kind) {
  case CLI_INT:
    if (o->hi >= INT_MAX)
      snprintf(buf, cap, "a whole number >= %s", lo);
    else
      snprintf(buf, cap, "a whole number from %s to %s", lo, hi);
    break;
  case CLI_U64: snprintf(buf, cap, "a whole number >= 0"); break;
  case CLI_FLOAT:
  case CLI_DOUBLE:
    if (isinf(o->hi))
      snprintf(buf, cap, "a number %s %s", o->lo_open ? ">" : ">=", lo);
    else if (o->lo_open)
      snprintf(buf, cap, "a number > %s and <= %s", lo, hi);
    else
      snprintf(buf, cap, "a number from %s to %s", lo, hi);
    break;
  case CLI_CHOICE: {
    size_t n = (size_t)snprintf(buf, cap, "one of");
    for (int i = 0; o->choices[i] && n < cap; i++)
      n += (size_t)snprintf(buf + n, cap - n, "%s %s", i ? "," : "", o->choices[i]);
    break;
  }
  default: snprintf(buf, cap, "%s", o->metavar ? o->metavar : "a value");
  }
}

/* Parses value into o's destination. NULL when good, else what it must be
 * (in buf). */
static const char *set_value(const cli_opt *o, const char *v, char *buf, size_t cap) {
  char *end;
  errno = 0;
  switch (o->kind) {
  case CLI_INT: {
    long long x = strtoll(v, &end, 10);
    if (errno || end == v || *end || (double)x < o->lo || (double)x > o->hi) break;
    *(int *)o->dst = (int)x;
    return NULL;
  }
  case CLI_U64: {
    while (*v == ' ') v++;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || end == v || *end || *v == '-' || *v == '+') break;
    *(uint64_t *)o->dst = x;
    return NULL;
  }
  case CLI_FLOAT:
  case CLI_DOUBLE: {
    double x = strtod(v, &end);
    if (errno || end == v || *end || !isfinite(x) || x < o->lo || x > o->hi ||
        (o->lo_open && x == o->lo))
      break;
    if (o->kind == CLI_FLOAT)
      *(float *)o->dst = (float)x;
    else
      *(double *)o->dst = x;
    return NULL;
  }
  case CLI_STR: *(const char **)o->dst = v; return NULL;
  case CLI_STR_LIST:
    if (*o->count >= o->max) {
      snprintf(buf, cap, "at most %d of them", o->max);
      return buf;
    }
    ((const char **)o->dst)[(*o->count)++] = v;
    return NULL;
  case CLI_CHOICE:
    for (int i = 0; o->choices[i]; i++)
      if (!strcmp(v, o->choices[i])) {
        *(int *)o->dst = i;
        return NULL;
      }
    break;
  case CLI_CUSTOM: return o->parse(v, o->dst);
  case CLI_FLAG: return NULL;
  }
  describe(o, buf, cap);
  return buf;
}

/* Edits (insert, delete, replace, swap two neighbours) from a to b: a typo
 * such as "--hepl" is one edit from "--help". */
size_t cli_edit_distance(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b), d[64][64];
  if (la >= 63 || lb >= 63) return 99;
  for (size_t i = 0; i <= la; i++) d[i][0] = i;
  for (size_t j = 0; j <= lb; j++) d[0][j] = j;
  for (size_t i = 1; i <= la; i++)
    for (size_t j = 1; j <= lb; j++) {
      size_t best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
      if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
      if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
          d[i - 2][j - 2] + 1 < best)
        best = d[i - 2][j - 2] + 1;
      d[i][j] = best;
    }
  return d[la][lb];
}

static int unknown_option(const cli_spec *s, const char *arg) {
  char name[64];
  size_t n = strcspn(arg, "=");
  snprintf(name, sizeof name, "%.*s", (int)(n < 60 ? n : 60), arg);
  const char *best = NULL;
  size_t best_d = 99;
  char cand[80];
  char best_name[80] = "";
  static const char *const builtin[] = {"help", "version"};
  for (size_t g = 0; g <= s->n_groups; g++) {
    size_t n_opts = g < s->n_groups ? s->groups[g].n_opts : 2;
    for (size_t i = 0; i < n_opts; i++) {
      const char *ln = g < s->n_groups ? s->groups[g].opts[i].long_name : builtin[i];
      if (!ln) continue;
      snprintf(cand, sizeof cand, "--%s", ln);
      size_t d = cli_edit_distance(name, cand);
      if (d < best_d) best_d = d, best = ln, snprintf(best_name, sizeof best_name, "%s", cand);
    }
  }
  /* A suggestion only when it is close: a typo, not a different word. */
  if (best && best_d <= (strlen(name) > 6 ? 3 : 2))
    return cli_usage_error(s->cmd, "unknown option '%s' (did you mean '%s'?)", name, best_name);
  return cli_usage_error(s->cmd, "unknown option '%s' (try 'brisk %s --help')", name, s->cmd);
}

static const cli_opt *find_long(const cli_spec *s, const char *name, size_t len) {
  for (size_t g = 0; g < s->n_groups; g++)
    for (size_t i = 0; i < s->groups[g].n_opts; i++) {
      const cli_opt *o = &s->groups[g].opts[i];
      if (o->long_name && strlen(o->long_name) == len && !strncmp(o->long_name, name, len))
        return o;
    }
  return NULL;
}

static const cli_opt *find_short(const cli_spec *s, char c) {
  for (size_t g = 0; g < s->n_groups; g++)
    for (size_t i = 0; i < s->groups[g].n_opts; i++)
      if (s->groups[g].opts[i].short_name == c) return &s->groups[g].opts[i];
  return NULL;
}

int cli_parse(const cli_spec *s, int argc, char **argv) {
  int n_pos = 0;
  bool only_operands = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (only_operands || a[0] != '-' || !a[1]) {
      if (n_pos == s->max_pos)
        return cli_usage_error(s->cmd, "unexpected argument '%s' (try 'brisk %s --help')", a,
                               s->cmd);
      s->pos[n_pos++] = a;
      continue;
    }
    if (!strcmp(a, "--")) {
      only_operands = true;
      continue;
    }
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      cli_print_help(s, stdout);
      return 0;
    }
    if (!strcmp(a, "--version")) {
      printf("brisk %s %s\n", s->cmd, brisk_version_string());
      return 0;
    }
    const cli_opt *o;
    const char *inline_val = NULL;
    char name[80];
    if (a[1] == '-') {
      size_t len = strcspn(a + 2, "=");
      o = find_long(s, a + 2, len);
      if (!o &&
          ((len == 4 && !strncmp(a + 2, "help", 4)) || (len == 7 && !strncmp(a + 2, "version", 7))))
        return cli_usage_error(s->cmd, "--%.*s takes no value", (int)len, a + 2);
      if (!o) return unknown_option(s, a);
      if (a[2 + len] == '=') inline_val = a + 3 + len;
      snprintf(name, sizeof name, "--%s", o->long_name);
    } else {
      o = find_short(s, a[1]);
      if (!o) return unknown_option(s, a);
      if (a[2]) inline_val = a + 2;
      snprintf(name, sizeof name, "-%c", o->short_name);
    }
    if (o->given) *o->given = true;
    if (o->kind == CLI_FLAG) {
      if (inline_val) return cli_usage_error(s->cmd, "%s takes no value", name);
      *(bool *)o->dst = true;
      continue;
    }
    const char *v = inline_val;
    if (!v) {
      if (i + 1 >= argc) {
        char want[256];
        describe(o, want, sizeof want);
        return cli_usage_error(s->cmd, "%s needs a value (%s: %s)", name,
                               o->metavar ? o->metavar : "VALUE", want);
      }
      v = argv[++i];
    }
    char want[256];
    const char *bad = set_value(o, v, want, sizeof want);
    if (bad) return cli_usage_error(s->cmd, "%s '%s': expected %s", name, v, bad);
  }
  if (n_pos < s->min_pos) {
    const char *first_line_end = s->usage ? strchr(s->usage, '\n') : NULL;
    int len =
        s->usage ? (first_line_end ? (int)(first_line_end - s->usage) : (int)strlen(s->usage)) : 0;
    return cli_usage_error(s->cmd, "missing operand (usage: brisk %s %.*s)", s->cmd, len,
                           s->usage ? s->usage : "");
  }
  if (s->n_pos) *s->n_pos = n_pos;
  return CLI_CONTINUE;
}

/* Prints text indented to `col`, the continuation lines too. */
static void print_wrapped(FILE *out, const char *text, int col) {
  for (const char *p = text; *p;) {
    size_t n = strcspn(p, "\n");
    fprintf(out, "%.*s\n", (int)n, p);
    p += n;
    if (*p == '\n' && *++p) fprintf(out, "%*s", col, "");
  }
}

static void print_opt(FILE *out, const cli_opt *o) {
  char left[96];
  size_t n = 0;
  if (o->short_name && o->long_name)
    n = (size_t)snprintf(left, sizeof left, "  -%c, --%s", o->short_name, o->long_name);
  else if (o->short_name)
    n = (size_t)snprintf(left, sizeof left, "  -%c", o->short_name);
  else
    n = (size_t)snprintf(left, sizeof left, "      --%s", o->long_name);
  if (o->kind != CLI_FLAG && n < sizeof left)
    snprintf(left + n, sizeof left - n, " %s", o->metavar ? o->metavar : "VALUE");
  fputs(left, out);
  int w = (int)strlen(left);
  if (w + 2 > HELP_COLUMN)
    fprintf(out, "\n%*s", HELP_COLUMN, "");
  else
    fprintf(out, "%*s", HELP_COLUMN - w, "");
  print_wrapped(out, o->help ? o->help : "", HELP_COLUMN);
}

void cli_print_help(const cli_spec *s, FILE *out) {
  fprintf(out, "usage: brisk %s ", s->cmd);
  print_wrapped(out, s->usage ? s->usage : "[options]", 13 + (int)strlen(s->cmd));
  if (s->summary) {
    fputc('\n', out);
    print_wrapped(out, s->summary, 0);
  }
  for (size_t g = 0; g < s->n_groups; g++) {
    fprintf(out, "\n%s:\n", s->groups[g].title ? s->groups[g].title : "options");
    for (size_t i = 0; i < s->groups[g].n_opts; i++) print_opt(out, &s->groups[g].opts[i]);
  }
  fputs("\ngeneral:\n", out);
  static const cli_opt help = {CLI_FLAG_OPT('h', "help", NULL, "show this help and exit")};
  static const cli_opt version = {CLI_FLAG_OPT(0, "version", NULL, "show the version and exit")};
  print_opt(out, &help);
  print_opt(out, &version);
  if (s->epilog) {
    fputc('\n', out);
    print_wrapped(out, s->epilog, 0);
  }
}

const char *const cli_kv_type_names[] = {"f16", "f32", "q8_0", "fp8", NULL};

cli_group cli_model_group(cli_model_args *a, const char *path_help) {
  static char threads_help[128];
  snprintf(threads_help, sizeof threads_help,
           "threads, the calling one included (default 0: one per\nprocessor; at most %d)",
           cli_max_threads());
  size_t n = 0;
  a->opts[n++] = (cli_opt){CLI_STR_OPT('m', "model", &a->path, "PATH", path_help)};
  a->opts[n++] =
      (cli_opt){CLI_INT_OPT('t', "threads", &a->threads, "N", threads_help, 0, cli_max_threads())};
  a->opts[n++] =
      (cli_opt){CLI_FLAG_OPT(0, "no-mmap", &a->no_mmap, "read the file instead of mapping it")};
  a->opts[n++] = (cli_opt){CLI_FLAG_OPT(0, "no-repack", &a->no_repack,
                                        "weights exactly as stored (no packed CPU layouts)")};
  a->opts[n++] = (cli_opt){CLI_STR_OPT(0, "device", &a->device, "DEVICE",
                                       "where the model runs: cpu (default) or cuda:N\n(brisk "
                                       "version lists the devices)")};
  a->opts[n++] = (cli_opt){CLI_INT_OPT(0, "n-gpu-layers", &a->n_gpu_layers, "N",
                                       "with a GPU device: its first N layers there, the rest\n"
                                       "on the CPU (default -1: all)",
                                       -1, 1 << 20),
                           .given = &a->n_gpu_layers_given};
  a->opts[n++] = (cli_opt){CLI_CUSTOM_OPT(0, "memory-limit", &a->memory_limit, "BYTES",
                                          "the most host memory brisk may hold (K, M, G\n"
                                          "suffixes); past it, BRISK_E_OUT_OF_MEMORY",
                                          cli_parse_bytes)};
  a->opts[n++] = (cli_opt){CLI_INT_OPT(0, "tp", &a->tp, "N",
                                       "tensor parallelism: the model cut into N ranks (1, 2,\n"
                                       "4, 8), threads of this process sharing --threads;\n"
                                       "with --device cuda:K one rank per GPU (cuda:K..K+N-1,\n"
                                       "over NCCL); logits bit for bit those of 1",
                                       0, 8)};
  a->opts[n++] = (cli_opt){CLI_INT_OPT(0, "pp", &a->pp, "N",
                                       "pipeline parallelism: the layers cut into N stages,\n"
                                       "each its own rank thread (x --tp ranks), sharing\n"
                                       "--threads; logits bit for bit those of 1 (CPU only)",
                                       0, 16)};
  return (cli_group){"model", a->opts, n};
}

const char *cli_parse_bytes(const char *value, void *dst) {
  static const char what[] = "a byte count: digits with an optional K, M, G or T suffix";
  const char *p = value;
  uint64_t v = 0;
  if (*p < '0' || *p > '9') return what;
  for (; *p >= '0' && *p <= '9'; p++) {
    if (v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10) return what;
    v = v * 10 + (uint64_t)(*p - '0');
  }
  int shift = 0;
  switch (*p) {
  case 'k':
  case 'K':
    shift = 10;
    p++;
    break;
  case 'm':
  case 'M':
    shift = 20;
    p++;
    break;
  case 'g':
  case 'G':
    shift = 30;
    p++;
    break;
  case 't':
  case 'T':
    shift = 40;
    p++;
    break;
  default: break;
  }
  if (shift && *p == 'i') p++;
  if (*p == 'B' || (*p == 'b' && !shift)) p++;
  if (*p) return what;
  if (shift && v > UINT64_MAX >> shift) return what;
  *(uint64_t *)dst = v << shift;
  return NULL;
}

void cli_model_params(const cli_model_args *a, brisk_model_params *mp) {
  brisk_model_params_init(mp);
  mp->use_mmap = !a->no_mmap;
  mp->repack = !a->no_repack;
  mp->device = a->device;
  if (a->n_gpu_layers_given) mp->n_gpu_layers = a->n_gpu_layers;
  brisk_set_memory_limit(a->memory_limit);
  mp->tp_size = a->tp;
  mp->pp_size = a->pp;
}

static void mpi_at_exit(void) { brisk_mpi_finalize(); }

static bool mpi_joined;
static int32_t mpi_rank, mpi_size;

int cli_mpi_join(const char *cmd, int tp, int pp) {
  /* The launcher says the job's size: a job of the wrong size fails on
   * every rank before any joins (a rank that joined would wait for the
   * others). */
  const char *env = getenv("OMPI_COMM_WORLD_SIZE");
  if (!env) env = getenv("PMI_SIZE");
  const int ranks = (tp > 1 ? tp : 1) * (pp > 1 ? pp : 1);
  if (ranks < 2 || !env) return -1;
  long job = strtol(env, NULL, 10);
  if (job == 1) return -1; /* one process: the ranks are threads */
  if (job != ranks && tp > 1 && pp > 1)
    return cli_fail(cmd,
                    "under mpirun: --tp %d x --pp %d needs a job of %d processes (mpirun -np %d); "
                    "it has %ld",
                    tp, pp, ranks, ranks, job);
  if (job != ranks)
    return cli_fail(cmd,
                    "under mpirun: --%s %d needs a job of %d processes (mpirun -np %d); it has %ld",
                    tp > 1 ? "tp" : "pp", ranks, ranks, ranks, job);
  if (brisk_mpi_world(&mpi_rank, &mpi_size))
    return cli_fail(cmd, "under mpirun: %s", brisk_last_error());
  mpi_joined = true;
  atexit(mpi_at_exit);
  return -1;
}

int cli_mpi_size(void) { return mpi_joined ? (int)mpi_size : 0; }

int cli_mpi_follow(const char *cmd, int threads, const brisk_model *m) {
  if (!mpi_joined || mpi_rank == 0) return -1;
  if (brisk_worker_run(m, threads))
    return cli_fail(cmd, "rank %d: %s", (int)mpi_rank, brisk_last_error());
  return 0;
}

char *cli_read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap + 1);
  for (size_t got; buf && (got = fread(buf + n, 1, cap - n, f)) > 0;) {
    n += got;
    if (n == cap) {
      char *nb = realloc(buf, (cap *= 2) + 1);
      if (!nb) free(buf);
      buf = nb;
    }
  }
  fclose(f);
  if (buf) buf[n] = 0;
  *len = n;
  return buf;
}
