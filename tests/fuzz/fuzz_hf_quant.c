/* Fuzz target: a GPTQ / AWQ linear layer of a Hugging Face folder
 * (model/hf_quant.c). Input: one layout byte, one group byte, then
 * config.json's quantization_config as JSON up to a NUL byte, then the bytes
 * the layer's tensors are filled with (cycled). The layout byte picks the
 * layer's shape (32 to 128 inputs, 8 to 32 outputs), GPTQ or AWQ tensor
 * shapes, and perturbations (no g_idx, float32 scales, a short qweight); the
 * group byte the number of groups and (bit 2) an act-order g_idx: groups
 * given to the columns in the order of a permutation drawn from the
 * payload, instead of g_idx bytes from the payload. Then brisk_hf_open, brisk_hf_quant_read
 * and brisk_hf_quant_repack. Aborts on a status the header does not
 * promise, a failure without a message, repacked blocks whose scales are
 * not the layer's, or an act-order column order that is not a permutation
 * putting column j in group j / group_size. */
#include "fuzz_target.h"

#include "core/alloc.h"
#include "core/dtype.h"
#include "core/error.h"
#include "format/hf.h"
#include "model/hf_quant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "fuzz_hf_quant: %s:%d: check failed: %s (%s)\n", __FILE__, __LINE__, #cond,  \
              brisk_last_error());                                                                 \
      abort();                                                                                     \
    }                                                                                              \
  } while (0)

static char dir[64];

static void path_of(char *out, size_t n, const char *name) { snprintf(out, n, "%s/%s", dir, name); }

static void cleanup(void) {
  char p[128];
  path_of(p, sizeof p, "config.json");
  unlink(p);
  path_of(p, sizeof p, "model.safetensors");
  unlink(p);
  rmdir(dir);
}

