/* brisk_worker_run under `mpirun -np 2` and `-np 4`: every process loads
 * the shared tiny model with tp_size = the job's size (or, with the `pp`
 * argument, pp_size = the job's size: the processes are pipeline stages);
 * each keeps only its rank's part of the weights; rank 0's context gives
 * the logits and greedy tokens of a one-process TP = 1 context bit for
 * bit, and so does an engine's (greedy and seeded sampling, rank 0 owning
 * the engine); then a worker fails the first step of the third context (a
 * forced error while rank 0 is in its pass): rank 0's decode returns
 * BRISK_E_CANCELLED and is rolled back, the failing worker's
 * brisk_worker_run returns BRISK_E_INTERNAL and the others'
 * BRISK_E_CANCELLED, and every process ends (the suite's timeout catches
 * one left waiting). `grid` (-np 4): pipeline stages of 2 TP ranks each,
 * rank 1 (stage 0's TP rank 1) failing. `rank0` / `pp-rank0` /
 * `grid-rank0`: rank 0 fails instead. Not
 * cmocka: each process checks and exits nonzero on the first failure,
 * which mpirun reports. */
#include "brisk.h"
#include "context/swap.h"
#include "context/tp.h"
#include "engine_harness.h"
#include "model/model.h"
#include "model/shard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank_g = -1;

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "rank %d: %s:%d: check failed: %s (%s)\n", rank_g, __FILE__, __LINE__,       \
              #cond, brisk_last_error());                                                          \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

static bool pp_mode;   /* the processes are pipeline stages, not TP ranks */
static bool grid_mode; /* a grid: pipeline stages of 2 TP ranks each */

static brisk_model *load(const char *path, int ranks) {
  brisk_model_params mp;
  brisk_model_params_init(&mp);
  if (grid_mode && ranks > 1) {
    mp.tp_size = 2;
    mp.pp_size = ranks / 2;
  } else if (pp_mode) {
    mp.pp_size = ranks;
  } else {
    mp.tp_size = ranks;
  }
  brisk_model *m = NULL;
  CHECK(brisk_model_load(path, &mp, &m) == BRISK_OK);
  return m;
}

static brisk_context *make_ctx(const brisk_model *m) {
  brisk_context_params p;
  brisk_context_params_init(&p);
  p.kv_tokens = 128;
  p.n_threads = 1;
  p.max_batch_tokens = 16;
  p.n_seq_max = 2;
  brisk_context *c = NULL;
  CHECK(brisk_context_create(m, &p, &c) == BRISK_OK);
  return c;
}

/* Each process keeps its own shard only: the others are absent, its
 * weights are the replicated ones plus about 1/size of the split ones
 * (brisk_split_rank_bytes), and its row-parallel copies are about 1/size
 * of a whole model's. */
static void check_divided_pp(const char *path, const brisk_model *m, int32_t rank, int32_t size);

/* In a grid, process p keeps TP shard p % 2 (only) of stage p / 2's
 * layers (only). */
static void check_divided_grid(const brisk_model *m, int32_t rank, int32_t size) {
  const int32_t n = (int32_t)m->hp.n_layer, st = rank / 2, stages = size / 2;
  CHECK(m->local && m->local_tp_rank == rank % 2);
  CHECK(m->local_begin == st * n / stages && m->local_end == (st + 1) * n / stages);
  for (int32_t q = 0; q < 2; q++) CHECK((m->tp_ranks[q] != NULL) == (q == rank % 2));
  const brisk_model *r = m->tp_ranks[rank % 2];
  for (int32_t l = 0; l < n; l++)
    CHECK((r->split->layers[l].wo[0].data != NULL) == (l >= m->local_begin && l < m->local_end));
  printf("grid rank %d: stage %d, TP rank %d, layers %d..%d, weights %.3f MiB\n", (int)rank,
         (int)st, (int)(rank % 2), (int)m->local_begin, (int)m->local_end - 1,
         brisk_split_rank_bytes(m, rank % 2) / 1048576.0);
}

