/* Prints a model's logits for a prompt and for decode steps, for
 * test_hf_reference.py to compare with transformers'.
 *
 *   hf_logits MODEL DEVICE "PROMPT TOKENS" "DECODE TOKENS"
 *
 * The prompt is decoded as one batch (prefill attention), then each decode
 * token alone at the next position (decode attention through the KV cache).
 * Output: one line per prompt position, then one per decode step, each the
 * n_vocab logits. DEVICE is "cpu" or a device name ("cudaemu:0" registers
 * the SIMT emulation of the CUDA backend first), optionally followed by
 * "+tpN" (tp_size), "+ppN" (pp_size) or "+nglN" (n_gpu_layers). Exit 1 with
 * brisk's message on stderr when the model does not load or run. */
#include "brisk.h"
#include "cuda_emu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int parse(const char *s, int32_t *out, int cap) {
  int n = 0;
  char *end;
  for (;;) {
    long v = strtol(s, &end, 10);
    if (end == s || n == cap) return n;
    out[n++] = (int32_t)v;
    s = end;
  }
}

static void print_row(const float *l, int32_t n) {
  for (int32_t i = 0; i < n; i++) printf(i ? " %.9g" : "%.9g", (double)l[i]);
  printf("\n");
}

static int fail(const char *what) {
  fprintf(stderr, "%s: %s\n", what, brisk_last_error());
  return 1;
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: hf_logits MODEL DEVICE PROMPT DECODE\n");
    return 2;
  }
  if (!strncmp(argv[2], "cudaemu", 7) && brisk_cuda_emu_register()) return fail("cudaemu");
  int32_t prompt[512], decode[64];
  int np = parse(argv[3], prompt, 512), nd = parse(argv[4], decode, 64);
  brisk_model_params mp;
  brisk_model_params_init(&mp);
  char device[64];
  snprintf(device, sizeof device, "%s", argv[2]);
  for (char *plus; (plus = strrchr(device, '+'));) {
    *plus = 0;
    if (!strncmp(plus + 1, "tp", 2))
      mp.tp_size = atoi(plus + 3);
    else if (!strncmp(plus + 1, "pp", 2))
      mp.pp_size = atoi(plus + 3);
    else if (!strncmp(plus + 1, "ngl", 3))
      mp.n_gpu_layers = atoi(plus + 4);
  }
  if (strcmp(device, "cpu")) mp.device = device;
  brisk_model *m = NULL;
  if (brisk_model_load(argv[1], &mp, &m)) return fail("load");
  brisk_context_params cp;
  brisk_context_params_init(&cp);
  cp.kv_type = BRISK_KV_F32;
  cp.kv_tokens = 1024;
  cp.block_size = 16;
  cp.max_batch_tokens = np;
  cp.n_threads = 1;
  brisk_context *c = NULL;
  brisk_batch *b = NULL;
  int rc = 1;
  if (brisk_context_create(m, &cp, &c)) {
    fail("context");
    goto out;
  }
  if (brisk_batch_create(np, &b)) goto out;
  int32_t nv = brisk_model_n_vocab(m);
  for (int i = 0; i < np; i++) brisk_batch_add(b, prompt[i], i, 0, 1);
  if (brisk_decode(c, b)) {
    fail("decode");
    goto out;
  }
  for (int i = 0; i < np; i++) print_row(brisk_get_logits(c, i), nv);
  for (int i = 0; i < nd; i++) {
    brisk_batch_clear(b);
    brisk_batch_add(b, decode[i], np + i, 0, 1);
    if (brisk_decode(c, b)) {
      fail("decode step");
      goto out;
    }
    print_row(brisk_get_logits(c, 0), nv);
  }
  rc = 0;
out:
  brisk_batch_free(b);
  brisk_context_free(c);
  brisk_model_free(m);
  return rc;
}
