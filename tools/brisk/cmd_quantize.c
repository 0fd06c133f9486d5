/* brisk quantize IN.gguf OUT.gguf PRESET: re-encodes a GGUF model's weight
 * matrices with brisk's own quantizers (lib/quant), the type of each
 * tensor chosen by the preset as llama-quantize chooses it (quant/preset.h:
 * Q4_K_M gives attention V and FFN down of some layers Q6_K, the output
 * Q6_K, ...). Every metadata key is kept (general.file_type and
 * general.quantization_version are set) and every tensor the preset does
 * not quantize (norms, biases) is copied as it is. Each row is dequantized
 * to float and quantized again, so any readable type converts to any
 * quantizable one. Rows are spread over a thread pool. */
#include "brisk.h"
#include "cli.h"
#include "cli_opt.h"
#include "imatrix_file.h"
#include "load_progress.h"

#include "core/dtype.h"
#include "core/error.h"
#include "core/threadpool.h"
#include "format/gguf.h"
#include "quant/preset.h"
#include "quant/quant.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int cmd_quantize(int argc, char **argv);

static brisk_status copy_kv(const brisk_gguf *g, int64_t i, brisk_gguf_writer *w) {
  const char *key = brisk_gguf_key(g, i);
  brisk_gguf_type t = brisk_gguf_kv_type(g, i);
  if (t == BRISK_GGUF_STRING) {
    brisk_gguf_str s = brisk_gguf_kv_str(g, i);
    return brisk_gguf_writer_set_strn(w, key, s.ptr, s.len);
  }
  if (t != BRISK_GGUF_ARRAY)
    return brisk_gguf_writer_set_scalar(w, key, t, brisk_gguf_kv_scalar(g, i));
  brisk_gguf_type et = brisk_gguf_kv_arr_type(g, i);
  uint64_t n = brisk_gguf_kv_arr_len(g, i);
  if (et != BRISK_GGUF_STRING)
    return brisk_gguf_writer_set_arr(w, key, et, brisk_gguf_arr_data(g, i), n);
  brisk_gguf_str *strs = malloc((n ? n : 1) * sizeof *strs);
  if (!strs) return BRISK_E_OUT_OF_MEMORY;
  for (uint64_t j = 0; j < n; j++) strs[j] = brisk_gguf_arr_str(g, i, j);
  brisk_status st = brisk_gguf_writer_set_arr_strn(w, key, strs, n);
  free(strs);
  return st;
}

/* One tensor's conversion, split into row ranges run by the pool. */
typedef struct convert_job {
  const brisk_gguf_tensor *t;
  uint32_t type;
  uint64_t cols, rows, in_row, out_row, rows_per_task;
  unsigned char *out; /* [rows][out_row] */
  brisk_status *st;   /* [tasks] */
  const float *imp;   /* [n_mat][cols] column importance, or NULL */
  uint64_t rows_per_mat;
} convert_job;

static void convert_task(void *ctx, size_t k) {
  convert_job *j = ctx;
  const unsigned char *in = j->t->data; /* [rows][in_row] */
  uint64_t r0 = k * j->rows_per_task, r1 = r0 + j->rows_per_task;
  if (r1 > j->rows) r1 = j->rows;
  float *f = malloc(j->cols * sizeof *f); /* [cols] */
  brisk_status st = f ? BRISK_OK : BRISK_E_OUT_OF_MEMORY;
  for (uint64_t r = r0; r < r1 && !st; r++) {
    st = brisk_dequantize_row(j->t->type, in + r * j->in_row, f, (int64_t)j->cols);
    const float *imp = j->imp ? j->imp + (r / j->rows_per_mat) * j->cols : NULL;
    if (!st)
      st = brisk_quantize_row_weighted(j->type, f, j->out + r * j->out_row, (int64_t)j->cols, imp);
  }
  free(f);
  j->st[k] = st;
}

