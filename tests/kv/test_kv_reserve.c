/* brisk_kv_seq_reserve, the call a scheduler asks before it batches a
 * sequence's tokens: all or nothing against a full pool, copy-on-write of a
 * shared or published last block counted and held, rollback (a failed ask
 * changes nothing; truncation gives held blocks back), prefix-cache blocks
 * as room, promises at admission. A simulated block storage (each token
 * writes its own value into its slot) checks that every sequence reads back
 * its own tokens, and an independent count of the blocks each sequence
 * needs checks every answer. */
#include "test_support.h"

#include "kv/kv.h"

#include <stdlib.h>
#include <string.h>

#define NSEQ 4
#define MAXLEN 160

typedef struct model {
  brisk_kv *kv;
  int32_t bs, n_blocks;
  int32_t *storage; /* [n_blocks * bs] */
  int32_t ref[NSEQ][MAXLEN];
  int32_t len[NSEQ];
  int32_t spare[NSEQ]; /* blocks held for tokens not yet written, counted here */
  int32_t next_value;
} model;

static void model_init(model *m, int32_t n_blocks, int32_t bs, bool prefix) {
  memset(m, 0, sizeof *m);
  m->bs = bs;
  m->n_blocks = n_blocks;
  assert_int_equal(brisk_kv_create(n_blocks, bs, NSEQ, prefix, &m->kv), BRISK_OK);
  m->storage = calloc((size_t)n_blocks * (size_t)bs, sizeof *m->storage);
}

static void model_free(model *m) {
  brisk_kv_free(m->kv);
  free(m->storage);
}

/* Blocks no table holds and no sequence holds spare must be available
 * (free or cached); every sequence reads back its tokens. */
static void check_model(const model *m) {
  int32_t *held = calloc((size_t)m->n_blocks, sizeof *held);
  int32_t n_spare = 0;
  for (int32_t s = 0; s < NSEQ; s++) {
    assert_int_equal(brisk_kv_seq_len(m->kv, s), m->len[s]);
    int32_t nb;
    const int32_t *table = brisk_kv_block_table(m->kv, s, &nb);
    assert_int_equal(nb, (m->len[s] + m->bs - 1) / m->bs);
    for (int32_t b = 0; b < nb; b++) held[table[b]] = 1;
    for (int32_t p = 0; p < m->len[s]; p++)
      assert_int_equal(m->storage[table[p / m->bs] * m->bs + p % m->bs], m->ref[s][p]);
    n_spare += m->spare[s];
  }
  int32_t n_held = 0;
  for (int32_t b = 0; b < m->n_blocks; b++) n_held += held[b];
  assert_int_equal(brisk_kv_n_free_blocks(m->kv), m->n_blocks - n_held - n_spare);
  free(held);
}

/* Whether appending to s copies its last block first: it is partly filled
 * and another table holds it, or (published) the caller says so. */
static int shares_last(const model *m, int32_t s) {
  if (m->len[s] % m->bs == 0) return 0;
  int32_t nb;
  int32_t last = brisk_kv_block_table(m->kv, s, &nb)[nb - 1];
  for (int32_t o = 0; o < NSEQ; o++) {
    if (o == s) continue;
    const int32_t *t = brisk_kv_block_table(m->kv, o, &nb);
    for (int32_t b = 0; b < nb; b++)
      if (t[b] == last) return 1;
  }
  return 0;
}

/* Blocks s lacks for n more tokens, counted from the model. */
static int32_t expected_hold(const model *m, int32_t s, int32_t n, int published_last) {
  if (n == 0) return 0;
  int32_t want = (m->len[s] + n + m->bs - 1) / m->bs +
                 (shares_last(m, s) || (published_last && m->len[s] % m->bs) ? 1 : 0);
  int32_t have = (m->len[s] + m->bs - 1) / m->bs + m->spare[s];
  return want > have ? want - have : 0;
}

/* Appends count tokens to s in one batch, token ids from `tokens` when set
 * (else unique values); tracks the spare blocks the batch used. */
