/* The tiny model and context both fuzz_snapshot.c and seeds_snapshot.c make
 * (the same spec and seed give the same fingerprint, so the seeds' headers
 * match the target's model). */
#ifndef BRISK_FUZZ_SNAPSHOT_MODEL_H
#define BRISK_FUZZ_SNAPSHOT_MODEL_H

#include "test_models.h"

#include <stdlib.h>
#include <unistd.h>

static inline brisk_model *snapshot_fuzz_model(void) {
  char path[] = "/tmp/brisk-fuzz-snapshot-XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) return NULL;
  close(fd);
  test_model_spec s = test_model_default("llama");
  s.n_vocab = 40, s.n_embd = 16, s.n_layer = 2, s.n_head = 2, s.n_head_kv = 1, s.head_dim = 8;
  s.n_ff = 16;
  test_rng r = test_rng_seeded("fuzz_snapshot");
  brisk_model *m = NULL;
  if (test_model_write(path, &s, &r, NULL) != BRISK_OK || brisk_model_load(path, NULL, &m))
    m = NULL;
  unlink(path);
  return m;
}

/* The context of KV type t (t % 4: a brisk_kv_type) with a pool of 64
 * tokens in blocks of 4 and 4 sequences. */
static inline brisk_context *snapshot_fuzz_context(const brisk_model *m, unsigned t) {
  brisk_context_params p;
  brisk_context_params_init(&p);
  p.kv_type = (brisk_kv_type)(t % 4);
  p.kv_tokens = 64;
  p.block_size = 4;
  p.n_seq_max = 4;
  p.max_batch_tokens = 32;
  p.n_threads = 1;
  brisk_context *c = NULL;
  return brisk_context_create(m, &p, &c) == BRISK_OK ? c : NULL;
}

#endif