/* Re-encodes one tensor in `type` (rows dequantized, then quantized). */
static brisk_status convert(brisk_threadpool *pool, const brisk_gguf_tensor *t, uint32_t type,
                            const imatrix_entry *ie, brisk_gguf_writer *w, uint64_t *out_bytes) {
  convert_job j = {.t = t, .type = type, .cols = t->ne[0], .rows = 1};
  float *imp = NULL;
  for (uint32_t d = 1; d < t->n_dims; d++) j.rows *= t->ne[d];
  if (!brisk_dtype_row_bytes(t->type, j.cols, &j.in_row) ||
      !brisk_dtype_row_bytes(type, j.cols, &j.out_row) || j.out_row * j.rows / j.rows != j.out_row)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "%s: rows too large", t->name);
  /* About four tasks per thread so that uneven rows still balance. */
  size_t tasks = (size_t)brisk_parallel_concurrency(pool) * 4;
  if (tasks > j.rows) tasks = j.rows ? (size_t)j.rows : 1;
  j.rows_per_task = (j.rows + tasks - 1) / tasks;
  tasks = j.rows ? (size_t)((j.rows + j.rows_per_task - 1) / j.rows_per_task) : 0;
  const uint64_t out_bytes_all = j.out_row * j.rows;
  /* Stacked matrices (experts) each have their own importance. */
  if (ie && j.rows % (uint64_t)ie->n_mat)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "%s: %llu rows do not split into %lld matrices",
                       t->name, (unsigned long long)j.rows, (long long)ie->n_mat);
  j.out = malloc(out_bytes_all ? (size_t)out_bytes_all : 1);
  j.st = calloc(tasks ? tasks : 1, sizeof *j.st);
  if (ie && (imp = malloc((size_t)ie->n_mat * j.cols * sizeof *imp))) {
    for (int64_t m = 0; m < ie->n_mat; m++) imatrix_importance(ie, m, imp + (size_t)m * j.cols);
    j.imp = imp;
    j.rows_per_mat = j.rows / (uint64_t)ie->n_mat;
  }
  brisk_status st = j.out && j.st && (!ie || imp) ? BRISK_OK : BRISK_E_OUT_OF_MEMORY;
  if (!st) brisk_parallel_for(pool, tasks, convert_task, &j);
  for (size_t k = 0; k < tasks && !st; k++) st = j.st[k];
  if (!st)
    st =
        brisk_gguf_writer_add_tensor(w, t->name, type, t->n_dims, t->ne, j.out, j.out_row * j.rows);
  *out_bytes = j.out_row * j.rows;
  free(j.out);
  free(j.st);
  free(imp);
  return st;
}

static int by_llama_order(const void *a, const void *b) {
  const brisk_gguf_tensor *x = *(const brisk_gguf_tensor *const *)a;
  const brisk_gguf_tensor *y = *(const brisk_gguf_tensor *const *)b;
  return brisk_quant_mix_order(x->name, y->name);
}

/* The output type of every tensor (indexed as in the file), chosen in
 * llama.cpp's visiting order since the mix rules count tensors. */
static brisk_status choose_types(const brisk_gguf *g, const brisk_quant_preset *preset, bool pure,
                                 bool has_imatrix, uint32_t *types) {
  int64_t n = brisk_gguf_n_tensors(g);
  const brisk_gguf_tensor **order = malloc((size_t)(n ? n : 1) * sizeof *order);
  const char **names = malloc((size_t)(n ? n : 1) * sizeof *names);
  if (!order || !names) {
    free(order);
    free(names);
    return BRISK_E_OUT_OF_MEMORY;
  }
  for (int64_t i = 0; i < n; i++) {
    order[i] = brisk_gguf_tensor_at(g, i);
    names[i] = order[i]->name;
  }
  qsort(order, (size_t)n, sizeof *order, by_llama_order);
  char arch[64] = "", key[96];
  brisk_gguf_str s;
  if (!brisk_gguf_get_str(g, "general.architecture", &s) && s.len < sizeof arch) {
    memcpy(arch, s.ptr, s.len);
    arch[s.len] = 0;
  }
  uint32_t n_layer = 0;
  snprintf(key, sizeof key, "%s.block_count", arch);
  if (brisk_gguf_get_u32(g, key, &n_layer)) n_layer = 0;
  brisk_quant_mix mix;
  brisk_quant_mix_init(&mix, preset, pure, arch, (int)n_layer, names, (int)n);
  mix.has_imatrix = has_imatrix;
  for (int64_t i = 0; i < n; i++) {
    const brisk_gguf_tensor *t = order[i];
    uint32_t ty = brisk_quant_mix_type(&mix, t->name, t->n_dims, t->ne[0], t->type);
    /* A tensor brisk cannot read as float is copied as it is. */
    if (ty != t->type && !brisk_quant_can_dequantize(t->type)) ty = t->type;
    types[t - brisk_gguf_tensor_at(g, 0)] = ty;
  }
  free(order);
  free(names);
  return BRISK_OK;
}

