/* brisk quantize IN.gguf OUT.gguf TYPE: re-encodes a GGUF model's weight
 * matrices in another tensor type with brisk's own reference quantizers
 * (lib/quant), keeping every metadata key (general.file_type is updated)
 * and every one-dimensional tensor (norms, biases) as it is. Each row is
 * dequantized to float and quantized again, so any readable type converts
 * to any quantizable one: e.g. an F16 copy of a Q4_1 file, or a Q4_0 draft
 * of an F16 model. */
#include "brisk.h"
#include "cli.h"
#include "cli_opt.h"
#include "load_progress.h"

#include "core/dtype.h"
#include "format/gguf.h"
#include "quant/quant.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int cmd_quantize(int argc, char **argv);

/* general.file_type values (llama.cpp's llama_ftype) of the types we write. */
static int file_type_of(uint32_t type) {
  switch (type) {
  case BRISK_DTYPE_F32: return 0;
  case BRISK_DTYPE_F16: return 1;
  case BRISK_DTYPE_Q4_0: return 2;
  case BRISK_DTYPE_Q4_1: return 3;
  case BRISK_DTYPE_Q8_0: return 7;
  case BRISK_DTYPE_Q5_0: return 8;
  case BRISK_DTYPE_Q5_1: return 9;
  case BRISK_DTYPE_BF16: return 32;
  default: return -1;
  }
}

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

/* Re-encodes one tensor in `type` (rows dequantized, then quantized). */
static brisk_status convert(const brisk_gguf_tensor *t, uint32_t type, brisk_gguf_writer *w,
                            uint64_t *out_bytes) {
  uint64_t cols = t->ne[0], rows = 1, in_row, out_row;
  for (uint32_t d = 1; d < t->n_dims; d++) rows *= t->ne[d];
  if (!brisk_dtype_row_bytes(t->type, cols, &in_row) ||
      !brisk_dtype_row_bytes(type, cols, &out_row))
    return BRISK_E_INVALID_ARGUMENT;
  float *f = malloc(cols * sizeof *f);         // [cols]
  unsigned char *out = malloc(out_row * rows); // [rows][out_row]
  brisk_status st = f && out ? BRISK_OK : BRISK_E_OUT_OF_MEMORY;
  const unsigned char *in = t->data; // [rows][in_row]
  for (uint64_t r = 0; r < rows && !st; r++) {
    st = brisk_dequantize_row(t->type, in + r * in_row, f, (int64_t)cols);
    if (!st) st = brisk_quantize_row(type, f, out + r * out_row, (int64_t)cols);
  }
  if (!st)
    st = brisk_gguf_writer_add_tensor(w, t->name, type, t->n_dims, t->ne, out, out_row * rows);
  *out_bytes = out_row * rows;
  free(f);
  free(out);
  return st;
}

int cmd_quantize(int argc, char **argv) {
  const char *args[3];
  bool json = false;
  const cli_opt opts[] = {{CLI_FLAG_OPT(0, "json", &json, "one JSON object on stdout")}};
  const cli_group groups[] = {{"output", opts, 1}};
  const cli_spec spec = {
      .cmd = "quantize",
      .usage = "IN.gguf OUT.gguf TYPE [--json]",
      .summary = "Re-encodes every weight matrix of a GGUF model in TYPE (each row dequantized,\n"
                 "then quantized again with brisk's reference quantizers); vectors (norms,\n"
                 "biases) and all metadata are kept, general.file_type is updated. TYPE: f32,\n"
                 "f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k. On a terminal,\n"
                 "a progress bar on stderr counts the tensors.",
      .groups = groups,
      .n_groups = 1,
      .min_pos = 3,
      .max_pos = 3,
      .pos = args,
  };
  int prc = cli_parse(&spec, argc, argv);
  if (prc != CLI_CONTINUE) return prc;
  uint32_t type = BRISK_DTYPE_COUNT;
  for (uint32_t id = 0; id < BRISK_DTYPE_COUNT; id++) {
    const brisk_dtype_info *d = brisk_dtype_get(id);
    if (d && !strcmp(d->name, args[2]) && brisk_quant_can_quantize(id)) type = id;
  }
  if (type == BRISK_DTYPE_COUNT)
    return cli_usage_error("quantize",
                           "TYPE '%s' is not a type brisk can write (f32, f16, bf16, q8_0, "
                           "q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k)",
                           args[2]);
  brisk_gguf *g = NULL;
  brisk_gguf_writer *w = NULL;
  if (brisk_gguf_open(args[0], &g) || brisk_gguf_writer_create(3, brisk_gguf_alignment(g), &w))
    return cli_fail("quantize", "%s", brisk_last_error());
  brisk_status st = BRISK_OK;
  for (int64_t i = 0; i < brisk_gguf_n_kv(g) && !st; i++) {
    const char *key = brisk_gguf_key(g, i);
    if (!strcmp(key, "general.alignment") || !strcmp(key, "general.file_type")) continue;
    st = copy_kv(g, i, w);
  }
  if (!st && file_type_of(type) >= 0)
    st = brisk_gguf_writer_set_u32(w, "general.file_type", (uint32_t)file_type_of(type));
  int64_t converted = 0, kept = 0, n_tensors = brisk_gguf_n_tensors(g);
  uint64_t bytes = 0;
  cli_bar bar = {.label = "quantizing"};
  const bool show = isatty(STDERR_FILENO) && !json;
  for (int64_t i = 0; i < n_tensors && !st; i++) {
    const brisk_gguf_tensor *t = brisk_gguf_tensor_at(g, i);
    const brisk_dtype_info *d = brisk_dtype_get(type);
    uint64_t b = 0;
    /* Matrices whose rows split into the type's blocks are converted;
     * vectors and anything else are copied as stored. */
    if (t->n_dims >= 2 && t->ne[0] % d->block_size == 0 && brisk_quant_can_dequantize(t->type)) {
      st = convert(t, type, w, &b);
      converted++;
    } else {
      b = t->n_bytes;
      st = brisk_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, b);
      kept++;
    }
    bytes += b;
    if (show) {
      char extra[64];
      snprintf(extra, sizeof extra, "%lld / %lld tensors", (long long)i + 1, (long long)n_tensors);
      cli_bar_draw(&bar, (double)(i + 1) / (double)n_tensors, extra);
    }
  }
  cli_bar_clear(&bar);
  if (!st) st = brisk_gguf_writer_write_file(w, args[1]);
  brisk_gguf_writer_free(w);
  brisk_gguf_close(g);
  if (st) return cli_fail("quantize", "%s: %s", brisk_status_string(st), brisk_last_error());
  if (json) {
    printf("{\"in\": ");
    cli_json_string(stdout, args[0]);
    printf(", \"out\": ");
    cli_json_string(stdout, args[1]);
    printf(", \"type\": \"%s\", \"converted\": %" PRId64 ", \"kept\": %" PRId64
           ", \"tensor_bytes\": %" PRIu64 "}\n",
           args[2], converted, kept, bytes);
  } else
    printf("%s -> %s: %" PRId64 " matrices as %s, %" PRId64 " tensors kept, %.1f MiB\n", args[0],
           args[1], converted, args[2], kept, (double)bytes / 1048576.0);
  return 0;
}
