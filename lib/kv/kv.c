#include "kv/kv.h"

#include "core/alloc.h"
#include "core/error.h"

#include <string.h>

typedef struct kv_seq {
  int32_t len;      /* tokens held */
  int32_t n_blocks; /* always ceil(len / block_size) */
  size_t cap;
  int32_t *blocks; /* [cap] block table */
} kv_seq;

struct brisk_kv {
  brisk_block_pool pool;
  int32_t block_size;
  int32_t n_seq_max;
  kv_seq *seqs;     /* [n_seq_max] */
  int32_t *next;    /* [n_seq_max] scratch: next expected position while reserving */
  int32_t *touched; /* [n_seq_max] scratch: sequences in the batch, in first-seen order */
};

brisk_status brisk_kv_create(int32_t n_blocks, int32_t block_size, int32_t n_seq_max,
                             brisk_kv **out) {
  if (n_blocks < 1 || block_size < 1 || n_seq_max < 1)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "KV cache needs at least one block, block size and sequence (got %d, %d, %d)",
                       n_blocks, block_size, n_seq_max);
  brisk_kv *kv = brisk_calloc(1, sizeof *kv);
  if (!kv) return brisk_error_oom();
  kv->block_size = block_size;
  kv->n_seq_max = n_seq_max;
  kv->seqs = brisk_calloc((size_t)n_seq_max, sizeof *kv->seqs);
  kv->next = brisk_calloc((size_t)n_seq_max, sizeof *kv->next);
  kv->touched = brisk_calloc((size_t)n_seq_max, sizeof *kv->touched);
  if (!kv->seqs || !kv->next || !kv->touched || brisk_block_pool_init(&kv->pool, n_blocks)) {
    brisk_kv_free(kv);
    return brisk_error_oom();
  }
  *out = kv;
  return BRISK_OK;
}

void brisk_kv_free(brisk_kv *kv) {
  if (!kv) return;
  if (kv->seqs)
    for (int32_t s = 0; s < kv->n_seq_max; s++) brisk_free(kv->seqs[s].blocks);
  brisk_free(kv->seqs);
  brisk_free(kv->next);
  brisk_free(kv->touched);
  brisk_block_pool_destroy(&kv->pool);
  brisk_free(kv);
}

int32_t brisk_kv_block_size(const brisk_kv *kv) { return kv->block_size; }
int32_t brisk_kv_n_blocks(const brisk_kv *kv) { return kv->pool.n_blocks; }
int32_t brisk_kv_n_free_blocks(const brisk_kv *kv) { return kv->pool.n_free; }
int32_t brisk_kv_n_seq_max(const brisk_kv *kv) { return kv->n_seq_max; }

static brisk_status check_seq(const brisk_kv *kv, int32_t seq) {
  if (seq < 0 || seq >= kv->n_seq_max)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "sequence id %d is out of range [0, %d)", seq,
                       kv->n_seq_max);
  return BRISK_OK;
}

int32_t brisk_kv_seq_len(const brisk_kv *kv, int32_t seq) {
  return seq >= 0 && seq < kv->n_seq_max ? kv->seqs[seq].len : 0;
}

const int32_t *brisk_kv_block_table(const brisk_kv *kv, int32_t seq, int32_t *n_blocks) {
  *n_blocks = kv->seqs[seq].n_blocks;
  return kv->seqs[seq].blocks;
}

static int32_t blocks_for(const brisk_kv *kv, int32_t len) {
  return (int32_t)(((int64_t)len + kv->block_size - 1) / kv->block_size);
}

/* Whether appending to seq must first copy its shared, partly filled last block. */
static bool needs_cow(const brisk_kv *kv, const kv_seq *s) {
  return s->len % kv->block_size != 0 && kv->pool.ref[s->blocks[s->n_blocks - 1]] > 1;
}