static void list_presets(char *buf, size_t cap) {
  size_t n = 0;
  buf[0] = 0;
  for (int i = 0; brisk_quant_preset_at(i) && n < cap; i++)
    n += (size_t)snprintf(buf + n, cap - n, "%s%s", i ? ", " : "", brisk_quant_preset_at(i)->name);
}

int cmd_quantize(int argc, char **argv) {
  const char *args[3];
  bool json = false, pure = false;
  int threads = 0;
  const char *imatrix_path = NULL;
  static char threads_help[96];
  snprintf(threads_help, sizeof threads_help,
           "threads, the calling one included (default 0: one per\nprocessor; at most %d)",
           cli_max_threads());
  const cli_opt q_opts[] = {
      {CLI_FLAG_OPT(0, "pure", &pure,
                    "every quantized matrix gets the preset's default type (no\n"
                    "per-tensor rules; shape fallbacks still apply)")},
      {CLI_INT_OPT('t', "threads", &threads, "N", threads_help, 0, cli_max_threads())},
      {CLI_STR_OPT(0, "imatrix", &imatrix_path, "PATH",
                   "importance matrix (brisk imatrix or llama-imatrix, GGUF\n"
                   "or .dat): the block search weights each column's error")},
  };
  const cli_opt opts[] = {{CLI_FLAG_OPT(0, "json", &json, "one JSON object on stdout")}};
  const cli_group groups[] = {{"quantization", q_opts, 3}, {"output", opts, 1}};
  const cli_spec spec = {
      .cmd = "quantize",
      .usage = "IN.gguf OUT.gguf PRESET [--imatrix F] [--pure] [-t N] [--json]",
      .summary = "Re-encodes the weight matrices of a GGUF model (each row dequantized, then\n"
                 "quantized again with brisk's quantizers). PRESET (any letter case) is one of\n"
                 "llama.cpp's file types, with its per-tensor rules: Q4_K_M and Q5_K_M give\n"
                 "attention V and FFN down of the first and last eighth of the layers (and\n"
                 "every third between) Q6_K; Q4_K_S gives the first four attention V and the\n"
                 "first eighth of FFN down Q5_K; every quantized preset gives the output\n"
                 "(or the tied embedding) Q6_K, or Q8_0 when 256 does not divide its rows;\n"
                 "K types fall back to Q5_0 / Q5_1 / Q8_0 for such rows. Presets: F32, F16,\n"
                 "BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K_S, Q4_K_M, Q5_K_S, Q5_K_M, Q6_K,\n"
                 "and Q4_K / Q5_K (one type for all matrices). Norms, biases and metadata\n"
                 "are kept; general.file_type is set. On a terminal, a progress bar on\n"
                 "stderr counts the bytes converted.",
      .groups = groups,
      .n_groups = 2,
      .min_pos = 3,
      .max_pos = 3,
      .pos = args,
  };
  int prc = cli_parse(&spec, argc, argv);
  if (prc != CLI_CONTINUE) return prc;
  const brisk_quant_preset *preset = brisk_quant_preset_find(args[2]);
  if (!preset) {
    char list[256];
    list_presets(list, sizeof list);
    return cli_usage_error("quantize", "PRESET '%s' is not one brisk can write (%s)", args[2],
                           list);
  }
  brisk_gguf *g = NULL;
  brisk_gguf_writer *w = NULL;
  brisk_threadpool *pool = NULL;
  uint32_t *types = NULL;
  imatrix im = {0};
  if (imatrix_path && imatrix_read(imatrix_path, &im))
    return cli_fail("quantize", "%s: %s", imatrix_path, brisk_last_error());
  if (brisk_gguf_open(args[0], &g) || brisk_gguf_writer_create(3, brisk_gguf_alignment(g), &w) ||
      brisk_threadpool_create(threads, &pool)) {
    int rc = cli_fail("quantize", "%s", brisk_last_error());
    imatrix_free(&im);
    brisk_threadpool_free(pool);
    brisk_gguf_writer_free(w);
    brisk_gguf_close(g);
    return rc;
  }
  const int64_t n_tensors = brisk_gguf_n_tensors(g);
  types = malloc((size_t)(n_tensors ? n_tensors : 1) * sizeof *types);
  brisk_status st =
      types ? choose_types(g, preset, pure, imatrix_path != NULL, types) : BRISK_E_OUT_OF_MEMORY;
  for (int64_t i = 0; i < brisk_gguf_n_kv(g) && !st; i++) {
    const char *key = brisk_gguf_key(g, i);
    if (!strcmp(key, "general.alignment") || !strcmp(key, "general.file_type") ||
        !strcmp(key, "general.quantization_version"))
      continue;
    st = copy_kv(g, i, w);
  }
  if (!st) st = brisk_gguf_writer_set_u32(w, "general.quantization_version", 2);
  if (!st) st = brisk_gguf_writer_set_u32(w, "general.file_type", preset->file_type);
  int64_t converted = 0, kept = 0, weighted = 0, unweighted = 0;
  uint64_t bytes = 0, in_total = 0, in_done = 0, n_type[BRISK_DTYPE_COUNT] = {0};
  for (int64_t i = 0; i < n_tensors; i++) in_total += brisk_gguf_tensor_at(g, i)->n_bytes;
  cli_bar bar = {.label = "quantizing"};
  const bool show = isatty(STDERR_FILENO) && !json;
  for (int64_t i = 0; i < n_tensors && !st; i++) {
    const brisk_gguf_tensor *t = brisk_gguf_tensor_at(g, i);
    uint64_t b = 0;
    if (types[i] != t->type) {
      const imatrix_entry *ie = NULL;
      if (imatrix_path && brisk_quant_uses_importance(types[i])) {
        ie = imatrix_find(&im, t->name);
        if (ie && (uint64_t)ie->n_cols != t->ne[0]) ie = NULL; /* another model's */
        ie ? weighted++ : unweighted++;
      }
      st = convert(pool, t, types[i], ie, w, &b);
      converted++;
    } else {
      b = t->n_bytes;
      st = brisk_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, b);
      kept++;
    }
    if (types[i] < BRISK_DTYPE_COUNT) n_type[types[i]]++;
    bytes += b;
    in_done += t->n_bytes;
    if (show) {
      char extra[64];
      snprintf(extra, sizeof extra, "%lld / %lld tensors", (long long)i + 1, (long long)n_tensors);
      cli_bar_draw(&bar, in_total ? (double)in_done / (double)in_total : 1.0, extra);
    }
  }
  cli_bar_clear(&bar);
  if (!st) st = brisk_gguf_writer_write_file(w, args[1]);
  brisk_gguf_writer_free(w);
  brisk_threadpool_free(pool);
  free(types);
  imatrix_free(&im);
  if (st) {
    brisk_gguf_close(g);
    return cli_fail("quantize", "%s: %s", brisk_status_string(st), brisk_last_error());
  }
  uint64_t n_elem = 0;
  for (int64_t i = 0; i < n_tensors; i++) {
    const brisk_gguf_tensor *t = brisk_gguf_tensor_at(g, i);
    uint64_t e = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) e *= t->ne[d];
    n_elem += e;
  }
  brisk_gguf_close(g);
  const double bpw = n_elem ? 8.0 * (double)bytes / (double)n_elem : 0;
  if (json) {
    printf("{\"in\": ");
    cli_json_string(stdout, args[0]);
    printf(", \"out\": ");
    cli_json_string(stdout, args[1]);
    printf(", \"preset\": \"%s\", \"type\": \"%s\", \"file_type\": %u, \"converted\": %" PRId64
           ", \"kept\": %" PRId64 ", \"tensor_bytes\": %" PRIu64 ", \"bits_per_weight\": %.4f",
           preset->name, brisk_dtype_name(preset->default_type), preset->file_type, converted, kept,
           bytes, bpw);
    if (imatrix_path)
      printf(", \"imatrix_tensors\": %" PRId64 ", \"no_imatrix_tensors\": %" PRId64, weighted,
             unweighted);
    printf(", \"tensor_types\": {");
    bool first = true;
    for (uint32_t ty = 0; ty < BRISK_DTYPE_COUNT; ty++)
      if (n_type[ty]) {
        printf("%s\"%s\": %" PRIu64, first ? "" : ", ", brisk_dtype_name(ty), n_type[ty]);
        first = false;
      }
    printf("}}\n");
  } else
    printf("%s -> %s: %s, %" PRId64 " matrices converted, %" PRId64
           " tensors kept, %.1f MiB, %.2f bits per weight\n",
           args[0], args[1], preset->name, converted, kept, (double)bytes / 1048576.0, bpw);
  return 0;
}
