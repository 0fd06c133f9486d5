/* Quantization presets: lookup in any letter case, and the per-tensor types
 * of llama.cpp's mixes on llama-shaped tensor lists, against tables written
 * out by hand from llama-quant.cpp's rules (for 8 and 32 layers the layers
 * that "use more bits" are listed, not computed). */
#include "test_support.h"

#include "core/dtype.h"
#include "quant/preset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_lookup(void **state) {
  (void)state;
  const char *names[] = {"Q4_K_M", "q4_k_m", "Q4_k_M", "q5_k_s", "Q6_K", "q8_0", "Q4_0", "f16"};
  const char *canon[] = {"Q4_K_M", "Q4_K_M", "Q4_K_M", "Q5_K_S", "Q6_K", "Q8_0", "Q4_0", "F16"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    const brisk_quant_preset *p = brisk_quant_preset_find(names[i]);
    assert_non_null(p);
    assert_string_equal(p->name, canon[i]);
  }
  assert_null(brisk_quant_preset_find("Q3_K_XL"));
  assert_null(brisk_quant_preset_find("Q4_K_M "));
  assert_null(brisk_quant_preset_find(""));
  assert_null(brisk_quant_preset_find(NULL));
  /* llama_ftype values as llama.cpp's llama.h numbers them. */
  assert_int_equal(brisk_quant_preset_find("Q4_K_M")->file_type, 15);
  assert_int_equal(brisk_quant_preset_find("Q4_K_S")->file_type, 14);
  assert_int_equal(brisk_quant_preset_find("Q5_K_M")->file_type, 17);
  assert_int_equal(brisk_quant_preset_find("Q5_K_S")->file_type, 16);
  assert_int_equal(brisk_quant_preset_find("Q6_K")->file_type, 18);
  assert_int_equal(brisk_quant_preset_find("Q8_0")->file_type, 7);
  assert_int_equal(brisk_quant_preset_find("Q4_0")->file_type, 2);
  int n = 0;
  while (brisk_quant_preset_at(n)) n++;
  assert_true(n >= 13);
  assert_null(brisk_quant_preset_at(-1));
}

/* A llama-shaped tensor list: token_embd, (output), per layer the 7
 * matrices and 2 norms, output_norm; in llama.cpp's visiting order. */
typedef struct model_names {
  char (*names)[48];
  const char **ptrs;
  uint32_t *dims;
  int n;
} model_names;

static int cmp_names(const void *a, const void *b) {
  return brisk_quant_mix_order(*(const char *const *)a, *(const char *const *)b);
}

static model_names make_names(int n_layer, bool tied) {
  static const char *per[] = {"attn_q.weight",      "attn_k.weight",    "attn_v.weight",
                              "attn_output.weight", "ffn_gate.weight",  "ffn_up.weight",
                              "ffn_down.weight",    "attn_norm.weight", "ffn_norm.weight"};
  model_names m;
  int cap = 3 + 9 * n_layer;
  m.names = calloc((size_t)cap, sizeof *m.names);
  m.ptrs = calloc((size_t)cap, sizeof *m.ptrs);
  m.dims = calloc((size_t)cap, sizeof *m.dims);
  m.n = 0;
  snprintf(m.names[m.n++], 48, "token_embd.weight");
  if (!tied) snprintf(m.names[m.n++], 48, "output.weight");
  snprintf(m.names[m.n++], 48, "output_norm.weight");
  /* Written in reverse so that the sort must do its job. */
  for (int l = n_layer - 1; l >= 0; l--)
    for (int j = 8; j >= 0; j--) snprintf(m.names[m.n++], 48, "blk.%d.%s", l, per[j]);
  for (int i = 0; i < m.n; i++) m.ptrs[i] = m.names[i];
  qsort(m.ptrs, (size_t)m.n, sizeof *m.ptrs, cmp_names);
  for (int i = 0; i < m.n; i++) m.dims[i] = strstr(m.ptrs[i], "norm") ? 1 : 2;
  return m;
}

static void free_names(model_names *m) {
  free(m->names);
  free(m->ptrs);
  free(m->dims);
}

static bool in_list(int l, const int *list) {
  for (; *list >= 0; list++)
    if (*list == l) return true;
  return false;
}