static void check_divided(const char *path, const brisk_model *m, int32_t rank, int32_t size) {
  if (grid_mode) {
    check_divided_grid(m, rank, size);
    return;
  }
  if (pp_mode) {
    check_divided_pp(path, m, rank, size);
    return;
  }
  brisk_model *m1 = load(path, 1);
  CHECK(m->tp_size == size && m->local && m->local_tp_rank == rank);
  for (int32_t q = 0; q < size; q++) CHECK((m->tp_ranks[q] != NULL) == (q == rank));
  CHECK(brisk_split_rank_bytes(m, (rank + 1) % size) == 0);
  uint64_t full = brisk_split_rank_bytes(m1, 0), mine = brisk_split_rank_bytes(m, rank);
  uint64_t repl = m1->token_embd.row_bytes * m1->token_embd.rows +
                  m1->output_norm.row_bytes * m1->output_norm.rows;
  for (uint32_t l = 0; l < m1->hp.n_layer; l++)
    repl += m1->layers[l].attn_norm.row_bytes * m1->layers[l].attn_norm.rows +
            m1->layers[l].ffn_norm.row_bytes * m1->layers[l].ffn_norm.rows;
  CHECK(full > repl && mine > repl);
  double share = (double)(mine - repl) / (double)(full - repl);
  CHECK(share > 0.8 / size && share < 1.25 / size);
  uint64_t copies = m->tp_ranks[rank]->split->owned_bytes, all = m1->split->owned_bytes;
  CHECK(all > 0 && copies * size >= all * 3 / 4 && copies * size <= all * 5 / 4);
  CHECK(brisk_model_memory_used(m) < brisk_model_memory_used(m1));
  printf("rank %d of %d: weights %.3f MiB of %.3f (replicated %.3f), split share %.3f; "
         "row-parallel copies %.3f MiB of %.3f; allocated %.3f MiB (one process: %.3f)\n",
         (int)rank, (int)size, mine / 1048576.0, full / 1048576.0, repl / 1048576.0, share,
         copies / 1048576.0, all / 1048576.0, brisk_model_memory_used(m) / 1048576.0,
         brisk_model_memory_used(m1) / 1048576.0);
  brisk_model_free(m1);
}

/* Under PP each process keeps its stage's layers: their slot copies only
 * (the others' are absent), the output only on the last stage, and its
 * weights are the replicated ones plus its layers. */
static void check_divided_pp(const char *path, const brisk_model *m, int32_t rank, int32_t size) {
  brisk_model *m1 = load(path, 1);
  const int32_t n = (int32_t)m->hp.n_layer, l0 = rank * n / size, l1 = (rank + 1) * n / size;
  CHECK(m->local && m->local_begin == l0 && m->local_end == l1 && m->local_tp_rank == -1);
  CHECK(m->local_output == (rank == size - 1));
  for (int32_t l = 0; l < n; l++)
    CHECK((m->split->layers[l].wo[0].data != NULL) == (l >= l0 && l < l1));
  uint64_t per_layer = 0;
  for (int32_t l = l0; l < l1; l++) {
    const brisk_layer *ly = &m1->layers[l];
    const brisk_weight *ws[] = {&ly->attn_norm, &ly->wq,       &ly->wk,     &ly->wv,      &ly->wo,
                                &ly->ffn_norm,  &ly->ffn_gate, &ly->ffn_up, &ly->ffn_down};
    for (size_t i = 0; i < sizeof ws / sizeof *ws; i++)
      per_layer += ws[i]->data ? ws[i]->row_bytes * (uint64_t)ws[i]->rows : 0;
  }
  uint64_t shared = m1->token_embd.row_bytes * m1->token_embd.rows +
                    m1->output_norm.row_bytes * m1->output_norm.rows;
  if (rank == size - 1 && m1->output.data != m1->token_embd.data)
    shared += m1->output.row_bytes * m1->output.rows;
  const uint64_t mine = brisk_split_rank_bytes(m, 0), full = brisk_split_rank_bytes(m1, 0);
  CHECK(mine == shared + per_layer && mine < full);
  const uint64_t copies = m->split->owned_bytes, all = m1->split->owned_bytes;
  CHECK(all > 0 && copies * size >= all * 3 / 4 && copies * size <= all * 5 / 4);
  CHECK(brisk_model_memory_used(m) < brisk_model_memory_used(m1));
  printf("stage %d of %d: layers %d..%d, weights %.3f MiB of %.3f; row-parallel copies %.3f MiB "
         "of %.3f; allocated %.3f MiB (one process: %.3f)\n",
         (int)rank, (int)size, (int)l0, (int)l1 - 1, mine / 1048576.0, full / 1048576.0,
         copies / 1048576.0, all / 1048576.0, brisk_model_memory_used(m) / 1048576.0,
         brisk_model_memory_used(m1) / 1048576.0);
  brisk_model_free(m1);
}