static brisk_status append(model *m, int32_t s, int32_t count, const int32_t *tokens) {
  int32_t seq[64], pos[64], token[64];
  int64_t slot[64];
  brisk_kv_copy copies[64];
  int32_t n_copies = -1;
  for (int32_t k = 0; k < count; k++) {
    seq[k] = s;
    pos[k] = m->len[s] + k;
    token[k] = tokens ? tokens[k] : 1000000 + m->next_value + k;
  }
  int32_t from_pool = expected_hold(m, s, count, 0);
  int32_t used = (m->len[s] + count + m->bs - 1) / m->bs - (m->len[s] + m->bs - 1) / m->bs +
                 (shares_last(m, s) ? 1 : 0); /* new blocks and the copy, spares first */
  int32_t free_before = brisk_kv_n_free_blocks(m->kv);
  brisk_status st = brisk_kv_reserve(m->kv, count, seq, pos, token, slot, copies, &n_copies);
  if (st) {
    check_model(m);
    return st;
  }
  /* Spares first: the pool gives only what they lacked. */
  assert_int_equal(free_before - brisk_kv_n_free_blocks(m->kv), from_pool);
  m->spare[s] -= used - from_pool;
  for (int32_t c = 0; c < n_copies; c++)
    memcpy(m->storage + copies[c].dst * m->bs, m->storage + copies[c].src * m->bs,
           sizeof(int32_t) * (size_t)m->bs);
  for (int32_t i = 0; i < count; i++) {
    int32_t v = m->next_value++;
    m->storage[slot[i]] = v;
    m->ref[s][pos[i]] = v;
  }
  brisk_kv_commit(m->kv, s, m->len[s]);
  m->len[s] += count;
  return BRISK_OK;
}

static brisk_status ask(model *m, int32_t s, int32_t n, int32_t known, int32_t grow, int32_t forks,
                        bool admit) {
  brisk_kv_ask a = {n, known, grow, forks, admit};
  return brisk_kv_seq_reserve(m->kv, s, &a);
}

/* A full pool: an ask for more than the pool has fails and changes
 * nothing; an ask that fits holds the blocks, so the batch of those tokens
 * succeeds after another sequence took every other block. */