/* Runs the mix over the list (all rows ne0 wide) and checks each type. */
static void check_mix(const char *preset, int n_layer, bool tied, uint64_t ne0, uint32_t embd_type,
                      const int *more_bits, uint32_t more_v, uint32_t more_down, uint32_t base) {
  model_names m = make_names(n_layer, tied);
  brisk_quant_mix mix;
  brisk_quant_mix_init(&mix, brisk_quant_preset_find(preset), false, "llama", n_layer, m.ptrs, m.n);
  int layer_seen = -1;
  for (int i = 0; i < m.n; i++) {
    const char *name = m.ptrs[i];
    uint32_t got = brisk_quant_mix_type(&mix, name, m.dims[i], ne0, BRISK_DTYPE_F32);
    uint32_t want;
    int l = -1;
    sscanf(name, "blk.%d.", &l);
    if (l >= 0) {
      assert_true(l >= layer_seen); /* layer order */
      layer_seen = l;
    }
    if (m.dims[i] == 1)
      want = BRISK_DTYPE_F32;
    else if (!strcmp(name, "output.weight") || (tied && !strcmp(name, "token_embd.weight")))
      want = embd_type;
    else if (!strcmp(name, "token_embd.weight"))
      want = base;
    else if (strstr(name, "attn_v.weight"))
      want = in_list(l, more_bits) ? more_v : base;
    else if (strstr(name, "ffn_down"))
      want = in_list(l, more_bits + 64) ? more_down : base;
    else
      want = base;
    if (got != want)
      fail_msg("%s, %d layers: %s is %s, llama.cpp gives %s", preset, n_layer, name,
               brisk_dtype_name(got), brisk_dtype_name(want));
  }
  free_names(&m);
}

static void test_mixes(void **state) {
  (void)state;
  /* more_bits[0..64): layers whose attn_v gets more bits, [64..): ffn_down's.
   * use_more_bits(i, n): i < n/8 || i >= 7n/8 || (i - n/8) % 3 == 2. */
  int mb8[128], mb32[128], first4[128], none[128];
  const int l8[] = {0, 3, 6, 7, -1};
  const int l32[] = {0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31, -1};
  memcpy(mb8, l8, sizeof l8);
  memcpy(mb8 + 64, l8, sizeof l8);
  memcpy(mb32, l32, sizeof l32);
  memcpy(mb32 + 64, l32, sizeof l32);
  /* Q4_K_S: attn_v of the first 4 (by count), ffn_down of i < n/8. */
  const int f4[] = {0, 1, 2, 3, -1}, d32[] = {0, 1, 2, 3, -1}, d8[] = {0, -1};
  memcpy(first4, f4, sizeof f4);
  memcpy(first4 + 64, d32, sizeof d32);
  none[0] = none[64] = -1;

  check_mix("Q4_K_M", 32, false, 4096, BRISK_DTYPE_Q6_K, mb32, BRISK_DTYPE_Q6_K, BRISK_DTYPE_Q6_K,
            BRISK_DTYPE_Q4_K);
  check_mix("Q4_K_M", 8, true, 512, BRISK_DTYPE_Q6_K, mb8, BRISK_DTYPE_Q6_K, BRISK_DTYPE_Q6_K,
            BRISK_DTYPE_Q4_K);
  check_mix("Q5_K_M", 32, false, 4096, BRISK_DTYPE_Q6_K, mb32, BRISK_DTYPE_Q6_K, BRISK_DTYPE_Q6_K,
            BRISK_DTYPE_Q5_K);
  check_mix("q4_k_s", 32, false, 4096, BRISK_DTYPE_Q6_K, first4, BRISK_DTYPE_Q5_K, BRISK_DTYPE_Q5_K,
            BRISK_DTYPE_Q4_K);
  memcpy(first4 + 64, d8, sizeof d8);
  check_mix("Q4_K_S", 8, false, 4096, BRISK_DTYPE_Q6_K, first4, BRISK_DTYPE_Q5_K, BRISK_DTYPE_Q5_K,
            BRISK_DTYPE_Q4_K);
  check_mix("Q5_K_S", 32, false, 4096, BRISK_DTYPE_Q6_K, none, 0, 0, BRISK_DTYPE_Q5_K);
  check_mix("Q6_K", 32, false, 4096, BRISK_DTYPE_Q6_K, none, 0, 0, BRISK_DTYPE_Q6_K);
  check_mix("Q8_0", 32, true, 4096, BRISK_DTYPE_Q8_0, none, 0, 0, BRISK_DTYPE_Q8_0);
  check_mix("Q4_0", 32, false, 4096, BRISK_DTYPE_Q6_K, none, 0, 0, BRISK_DTYPE_Q4_0);
  check_mix("F16", 8, false, 4096, BRISK_DTYPE_F16, none, 0, 0, BRISK_DTYPE_F16);
  /* Rows of 576 (SmolLM2): no K type fits, so the K choices fall back
   * (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0) and the tied output is Q8_0. */
  check_mix("Q4_K_M", 8, true, 576, BRISK_DTYPE_Q8_0, mb8, BRISK_DTYPE_Q8_0, BRISK_DTYPE_Q8_0,
            BRISK_DTYPE_Q5_0);
  check_mix("Q5_K_S", 8, true, 576, BRISK_DTYPE_Q8_0, none, 0, 0, BRISK_DTYPE_Q5_1);
  check_mix("Q4_0", 8, true, 576, BRISK_DTYPE_Q8_0, none, 0, 0, BRISK_DTYPE_Q4_0);
}