brisk_status brisk_kv_reserve(brisk_kv *kv, int32_t n, const int32_t *seq, const int32_t *pos,
                              int64_t *slot, brisk_kv_copy *copies, int32_t *n_copies) {
  *n_copies = 0;
  int32_t n_touched = 0;
  brisk_status st = BRISK_OK;
  /* 1. Validate: every sequence continues where it stands. */
  for (int32_t i = 0; i < n && !st; i++) {
    int32_t s = seq[i];
    if ((st = check_seq(kv, s))) break;
    bool seen = false;
    for (int32_t t = 0; t < n_touched && !seen; t++) seen = kv->touched[t] == s;
    if (!seen) {
      kv->touched[n_touched++] = s;
      kv->next[s] = kv->seqs[s].len;
    }
    if (pos[i] != kv->next[s])
      st = brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "batch token %d: sequence %d continues at position %d, got %d", i, s,
                       kv->next[s], pos[i]);
    else if (kv->next[s] == INT32_MAX)
      st = brisk_error(BRISK_E_INVALID_ARGUMENT, "sequence %d is at the maximum length", s);
    else
      kv->next[s]++;
  }
  if (st) return st;
  /* 2. Count blocks and make room in the tables before changing anything. */
  int64_t need = 0;
  for (int32_t t = 0; t < n_touched; t++) {
    kv_seq *s = &kv->seqs[kv->touched[t]];
    int32_t want = blocks_for(kv, kv->next[kv->touched[t]]);
    need += want - s->n_blocks + (needs_cow(kv, s) ? 1 : 0);
    if (brisk_grow((void **)&s->blocks, &s->cap, (size_t)want, sizeof *s->blocks))
      return brisk_error_oom();
  }
  if (need > kv->pool.n_free)
    return brisk_error(BRISK_E_KV_FULL, "KV cache full: the batch needs %lld blocks, %d are free",
                       (long long)need, kv->pool.n_free);
  /* 3. Commit: copy shared last blocks, then append fresh ones. */
  for (int32_t t = 0; t < n_touched; t++) {
    int32_t id = kv->touched[t];
    kv_seq *s = &kv->seqs[id];
    if (needs_cow(kv, s)) {
      int32_t old = s->blocks[s->n_blocks - 1], fresh = brisk_block_pool_alloc(&kv->pool);
      copies[(*n_copies)++] = (brisk_kv_copy){old, fresh};
      brisk_block_pool_decref(&kv->pool, old);
      s->blocks[s->n_blocks - 1] = fresh;
    }
    int32_t want = blocks_for(kv, kv->next[id]);
    while (s->n_blocks < want) s->blocks[s->n_blocks++] = brisk_block_pool_alloc(&kv->pool);
    s->len = kv->next[id];
  }
  for (int32_t i = 0; i < n; i++) {
    const kv_seq *s = &kv->seqs[seq[i]];
    slot[i] = (int64_t)s->blocks[pos[i] / kv->block_size] * kv->block_size +
              pos[i] % kv->block_size;
  }
  return BRISK_OK;
}

brisk_status brisk_kv_seq_truncate(brisk_kv *kv, int32_t seq, int32_t len) {
  brisk_status st = check_seq(kv, seq);
  if (st) return st;
  kv_seq *s = &kv->seqs[seq];
  if (len < 0 || len > s->len)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "cannot truncate sequence %d of %d tokens to %d tokens", seq, s->len, len);
  int32_t keep = blocks_for(kv, len);
  while (s->n_blocks > keep) brisk_block_pool_decref(&kv->pool, s->blocks[--s->n_blocks]);
  s->len = len;
  return BRISK_OK;
}

brisk_status brisk_kv_seq_free(brisk_kv *kv, int32_t seq) { return brisk_kv_seq_truncate(kv, seq, 0); }

brisk_status brisk_kv_seq_fork(brisk_kv *kv, int32_t src, int32_t dst) {
  brisk_status st;
  if ((st = check_seq(kv, src)) || (st = check_seq(kv, dst))) return st;
  if (src == dst) return brisk_error(BRISK_E_INVALID_ARGUMENT, "cannot fork sequence %d onto itself", src);
  kv_seq *s = &kv->seqs[src], *d = &kv->seqs[dst];
  if (d->len != 0)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "fork target sequence %d is not empty (%d tokens); free it first", dst,
                       d->len);
  if (brisk_grow((void **)&d->blocks, &d->cap, (size_t)s->n_blocks, sizeof *d->blocks))
    return brisk_error_oom();
  for (int32_t b = 0; b < s->n_blocks; b++) {
    d->blocks[b] = s->blocks[b];
    brisk_block_pool_incref(&kv->pool, s->blocks[b]);
  }
  d->n_blocks = s->n_blocks;
  d->len = s->len;
  return BRISK_OK;
}