enum { N_PROMPT = 7, STEPS = 4 };

/* The prompt's logits (every token), then STEPS greedy decodes: all logits
 * into out ([N_PROMPT + STEPS][n_vocab]). */
static void run(brisk_context *c, int32_t nv, float *out) {
  brisk_batch *b = NULL;
  CHECK(brisk_batch_create(N_PROMPT, &b) == BRISK_OK);
  for (int32_t i = 0; i < N_PROMPT; i++) brisk_batch_add(b, (i * 37 + 1) % nv, i, 0, true);
  CHECK(brisk_decode(c, b) == BRISK_OK);
  for (int32_t i = 0; i < N_PROMPT; i++)
    memcpy(out + (size_t)i * nv, brisk_get_logits(c, i), (size_t)nv * sizeof(float));
  for (int s = 0; s < STEPS; s++) {
    const float *last = out + (size_t)(N_PROMPT + s - 1) * nv;
    int32_t best = 0;
    for (int32_t v = 1; v < nv; v++)
      if (last[v] > last[best]) best = v;
    brisk_batch_clear(b);
    brisk_batch_add(b, best, N_PROMPT + s, 0, true);
    CHECK(brisk_decode(c, b) == BRISK_OK);
    memcpy(out + (size_t)(N_PROMPT + s) * nv, brisk_get_logits(c, 0), (size_t)nv * sizeof(float));
  }
  brisk_batch_free(b);
}

/* `rank0`: rank 0 fails the first step of its first context once the
 * workers have it (they are in their pass): its decode returns that error,
 * every worker's brisk_worker_run BRISK_E_CANCELLED. */
static int rank0_fails(int32_t rank, brisk_model *m) {
  if (rank != 0) {
    CHECK(brisk_worker_run(m, 1) == BRISK_E_CANCELLED);
  } else {
    brisk_context *c = make_ctx(m);
    brisk_batch *b = NULL;
    CHECK(brisk_batch_create(4, &b) == BRISK_OK);
    for (int32_t i = 0; i < 4; i++) brisk_batch_add(b, i + 3, i, 0, i == 3);
    if (pp_mode)
      brisk_context_pp_force_error(c, 0);
    else
      brisk_context_tp_force_error(c, 0);
    CHECK(brisk_decode(c, b) == BRISK_E_INTERNAL);
    CHECK(brisk_seq_len(c, 0) == 0);
    CHECK(brisk_decode(c, b) == BRISK_E_CANCELLED);
    brisk_batch_free(b);
    brisk_context_free(c);
  }
  brisk_model_free(m);
  brisk_mpi_finalize();
  if (rank == 0) printf("ok: rank 0 failed, every rank returned\n");
  return 0;
}

