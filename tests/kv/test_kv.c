/* The KV manager against a simple model: a simulated block storage where
 * every token writes its own value into its slot. After every operation each
 * sequence must read back exactly its own tokens (so sharing and
 * copy-on-write are right), and the free count must equal the blocks nobody
 * holds (so reference counts are right). */
#include "test_support.h"

#include "core/alloc.h"
#include "kv/kv.h"

#include <stdlib.h>
#include <string.h>

#define NSEQ 6
#define MAXLEN 200

typedef struct model {
  brisk_kv *kv;
  int32_t bs, n_blocks;
  int32_t *storage;          /* [n_blocks * bs] simulated K/V: a token value per slot */
  int32_t ref[NSEQ][MAXLEN]; /* what each sequence holds */
  int32_t len[NSEQ];
  int32_t next_value;
} model;

static void check_model(model *m) {
  int32_t *held = calloc((size_t)m->n_blocks, sizeof *held);
  for (int32_t s = 0; s < NSEQ; s++) {
    assert_int_equal(brisk_kv_seq_len(m->kv, s), m->len[s]);
    int32_t nb;
    const int32_t *table = brisk_kv_block_table(m->kv, s, &nb);
    assert_int_equal(nb, (m->len[s] + m->bs - 1) / m->bs);
    for (int32_t b = 0; b < nb; b++) {
      int dup = 0;
      for (int32_t c = 0; c < b; c++) dup |= table[c] == table[b];
      assert_false(dup); /* a sequence never holds a block twice */
      held[table[b]] = 1;
    }
    for (int32_t p = 0; p < m->len[s]; p++)
      assert_int_equal(m->storage[table[p / m->bs] * m->bs + p % m->bs], m->ref[s][p]);
  }
  int32_t n_held = 0;
  for (int32_t b = 0; b < m->n_blocks; b++) n_held += held[b];
  assert_int_equal(brisk_kv_n_free_blocks(m->kv), m->n_blocks - n_held);
  free(held);
}

/* Appends count tokens to each listed sequence in one interleaved batch. */
static brisk_status append(model *m, int n_seqs, const int32_t *seqs, int count) {
  int32_t seq[64], pos[64], token[64];
  int64_t slot[64];
  brisk_kv_copy copies[64];
  int32_t n = 0, n_copies = -1;
  for (int k = 0; k < count; k++)
    for (int j = 0; j < n_seqs; j++) {
      seq[n] = seqs[j];
      pos[n] = m->len[seqs[j]] + k;
      token[n] = m->next_value + n; /* unique: never matches, but blocks get published */
      n++;
    }
  int32_t free_before = brisk_kv_n_free_blocks(m->kv);
  brisk_status st = brisk_kv_reserve(m->kv, n, seq, pos, token, slot, copies, &n_copies);
  if (st != BRISK_OK) {
    assert_int_equal(brisk_kv_n_free_blocks(m->kv), free_before); /* nothing changed */
    check_model(m);
    return st;
  }
  assert_true(n_copies <= n_seqs);
  for (int32_t c = 0; c < n_copies; c++)
    memcpy(m->storage + copies[c].dst * m->bs, m->storage + copies[c].src * m->bs,
           sizeof(int32_t) * (size_t)m->bs);
  for (int32_t i = 0; i < n; i++) {
    for (int32_t j = 0; j < i; j++) assert_true(slot[i] != slot[j]);
    int32_t v = m->next_value++;
    m->storage[slot[i]] = v;
    m->ref[seq[i]][pos[i]] = v;
  }
  for (int j = 0; j < n_seqs; j++) {
    brisk_kv_commit(m->kv, seqs[j], m->len[seqs[j]]);
    m->len[seqs[j]] += count;
  }
  check_model(m);
  return BRISK_OK;
}

static void model_init(model *m, int32_t n_blocks, int32_t bs) {
  memset(m, 0, sizeof *m);
  m->bs = bs;
  m->n_blocks = n_blocks;
  assert_int_equal(brisk_kv_create(n_blocks, bs, NSEQ, true, &m->kv), BRISK_OK);
  m->storage = calloc((size_t)n_blocks * (size_t)bs, sizeof *m->storage);
}

static void model_free(model *m) {
  brisk_kv_free(m->kv);
  free(m->storage);
}

static void test_fork_copy_on_write(void **state) {
  (void)state;
  model m;
  model_init(&m, 16, 4);
  int32_t s0 = 0, s1 = 1;
  assert_int_equal(append(&m, 1, &s0, 6), BRISK_OK); /* 1.5 blocks */
  assert_int_equal(brisk_kv_seq_fork(m.kv, 0, 1), BRISK_OK);
  m.len[1] = m.len[0];
  memcpy(m.ref[1], m.ref[0], sizeof m.ref[0]);
  check_model(&m);
  assert_int_equal(brisk_kv_n_free_blocks(m.kv), 14); /* shared, not copied */
  /* Writing into the shared half-full block copies it for the writer only. */
  assert_int_equal(append(&m, 1, &s1, 1), BRISK_OK);
  assert_int_equal(brisk_kv_n_free_blocks(m.kv), 13);
  assert_int_equal(append(&m, 1, &s0, 3), BRISK_OK); /* parent unchanged by the fork's write */
  /* Forking onto a non-empty sequence is refused. */
  assert_int_equal(brisk_kv_seq_fork(m.kv, 0, 1), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_kv_seq_fork(m.kv, 0, 0), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_kv_seq_free(m.kv, 0), BRISK_OK);
  m.len[0] = 0;
  check_model(&m);
  model_free(&m);
}