static void test_full_pool(void **state) {
  (void)state;
  model m;
  model_init(&m, 6, 4, false);
  assert_int_equal(append(&m, 0, 10, NULL), BRISK_OK); /* 3 blocks */
  check_model(&m);
  assert_int_equal(ask(&m, 1, 13, 0, 0, 0, false), BRISK_E_KV_FULL); /* 4 blocks, 3 free */
  assert_non_null(strstr(brisk_last_error(), "KV cache full"));
  check_model(&m);
  assert_int_equal(ask(&m, 1, 12, 0, 0, 0, false), BRISK_OK);
  m.spare[1] = 3;
  check_model(&m);
  assert_int_equal(brisk_kv_n_free_blocks(m.kv), 0);
  /* Sequence 0 has room only in its last block now. */
  assert_int_equal(brisk_kv_seq_room(m.kv, 0), 2);
  assert_int_equal(brisk_kv_seq_room(m.kv, 1), 12);
  assert_int_equal(append(&m, 0, 3, NULL), BRISK_E_KV_FULL);
  assert_int_equal(append(&m, 0, 2, NULL), BRISK_OK);
  assert_int_equal(append(&m, 1, 12, NULL), BRISK_OK);
  check_model(&m);
  assert_int_equal(m.spare[1], 0);
  /* Asking again for what is held takes nothing more. */
  assert_int_equal(ask(&m, 0, 0, 0, 0, 0, false), BRISK_OK);
  assert_int_equal(ask(&m, 1, 0, 0, 0, 0, false), BRISK_OK);
  check_model(&m);
  /* Bad arguments. */
  assert_int_equal(ask(&m, NSEQ, 1, 0, 0, 0, false), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(ask(&m, 0, -1, 0, 0, 0, false), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(ask(&m, 0, 1, INT32_MAX, 0, 0, false), BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "maximum length"));
  check_model(&m);
  model_free(&m);
}

/* Copy-on-write: a fork shares a partly filled last block; an ask of the
 * writer counts and holds the copy, which the batch then uses. */
static void test_copy_on_write(void **state) {
  (void)state;
  model m;
  model_init(&m, 5, 4, false);
  assert_int_equal(append(&m, 0, 6, NULL), BRISK_OK); /* 2 blocks, the last half full */
  assert_int_equal(brisk_kv_seq_fork(m.kv, 0, 1), BRISK_OK);
  m.len[1] = 6;
  memcpy(m.ref[1], m.ref[0], sizeof m.ref[0]);
  check_model(&m);
  /* One token for the fork: the copy of the shared block, no new block. */
  assert_int_equal(expected_hold(&m, 1, 1, 0), 1);
  assert_int_equal(ask(&m, 1, 1, 0, 0, 0, false), BRISK_OK);
  m.spare[1] = 1;
  check_model(&m);
  /* Room: the copy's slack (2) plus the other 2 available blocks. */
  assert_int_equal(brisk_kv_seq_room(m.kv, 1), 2 + 2 * 4);
  /* The parent shares the block too: its room pays for its own copy. */
  assert_int_equal(brisk_kv_seq_room(m.kv, 0), 2 + 1 * 4);
  /* Another sequence takes the rest of the pool. */
  assert_int_equal(append(&m, 2, 8, NULL), BRISK_OK);
  assert_int_equal(brisk_kv_n_free_blocks(m.kv), 0);
  assert_int_equal(brisk_kv_seq_room(m.kv, 0), 0); /* its copy finds no block */
  assert_int_equal(ask(&m, 0, 1, 0, 0, 0, false), BRISK_E_KV_FULL);
  assert_int_equal(append(&m, 1, 1, NULL), BRISK_OK); /* the held copy */
  check_model(&m);
  assert_int_equal(m.spare[1], 0);
  /* Now the parent holds its block alone: it writes in place. */
  assert_int_equal(ask(&m, 0, 2, 0, 0, 0, false), BRISK_OK);
  assert_int_equal(append(&m, 0, 2, NULL), BRISK_OK);
  check_model(&m);
  model_free(&m);
}

/* Rollback: a failed ask leaves the spares and promises as they were;
 * truncating to the current length, forking onto a sequence, attaching a
 * prefix and freeing give spares back. */
static void test_rollback(void **state) {
  (void)state;
  model m;
  model_init(&m, 8, 4, false);
  assert_int_equal(append(&m, 0, 5, NULL), BRISK_OK);
  assert_int_equal(ask(&m, 0, 7, 0, 0, 0, false), BRISK_OK); /* 12 tokens: 1 block more */
  m.spare[0] = 1;
  assert_int_equal(ask(&m, 0, 12, 0, 0, 0, false), BRISK_OK); /* 17: 2 more */
  m.spare[0] = 3;
  check_model(&m);
  assert_int_equal(ask(&m, 0, 40, 0, 0, 0, false), BRISK_E_KV_FULL);
  check_model(&m);
  assert_int_equal(brisk_kv_seq_truncate(m.kv, 0, 5), BRISK_OK); /* the same length */
  m.spare[0] = 0;
  check_model(&m);
  /* Spares of an empty sequence go when it is forked onto. */
  assert_int_equal(ask(&m, 1, 9, 0, 0, 0, false), BRISK_OK);
  m.spare[1] = 3;
  check_model(&m);
  assert_int_equal(brisk_kv_seq_fork(m.kv, 0, 1), BRISK_OK);
  m.spare[1] = 0;
  m.len[1] = 5;
  memcpy(m.ref[1], m.ref[0], sizeof m.ref[0]);
  check_model(&m);
  assert_int_equal(ask(&m, 2, 4, 0, 0, 0, false), BRISK_OK);
  m.spare[2] = 1;
  assert_int_equal(brisk_kv_seq_free(m.kv, 2), BRISK_OK);
  m.spare[2] = 0;
  check_model(&m);
  assert_int_equal(brisk_kv_seq_free(m.kv, 1), BRISK_OK);
  m.len[1] = 0;
  check_model(&m);
  model_free(&m);
}

/* Admission promises: an admitted sequence is promised its known tokens
 * and growth; a later admission that would eat into it is refused, while
 * a running sequence's growth may use it. A promise larger than the pool
 * is capped, so an empty pool admits it. */
static void test_promises(void **state) {
  (void)state;
  model m;
  model_init(&m, 10, 4, false);
  /* 6 known tokens (2 blocks) and 8 of growth (2 more). */
  assert_int_equal(ask(&m, 0, 0, 6, 8, 0, true), BRISK_OK);
  assert_int_equal(brisk_kv_n_promised(m.kv), 4);
  check_model(&m); /* promised, not held */
  /* 7 blocks would leave 3 for a promise of 4. */
  assert_int_equal(ask(&m, 1, 0, 28, 0, 0, true), BRISK_E_KV_FULL);
  assert_non_null(strstr(brisk_last_error(), "promised to others"));
  assert_int_equal(ask(&m, 1, 0, 24, 0, 0, true), BRISK_OK);
  assert_int_equal(brisk_kv_n_promised(m.kv), 10);
  /* Holding part of a promise moves it from promised to held. */
  assert_int_equal(ask(&m, 0, 4, 2, 8, 0, false), BRISK_OK);
  m.spare[0] = 1;
  assert_int_equal(brisk_kv_n_promised(m.kv), 9);
  check_model(&m);
  /* Without admit an ask may take what others were promised. */
  assert_int_equal(ask(&m, 2, 4, 0, 0, 0, true), BRISK_E_KV_FULL);
  assert_int_equal(ask(&m, 2, 4, 0, 0, 0, false), BRISK_OK);
  m.spare[2] = 1;
  check_model(&m);
  /* Forks: 2 forks at 6 tokens (a half-full last block), growing 8 each:
   * 2 blocks of growth and a copy apiece. */
  assert_int_equal(brisk_kv_seq_free(m.kv, 1), BRISK_OK);
  assert_int_equal(brisk_kv_seq_free(m.kv, 2), BRISK_OK);
  m.spare[2] = 0;
  assert_int_equal(ask(&m, 0, 4, 2, 8, 2, false), BRISK_OK);
  assert_int_equal(brisk_kv_n_promised(m.kv), 3 + 2 * 3);
  /* Freed sequences promise nothing. */
  assert_int_equal(brisk_kv_seq_free(m.kv, 0), BRISK_OK);
  m.spare[0] = 0;
  assert_int_equal(brisk_kv_n_promised(m.kv), 0);
  check_model(&m);
  /* Larger than the pool: admitted into the empty pool, not beside another. */
  assert_int_equal(ask(&m, 0, 0, 100, 0, 0, true), BRISK_OK);
  assert_int_equal(ask(&m, 1, 0, 100, 0, 0, true), BRISK_E_KV_FULL);
  model_free(&m);
}

/* A windowed sequence is promised at most its window's bound (sink blocks,
 * two windows, three blocks), however much it will generate: two such
 * sequences of 1000 tokens each are admitted side by side into 20 blocks. */
static void test_window_promise(void **state) {
  (void)state;
  model m;
  model_init(&m, 20, 4, false);
  assert_int_equal(brisk_kv_seq_set_window(m.kv, 0, 3, 8), BRISK_OK); /* 1 sink block */
  assert_int_equal(brisk_kv_seq_set_window(m.kv, 1, 0, 6), BRISK_OK);
  assert_int_equal(ask(&m, 0, 0, 20, 1000, 0, true), BRISK_OK);
  assert_int_equal(brisk_kv_n_promised(m.kv), 1 + 4 + 3);
  assert_int_equal(ask(&m, 1, 0, 20, 1000, 0, true), BRISK_OK);
  assert_int_equal(brisk_kv_n_promised(m.kv), 8 + 3 + 3);
  /* Holding blocks takes them out of the promise, not beyond the bound. */
  assert_int_equal(ask(&m, 0, 8, 12, 1000, 0, false), BRISK_OK);
  m.spare[0] = 2;
  assert_int_equal(brisk_kv_n_promised(m.kv), 6 + 6);
  check_model(&m);
  /* Without a window the same ask promises its whole growth. */
  assert_int_equal(brisk_kv_seq_free(m.kv, 1), BRISK_OK);
  assert_int_equal(brisk_kv_seq_set_window(m.kv, 1, 0, 0), BRISK_OK);
  assert_int_equal(ask(&m, 1, 0, 20, 1000, 0, true), BRISK_E_KV_FULL);
  brisk_kv_seq_free(m.kv, 0);
  m.spare[0] = 0;
  model_free(&m);
}

/* Prefix cache: cached blocks are room (evicted on demand, forgotten);
 * an attached prefix ending in a published block is copied before a write
 * after truncation into it. */
static void test_prefix_cache_hits(void **state) {
  (void)state;
  model m;
  model_init(&m, 6, 4, true);
  int32_t toks[12];
  for (int32_t i = 0; i < 12; i++) toks[i] = 100 + i;
  assert_int_equal(append(&m, 0, 12, toks), BRISK_OK); /* 3 full blocks, published */
  assert_int_equal(brisk_kv_seq_free(m.kv, 0), BRISK_OK);
  m.len[0] = 0;
  assert_int_equal(brisk_kv_n_cached_blocks(m.kv), 3);
  check_model(&m);
  /* A hit: 2 blocks attached (the last token is left to decode). */
  int32_t reused = 0;
  assert_int_equal(brisk_kv_match_prefix(m.kv, 1, toks, 9, &reused), BRISK_OK);
  assert_int_equal(reused, 8);
  m.len[1] = 8;
  memcpy(m.ref[1], m.ref[0], sizeof m.ref[0]);
  for (int32_t p = 0; p < 8; p++) {
    int32_t nb;
    const int32_t *t = brisk_kv_block_table(m.kv, 1, &nb);
    m.ref[1][p] = m.storage[t[p / 4] * 4 + p % 4];
  }
  check_model(&m);
  assert_int_equal(brisk_kv_n_cached_blocks(m.kv), 1);
  /* Admission asks for the rest: the cached block counts as room. */
  assert_int_equal(ask(&m, 1, 0, 1, 15, 0, true), BRISK_OK); /* 4 blocks */
  assert_int_equal(ask(&m, 1, 1, 0, 15, 0, false), BRISK_OK);
  m.spare[1] = 1;
  check_model(&m);
  /* Taking every available block evicts the cached one. */
  assert_int_equal(ask(&m, 2, 12, 0, 0, 0, false), BRISK_OK);
  m.spare[2] = 3;
  assert_int_equal(brisk_kv_n_cached_blocks(m.kv), 0);
  check_model(&m);
  assert_int_equal(brisk_kv_seq_free(m.kv, 2), BRISK_OK);
  m.spare[2] = 0;
  assert_int_equal(append(&m, 1, 1, &toks[8]), BRISK_OK);
  check_model(&m);
  /* Truncated into a published block: a write copies it, and the ask
   * counts that copy. */
  assert_int_equal(brisk_kv_seq_truncate(m.kv, 1, 6), BRISK_OK);
  m.len[1] = 6;
  check_model(&m);
  int32_t nb;
  const int32_t *t = brisk_kv_block_table(m.kv, 1, &nb);
  assert_true(brisk_kv_block_is_published(m.kv, t[1]));
  assert_int_equal(expected_hold(&m, 1, 1, 1), 1);
  assert_int_equal(ask(&m, 1, 1, 0, 0, 0, false), BRISK_OK);
  m.spare[1] = 1;
  check_model(&m);
  int32_t free_before = brisk_kv_n_free_blocks(m.kv);
  int32_t seq = 1, pos = 6, tok = 7, n_copies;
  int64_t slot;
  brisk_kv_copy copy;
  assert_int_equal(brisk_kv_reserve(m.kv, 1, &seq, &pos, &tok, &slot, &copy, &n_copies), BRISK_OK);
  assert_int_equal(n_copies, 1);
  /* The spare was the copy, and the published source is cached again. */
  assert_int_equal(brisk_kv_n_free_blocks(m.kv), free_before + 1);
  model_free(&m);
}

/* Random asks, batches, forks, truncations and frees against the model's
 * own count: an ask succeeds exactly when the blocks it lacks are
 * available, and a batch of asked-for tokens then always succeeds without
 * taking from the pool. */
static void test_random(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("kv_reserve_random");
  for (int round = 0; round < 30; round++) {
    model m;
    int32_t bs = 1 + (int32_t)(test_rng_u64(&r) % 6);
    model_init(&m, 4 + (int32_t)(test_rng_u64(&r) % 30), bs, false);
    int32_t asked[NSEQ] = {0};
    for (int op = 0; op < 300; op++) {
      int kind = (int)(test_rng_u64(&r) % 12);
      int32_t a = (int32_t)(test_rng_u64(&r) % NSEQ), b = (int32_t)(test_rng_u64(&r) % NSEQ);
      int32_t n = 1 + (int32_t)(test_rng_u64(&r) % 12);
      if (m.len[a] + 12 >= MAXLEN || m.len[b] + 12 >= MAXLEN) kind = 11; /* free a */
      if (kind < 4) {
        int32_t need = expected_hold(&m, a, n, 0), avail = brisk_kv_n_free_blocks(m.kv);
        brisk_status st = ask(&m, a, n, 0, 0, 0, false);
        if (need > avail) {
          assert_int_equal(st, BRISK_E_KV_FULL);
        } else {
          assert_int_equal(st, BRISK_OK);
          m.spare[a] += need;
          asked[a] = n;
        }
        check_model(&m);
      } else if (kind < 7) {
        /* The asked-for tokens (when still asked for), else any. */
        int32_t c = asked[a] ? asked[a] : n;
        int32_t free_before = brisk_kv_n_free_blocks(m.kv);
        brisk_status st = append(&m, a, c, NULL);
        if (asked[a]) {
          assert_int_equal(st, BRISK_OK);
          assert_int_equal(brisk_kv_n_free_blocks(m.kv), free_before);
        }
        if (!st) asked[a] = 0;
        check_model(&m);
      } else if (kind < 9) {
        if (m.len[b] == 0 && a != b) {
          assert_int_equal(brisk_kv_seq_fork(m.kv, a, b), BRISK_OK);
          m.len[b] = m.len[a];
          m.spare[b] = 0;
          asked[b] = 0;
          asked[a] = 0; /* its last block may be shared now: ask again */
          memcpy(m.ref[b], m.ref[a], sizeof m.ref[a]);
          check_model(&m);
        }
      } else if (kind < 11) {
        int32_t len = m.len[a] ? (int32_t)(test_rng_u64(&r) % (uint64_t)(m.len[a] + 1)) : 0;
        assert_int_equal(brisk_kv_seq_truncate(m.kv, a, len), BRISK_OK);
        m.len[a] = len;
        m.spare[a] = 0;
        asked[a] = 0;
        check_model(&m);
      } else {
        assert_int_equal(brisk_kv_seq_free(m.kv, a), BRISK_OK);
        m.len[a] = 0;
        m.spare[a] = 0;
        asked[a] = 0;
        check_model(&m);
      }
    }
    assert_int_equal(brisk_kv_n_promised(m.kv), 0); /* asks without growth promise nothing */
    model_free(&m);
  }
}

static brisk_status create_ask_free(void *ctx) {
  (void)ctx;
  brisk_kv *kv = NULL;
  brisk_status st = brisk_kv_create(8, 4, 3, true, &kv);
  if (st) return st;
  brisk_kv_ask a = {.n_tokens = 9, .n_grow = 4, .admit = true};
  int32_t free_before = brisk_kv_n_free_blocks(kv);
  st = brisk_kv_seq_reserve(kv, 1, &a);
  /* A failed ask holds nothing. */
  if (st && brisk_kv_n_free_blocks(kv) != free_before) st = BRISK_E_INTERNAL;
  if (st && brisk_kv_n_promised(kv) != 0) st = BRISK_E_INTERNAL;
  brisk_kv_free(kv);
  return st;
}

static void test_allocation_failures(void **state) {
  (void)state;
  test_every_allocation_fails(create_ask_free, NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_full_pool),      cmocka_unit_test(test_copy_on_write),
      cmocka_unit_test(test_rollback),       cmocka_unit_test(test_promises),
      cmocka_unit_test(test_window_promise), cmocka_unit_test(test_prefix_cache_hits),
      cmocka_unit_test(test_random),         cmocka_unit_test(test_allocation_failures),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