int main(int argc, char **argv) {
  const char *dir = getenv("BRISK_SHARED_DIR");
  char path[1024];
  snprintf(path, sizeof path, "%s/models/tiny-q8_0.gguf", dir ? dir : "../shared");
  FILE *f = fopen(path, "rb");
  if (!f) {
    printf("SKIP: %s is absent\n", path);
    return 77;
  }
  fclose(f);
  int32_t rank = 0, size = 0;
  CHECK(brisk_mpi_world(&rank, &size) == BRISK_OK);
  rank_g = rank;
  CHECK(size >= 2);
  const char *mode = argc > 1 ? argv[1] : "tp";
  pp_mode = !strncmp(mode, "pp", 2);
  grid_mode = !strncmp(mode, "grid", 4);
  if (grid_mode) pp_mode = true; /* rank 0 fails as a pipeline stage */
  brisk_model *m = load(path, size);
  check_divided(path, m, rank, size);
  if (strstr(mode, "rank0")) return rank0_fails(rank, m);
  if (rank != 0) {
    CHECK(brisk_worker_run(NULL, 1) == BRISK_E_INVALID_ARGUMENT);
    if (rank == 1) brisk_tp_worker_force_error(3);
    brisk_status st = brisk_worker_run(m, 1);
    CHECK(st == (rank == 1 ? BRISK_E_INTERNAL : BRISK_E_CANCELLED));
    brisk_model_free(m);
    brisk_mpi_finalize();
    return 0;
  }
  CHECK(brisk_worker_run(m, 1) == BRISK_E_INVALID_ARGUMENT); /* rank 0 owns the contexts */
  /* The job's ranks against one process, bit for bit. */
  brisk_model *m1 = load(path, 1);
  const int32_t nv = brisk_model_n_vocab(m);
  size_t floats = (size_t)(N_PROMPT + STEPS) * (size_t)nv;
  float *ref = malloc(floats * sizeof(float)), *got = malloc(floats * sizeof(float));
  CHECK(ref && got);
  brisk_context *c = make_ctx(m1);
  run(c, nv, ref);
  brisk_context_free(c);
  c = make_ctx(m);
  run(c, nv, got);
  for (size_t i = 0; i < floats; i++)
    if (memcmp(&ref[i], &got[i], sizeof(float))) {
      fprintf(stderr, "logit %zu: %.9g over %d processes, %.9g in one\n", i, (double)got[i],
              (int)size, (double)ref[i]);
      return 1;
    }
  brisk_context_free(c);
  /* The engine on rank 0 (its one context: the second), against one
   * process's. */
  enum { N = 4 };
  static eh_job base[N], one[N], job[N];
  test_rng rng = test_rng_seeded("worker_mpi");
  for (int i = 0; i < N; i++) {
    eh_random_job(&rng, m1, &base[i], 12, 8, i % 2);
    base[i].stop_at_eog = 0;
  }
  for (int k = 0; k < 2; k++) {
    brisk_engine *e = eh_engine(k ? m : m1, 128, 8, 16, N, 0);
    memcpy(k ? job : one, base, sizeof base);
    for (int i = 0; i < N; i++) CHECK(eh_submit(e, k ? &job[i] : &one[i]) == BRISK_OK);
    eh_run(e, k ? job : one, N, 10000);
    brisk_engine_free(e);
  }
  for (int i = 0; i < N; i++) eh_expect_same(&one[i], &job[i]);
  /* Rank 1 fails the first step of this third context. */
  c = make_ctx(m);
  brisk_batch *b = NULL;
  CHECK(brisk_batch_create(4, &b) == BRISK_OK);
  for (int32_t i = 0; i < 4; i++) brisk_batch_add(b, i + 3, i, 0, i == 3);
  CHECK(brisk_decode(c, b) == BRISK_E_CANCELLED);
  CHECK(brisk_seq_len(c, 0) == 0); /* rolled back */
  CHECK(brisk_decode(c, b) == BRISK_E_CANCELLED);
  CHECK(strstr(brisk_last_error(), "failed earlier") != NULL);
  brisk_context_free(c);
  /* The job takes no more contexts. */
  brisk_context_params p;
  brisk_context_params_init(&p);
  p.kv_tokens = 64;
  c = NULL;
  CHECK(brisk_context_create(m, &p, &c) == BRISK_E_CANCELLED && c == NULL);
  brisk_batch_free(b);
  free(ref);
  free(got);
  brisk_model_free(m1);
  brisk_model_free(m);
  brisk_mpi_finalize();
  printf("ok: %d processes\n", (int)size);
  return 0;
}
