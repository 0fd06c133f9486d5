/* brisk_model_step_weight_bytes: the weight bytes a step reads, counted
 * here independently from the file's tensor list (every tensor once, the
 * embedding's rows the tokens look up, a mixture-of-experts layer only the
 * experts the step's tokens can choose), for a dense model with and without
 * tied embeddings and for a mixture of experts at 1, 2 and many tokens. */
#include "test_models.h"

#include "core/dtype.h"

#include <stdio.h>
#include <string.h>

static char dir[64];

static int setup(void **state) {
  (void)state;
  const char *d = test_tmpdir();
  if (!d) return -1;
  snprintf(dir, sizeof dir, "%s", d);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  test_tmpdir_remove(dir);
  return 0;
}

/* What a step of n tokens (n_out with logits) reads, from the tensor list:
 * expert tensors scaled by the experts chosen, min(n * used, n_expert). */
static uint64_t expected(const brisk_model *m, const test_model_spec *s, int64_t n, int64_t n_out) {
  uint64_t dense = 0, experts = 0, embd = 0, output = 0;
  bool has_output = false;
  for (int64_t i = 0; i < brisk_model_n_tensors(m); i++) {
    brisk_tensor_info t = {.struct_size = sizeof t};
    assert_int_equal(brisk_model_tensor(m, i, &t), BRISK_OK);
    if (!strcmp(t.name, "token_embd.weight"))
      embd = t.n_bytes;
    else if (strstr(t.name, "_exps.weight"))
      experts += t.n_bytes;
    else if (!strcmp(t.name, "output.weight") || !strcmp(t.name, "output_norm.weight"))
      output += t.n_bytes, has_output |= !strcmp(t.name, "output.weight");
    else
      dense += t.n_bytes;
  }
  uint64_t total = dense + (uint64_t)n * (embd / s->n_vocab);
  if (s->n_expert) {
    uint64_t chosen = (uint64_t)n * s->n_expert_used;
    if (chosen > s->n_expert) chosen = s->n_expert;
    total += experts / s->n_expert * chosen;
  }
  if (n_out > 0) total += output + (has_output ? 0 : embd); /* tied: the table again */
  return total;
}

static void check(const char *name, test_model_spec s) {
  test_rng r = test_rng_seeded(name);
  brisk_model *m = NULL;
  assert_int_equal(test_model_load(dir, name, &s, &r, &m), BRISK_OK);
  const int64_t ns[] = {1, 2, 3, 64};
  for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
    for (int64_t n_out = 0; n_out <= 1; n_out++) {
      uint64_t want = expected(m, &s, ns[i], n_out);
      uint64_t got = brisk_model_step_weight_bytes(m, ns[i], n_out);
      if (got != want)
        fail_msg("%s: n %lld n_out %lld: %llu, want %llu", name, (long long)ns[i], (long long)n_out,
                 (unsigned long long)got, (unsigned long long)want);
    }
  }
  assert_int_equal(brisk_model_step_weight_bytes(m, 0, 1), 0);
  assert_int_equal(brisk_model_step_weight_bytes(m, -1, 1), 0);
  brisk_model_free(m);
}

static void test_dense(void **state) {
  (void)state;
  test_model_spec s = test_model_default("llama");
  s.weight_type = BRISK_DTYPE_F16;
  check("dense", s);
  s.tied = true;
  check("tied", s);
}

static void test_experts(void **state) {
  (void)state;
  test_model_spec s = test_model_default("mixtral");
  s.weight_type = BRISK_DTYPE_F16;
  s.n_expert = 8, s.n_expert_used = 2;
  check("moe", s); /* 1 token: 2 of 8 experts; 3 tokens: 6; 64: all 8 */
}

static void test_null(void **state) {
  (void)state;
  assert_int_equal(brisk_model_step_weight_bytes(NULL, 1, 1), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dense),
      cmocka_unit_test(test_experts),
      cmocka_unit_test(test_null),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