static void test_odd_shapes(void **state) {
  (void)state;
  const char *names[] = {"token_embd.weight", "blk.0.attn_v.weight", "blk.0.ffn_down.weight"};
  brisk_quant_mix mix;
  brisk_quant_mix_init(&mix, brisk_quant_preset_find("Q4_K_M"), false, "llama", 1, names, 3);
  /* 100 columns: neither 256 nor 32 divides them, so even the output's
   * Q8_0 falls back to F16. */
  assert_int_equal(brisk_quant_mix_type(&mix, names[0], 2, 100, BRISK_DTYPE_F32), BRISK_DTYPE_F16);
  assert_int_equal(brisk_quant_mix_type(&mix, names[1], 2, 100, BRISK_DTYPE_F32), BRISK_DTYPE_F16);
  assert_int_equal(brisk_quant_mix_type(&mix, names[2], 2, 100, BRISK_DTYPE_F32), BRISK_DTYPE_F16);
  /* --pure: no rules, only the fallback. */
  brisk_quant_mix_init(&mix, brisk_quant_preset_find("Q4_K_M"), true, "llama", 1, names, 3);
  assert_int_equal(brisk_quant_mix_type(&mix, names[0], 2, 512, BRISK_DTYPE_F32), BRISK_DTYPE_Q4_K);
  assert_int_equal(brisk_quant_mix_type(&mix, names[1], 2, 512, BRISK_DTYPE_F32), BRISK_DTYPE_Q4_K);
  assert_int_equal(brisk_quant_mix_type(&mix, names[2], 2, 576, BRISK_DTYPE_F32), BRISK_DTYPE_Q5_0);
  /* Uniform Q4_K is --pure Q4_K_S. */
  brisk_quant_mix_init(&mix, brisk_quant_preset_find("q4_k"), false, "llama", 1, names, 3);
  assert_int_equal(brisk_quant_mix_type(&mix, names[0], 2, 512, BRISK_DTYPE_F32), BRISK_DTYPE_Q4_K);
  /* Not quantized: vectors, norms, names not ending in "weight", gate inputs. */
  assert_false(brisk_quant_allows("blk.0.attn_norm.weight", 2));
  assert_false(brisk_quant_allows("blk.0.attn_q.weight", 1));
  assert_false(brisk_quant_allows("blk.0.attn_q.bias", 2));
  assert_false(brisk_quant_allows("blk.0.ffn_gate_inp.weight", 2));
  assert_false(brisk_quant_allows("position_embd.weight", 2));
  assert_true(brisk_quant_allows("blk.0.attn_q.weight", 2));
  assert_int_equal(brisk_quant_mix_type(&mix, "blk.0.attn_norm.weight", 1, 512, BRISK_DTYPE_F32),
                   BRISK_DTYPE_F32);
  /* Visiting order: by layer number (numerically), then by name. */
  assert_true(brisk_quant_mix_order("blk.2.x", "blk.10.a") < 0);
  assert_true(brisk_quant_mix_order("output.weight", "blk.0.a") < 0);
  assert_true(brisk_quant_mix_order("blk.3.attn_v", "blk.3.attn_k") > 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_lookup),
      cmocka_unit_test(test_mixes),
      cmocka_unit_test(test_odd_shapes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