/* A tensor of n elements of elt bytes filled from the payload, cycled. */
static void add(brisk_safetensors_writer *w, const char *name, uint32_t dtype, uint32_t n_dims,
                uint64_t d0, uint64_t d1, const uint8_t *pay, size_t n_pay, size_t *at) {
  size_t elt = dtype == BRISK_DTYPE_F16 ? 2 : 4, n = (size_t)d0 * (n_dims > 1 ? d1 : 1) * elt;
  uint8_t *buf = malloc(n ? n : 1);
  CHECK(buf);
  for (size_t i = 0; i < n; i++) buf[i] = n_pay ? pay[(*at)++ % n_pay] : 0;
  uint64_t shape[2] = {d0, d1};
  CHECK(brisk_safetensors_writer_add_tensor(w, name, dtype, n_dims, shape, buf, n) == BRISK_OK);
  free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 3) return 0;
  if (!dir[0]) {
    snprintf(dir, sizeof dir, "/tmp/brisk-fuzz-hfq-XXXXXX");
    CHECK(mkdtemp(dir));
    atexit(cleanup);
  }
  const uint8_t layout = data[0], gbyte = data[1];
  const uint8_t *json = data + 2, *nul = memchr(json, 0, size - 2);
  size_t n_json = nul ? (size_t)(nul - json) : size - 2;
  const uint8_t *pay = nul ? nul + 1 : data + size;
  size_t n_pay = (size_t)(data + size - pay), at = 0;
  const uint64_t cols = 32u * (1u + (layout & 3)), rows = 8u * (1u + ((layout >> 2) & 3));
  const bool awq = layout & 0x10, no_g_idx = layout & 0x20, f32_scales = layout & 0x40,
             short_qweight = layout & 0x80;
  const uint64_t groups = 1u + (gbyte & 3);
  const bool act_order = gbyte & 4;

  char p[128];
  path_of(p, sizeof p, "config.json");
  FILE *f = fopen(p, "wb");
  CHECK(f);
  fputs("{\"model_type\": \"llama\", \"quantization_config\": ", f);
  CHECK(fwrite(json, 1, n_json, f) == n_json);
  fputs("}", f);
  CHECK(fclose(f) == 0);

  brisk_safetensors_writer *w;
  CHECK(brisk_safetensors_writer_create(&w) == BRISK_OK);
  uint64_t qw0 = awq ? cols : cols / 8, qw1 = awq ? rows / 8 : rows;
  add(w, "l.qweight", BRISK_DTYPE_I32, 2, qw0 - (short_qweight ? 1 : 0), qw1, pay, n_pay, &at);
  add(w, "l.qzeros", BRISK_DTYPE_I32, 2, groups, rows / 8, pay, n_pay, &at);
  add(w, "l.scales", f32_scales ? BRISK_DTYPE_F32 : BRISK_DTYPE_F16, 2, groups, rows, pay, n_pay,
      &at);
  if (!no_g_idx && act_order) { /* g_idx[p[i]] = i * groups / cols, p from the payload */
    int32_t p_of[128], g_idx[128];
    for (uint64_t i = 0; i < cols; i++) p_of[i] = (int32_t)i;
    for (uint64_t i = cols - 1; i > 0; i--) {
      uint64_t j = (n_pay ? pay[at++ % n_pay] : 0) % (i + 1);
      int32_t t = p_of[i];
      p_of[i] = p_of[j];
      p_of[j] = t;
    }
    for (uint64_t i = 0; i < cols; i++) g_idx[p_of[i]] = (int32_t)(i * groups / cols);
    uint64_t shape[1] = {cols};
    CHECK(brisk_safetensors_writer_add_tensor(w, "l.g_idx", BRISK_DTYPE_I32, 1, shape, g_idx,
                                              4 * cols) == BRISK_OK);
  } else if (!no_g_idx) {
    add(w, "l.g_idx", BRISK_DTYPE_I32, 1, cols, 0, pay, n_pay, &at);
  }
  path_of(p, sizeof p, "model.safetensors");
  CHECK(brisk_safetensors_writer_write_file(w, p) == BRISK_OK);
  brisk_safetensors_writer_free(w);

  brisk_hf *hf = NULL;
  brisk_status st = brisk_hf_open(dir, &hf);
  CHECK(st == BRISK_OK || st == BRISK_E_FORMAT || st == BRISK_E_UNSUPPORTED ||
        st == BRISK_E_OUT_OF_MEMORY);
  if (st) {
    CHECK(brisk_last_error()[0] != 0);
    return 0;
  }
  brisk_hf_quant q;
  st = brisk_hf_quant_read(hf, &q);
  CHECK(st == BRISK_OK || st == BRISK_E_FORMAT || st == BRISK_E_UNSUPPORTED);
  if (st) CHECK(brisk_last_error()[0] != 0);
  void *out = NULL;
  int32_t *perm = NULL;
  const char *name = NULL;
  if (!st)
    st = brisk_hf_quant_repack(hf, &q, "l", (int64_t)cols, (int64_t)rows, &out, &perm, &name);
  CHECK(st == BRISK_OK || st == BRISK_E_FORMAT || st == BRISK_E_UNSUPPORTED ||
        st == BRISK_E_OUT_OF_MEMORY);
  if (st) {
    CHECK(brisk_last_error()[0] != 0 && !out && !perm);
  } else {
    CHECK(q.method != BRISK_HF_QUANT_NONE && out && name && !strcmp(name, "l.qweight"));
    /* Each block's d is its group's scale for that output row. */
    const brisk_safetensors_tensor *sc = brisk_hf_find_tensor(hf, "l.scales");
    uint64_t group = q.group_size == -1 ? cols : (uint64_t)q.group_size;
    for (uint64_t n = 0; n < rows; n++)
      for (uint64_t b = 0; b < cols / 32; b++) {
        uint16_t d, want;
        memcpy(&d, (const uint8_t *)out + (n * (cols / 32) + b) * 20, 2);
        memcpy(&want, (const uint8_t *)sc->data + 2 * ((b * 32 / group) * rows + n), 2);
        CHECK(d == want);
      }
    if (perm) { /* only from a g_idx out of column order */
      const brisk_safetensors_tensor *g = brisk_hf_find_tensor(hf, "l.g_idx");
      CHECK(g);
      uint8_t seen[128] = {0};
      bool moved = false;
      for (uint64_t j = 0; j < cols; j++) {
        CHECK(perm[j] >= 0 && (uint64_t)perm[j] < cols && !seen[perm[j]]);
        seen[perm[j]] = 1;
        int32_t gi;
        memcpy(&gi, (const uint8_t *)g->data + 4 * (size_t)perm[j], 4);
        CHECK((uint64_t)gi == j / group);
        moved |= (uint64_t)perm[j] != j;
      }
      CHECK(moved);
    }
    brisk_aligned_free(out);
    brisk_aligned_free(perm);
  }
  brisk_hf_close(hf);
  return 0;
}