static void test_validation_and_full(void **state) {
  (void)state;
  model m;
  model_init(&m, 4, 8);
  int32_t seq[3] = {0, 0, 1}, pos[3] = {0, 2, 0}, token[3] = {1, 2, 3};
  int64_t slot[3];
  brisk_kv_copy copies[3];
  int32_t nc;
  /* A position that skips. */
  assert_int_equal(brisk_kv_reserve(m.kv, 3, seq, pos, token, slot, copies, &nc),
                   BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "position 1, got 2"));
  pos[1] = -1;
  assert_int_equal(brisk_kv_reserve(m.kv, 3, seq, pos, token, slot, copies, &nc),
                   BRISK_E_INVALID_ARGUMENT);
  seq[2] = NSEQ;
  pos[1] = 1;
  assert_int_equal(brisk_kv_reserve(m.kv, 3, seq, pos, token, slot, copies, &nc),
                   BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "out of range"));
  check_model(&m);
  /* Fill: 4 blocks of 8; 20 tokens of s0 hold 3, so s1 fits 8 and not 9. */
  int32_t s0 = 0, s1 = 1;
  assert_int_equal(append(&m, 1, &s0, 20), BRISK_OK);
  assert_int_equal(append(&m, 1, &s1, 9), BRISK_E_KV_FULL);
  assert_non_null(strstr(brisk_last_error(), "KV cache full"));
  int32_t both[2] = {0, 1}; /* 4 more for s0 fit in its last block, 4 for s1 in the free one */
  assert_int_equal(append(&m, 2, both, 5), BRISK_E_KV_FULL);
  assert_int_equal(append(&m, 2, both, 4), BRISK_OK);
  assert_int_equal(brisk_kv_n_free_blocks(m.kv), 0);
  /* Truncation frees blocks; bad ranges are refused. */
  assert_int_equal(brisk_kv_seq_truncate(m.kv, 0, 25), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_kv_seq_truncate(m.kv, 0, -1), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_kv_seq_truncate(m.kv, 0, 9), BRISK_OK);
  m.len[0] = 9;
  check_model(&m);
  assert_int_equal(brisk_kv_n_free_blocks(m.kv), 1);
  assert_int_equal(append(&m, 1, &s0, 7), BRISK_OK); /* rewrite the truncated part */
  model_free(&m);
  brisk_kv *kv = NULL;
  assert_int_equal(brisk_kv_create(0, 16, 1, true, &kv), BRISK_E_INVALID_ARGUMENT);
}

/* Random appends, forks, truncations and frees, checked after each. */
static void test_random_operations(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("kv_random");
  for (int round = 0; round < 20; round++) {
    model m;
    int32_t bs = 1 + (int32_t)(test_rng_u64(&r) % 8);
    model_init(&m, 8 + (int32_t)(test_rng_u64(&r) % 40), bs);
    for (int op = 0; op < 300; op++) {
      int kind = (int)(test_rng_u64(&r) % 10);
      int32_t a = (int32_t)(test_rng_u64(&r) % NSEQ), b = (int32_t)(test_rng_u64(&r) % NSEQ);
      if (kind < 5) {
        int32_t seqs[2] = {a, b};
        int n_seqs = a == b ? 1 : 2, count = 1 + (int)(test_rng_u64(&r) % 6);
        if (m.len[a] + count < MAXLEN && m.len[b] + count < MAXLEN) append(&m, n_seqs, seqs, count);
      } else if (kind < 7) {
        if (m.len[b] == 0 && a != b) {
          assert_int_equal(brisk_kv_seq_fork(m.kv, a, b), BRISK_OK);
          m.len[b] = m.len[a];
          memcpy(m.ref[b], m.ref[a], sizeof m.ref[a]);
          check_model(&m);
        }
      } else if (kind < 9) {
        int32_t len = m.len[a] ? (int32_t)(test_rng_u64(&r) % (uint64_t)(m.len[a] + 1)) : 0;
        assert_int_equal(brisk_kv_seq_truncate(m.kv, a, len), BRISK_OK);
        m.len[a] = len;
        check_model(&m);
      } else {
        assert_int_equal(brisk_kv_seq_free(m.kv, a), BRISK_OK);
        m.len[a] = 0;
        check_model(&m);
      }
    }
    model_free(&m);
  }
}

static brisk_status create_reserve_free(void *ctx) {
  (void)ctx;
  brisk_kv *kv = NULL;
  brisk_status st = brisk_kv_create(8, 4, 3, true, &kv);
  if (st) return st;
  int32_t seq[2] = {0, 2}, pos[2] = {0, 0}, token[2] = {5, 6};
  int64_t slot[2];
  brisk_kv_copy copies[2];
  int32_t nc;
  st = brisk_kv_reserve(kv, 2, seq, pos, token, slot, copies, &nc);
  if (!st) st = brisk_kv_seq_fork(kv, 0, 1);
  brisk_kv_free(kv);
  return st;
}

static void test_allocation_failures(void **state) {
  (void)state;
  test_every_allocation_fails(create_reserve_free, NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fork_copy_on_write),
      cmocka_unit_test(test_validation_and_full),
      cmocka_unit_test(test_random_operations),
      cmocka_unit_test(test_allocation_failures),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
