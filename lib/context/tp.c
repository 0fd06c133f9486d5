/* Tensor-parallel follower ranks as threads (context/tp.h).
 *
 * On CUDA devices (a model whose shards were placed on devices, one rank
 * per device) each rank has two communicators: the threads one carries the
 * step messages, which are host memory, and an NCCL one (one local group,
 * grouped init, comm_nccl.h) the forward pass's all-reduces and the logits
 * gather use on device buffers. A failure aborts both, so a rank waiting
 * in either returns. */
#include "context/tp.h"
#include "context/pp.h"
#include "context/step_msg.h"

#include "backend/device.h"
#include "core/alloc.h"
#include "core/checked.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/log.h"
#include "core/threadpool.h"
#include "model/model.h"
#include "model/shard.h"
#include "parallel/comm_nccl.h"
#include "parallel/world.h"

#include <pthread.h>
#include <stdio.h>
#include <stdatomic.h>
#include <string.h>

enum { TP_OP_STEP = 1, TP_OP_SHUTDOWN = 2 };
enum { WORLD_OP_CONTEXT = 1, WORLD_OP_END = 2 };

/* What rank 0 of an MPI world sends its workers when it creates a context
 * (WORLD_OP_CONTEXT: the KV geometry and pass size) or ends (WORLD_OP_END,
 * brisk_mpi_finalize). */
typedef struct world_header {
  int64_t op, kv_dtype, n_blocks, block_size, max_tokens;
} world_header;

/* Set once a context over the world failed: its ranks have stopped, so
 * the world takes no more contexts and rank 0 sends no end message. */
static bool world_failed;
/* Test hook of a worker process: the context it serves as its
 * worker_force_at-th (counting from 1; 0: none) fails its first step. */
static int worker_served, worker_force_at;

/* The step header every rank receives first; the payload's size follows
 * from it. */
typedef brisk_step_header tp_header;

typedef struct tp_rank {
  brisk_tp *g;
  int rank;
  const brisk_model *shard;
  brisk_comm *comm; /* the forward pass's collectives */
  brisk_comm *ctl;  /* the step messages: comm, or a threads handle beside NCCL's */
  brisk_threadpool *pool;
  brisk_backend *be;
  brisk_backend *dev_be; /* the rank's device, for a shard placed on one; else NULL */
  brisk_forward *fwd;
  brisk_forward_kv kv;
  float *logits; /* [max_tokens][n_vocab] (the device's memory on one): gathered, unused here */
  unsigned char *msg;
  size_t msg_cap;
  pthread_t thread;
  bool started;
  atomic_int force_error;
  brisk_status status; /* how the follower ended */
} tp_rank;

struct brisk_tp {
  const brisk_model *model;
  int size;
  int32_t max_tokens;
  int32_t layer_begin, layer_end; /* the pipeline stage's layers (all without PP) */
  tp_rank ranks[BRISK_TP_MAX];
  brisk_comm *comm[BRISK_TP_MAX];
  /* Ranks on CUDA devices: comm[] are NCCL handles, ctl[] threads handles
   * for the step messages (NULL otherwise: comm[] carries both). */
  brisk_comm *ctl[BRISK_TP_MAX];
  bool device;
  unsigned char *msg; /* rank 0's payload */
  size_t msg_cap;
  bool failed;
  bool force_error0; /* test hook: rank 0 fails its next step once sent */
  /* The ranks are the processes of the MPI world (parallel/world.h):
   * comm[0] is the world's handle, borrowed, and no thread is started. */
  bool remote;
};

/* Where the rank's KV storage and layers live. */
static brisk_backend *kv_be(const tp_rank *r) { return r->dev_be ? r->dev_be : r->be; }

static brisk_comm *ctl_of(const tp_rank *r) { return r->ctl ? r->ctl : r->comm; }
static brisk_comm *ctl0(const brisk_tp *g) { return g->ctl[0] ? g->ctl[0] : g->comm[0]; }

static brisk_status alloc_kv(tp_rank *r, uint32_t dtype, int32_t n_blocks, int32_t block_size) {
  const brisk_hparams *hp = &r->shard->hp;
  r->kv.layout =
      (brisk_kv_layout){dtype, n_blocks, (int32_t)hp->n_head_kv, block_size, (int32_t)hp->head_dim};
  size_t bytes = (size_t)n_blocks * (size_t)hp->n_head_kv * (size_t)block_size *
                 brisk_kvq_row_bytes(dtype, (int32_t)hp->head_dim);
  r->kv.k = brisk_calloc(hp->n_layer, sizeof(void *));
  r->kv.v = brisk_calloc(hp->n_layer, sizeof(void *));
  if (!r->kv.k || !r->kv.v) return brisk_error_oom();
  /* Only the stage's layers: the others stay NULL. */
  for (int32_t l = r->g->layer_begin; l < r->g->layer_end; l++) {
    brisk_status st;
    brisk_backend *be = kv_be(r);
    if ((st = be->buffer_alloc(be, bytes, &r->kv.k[l])) ||
        (st = be->buffer_alloc(be, bytes, &r->kv.v[l])))
      return st;
  }
  return BRISK_OK;
}

static void free_rank(tp_rank *r) {
  if (r->kv.k || r->kv.v)
    for (uint32_t l = 0; l < r->shard->hp.n_layer; l++) {
      if (r->kv.k) kv_be(r)->buffer_free(kv_be(r), r->kv.k[l]);
      if (r->kv.v) kv_be(r)->buffer_free(kv_be(r), r->kv.v[l]);
    }
  brisk_free(r->kv.k);
  brisk_free(r->kv.v);
  brisk_forward_free(r->fwd);
  if (r->dev_be)
    r->dev_be->buffer_free(r->dev_be, r->logits);
  else
    brisk_free(r->logits);
  brisk_free(r->msg);
  brisk_backend_free(r->dev_be);
  brisk_backend_free(r->be);
  brisk_threadpool_free(r->pool);
  brisk_comm_free(r->comm);
  brisk_comm_free(r->ctl);
}

/* One follower step: the payload, the copies, the pass. */
static brisk_status follow_step(tp_rank *r, const tp_header *h) {
  size_t bytes = brisk_step_payload_bytes(h);
  brisk_status gst = brisk_step_grow(&r->msg, &r->msg_cap, bytes);
  if (gst) return gst;
  brisk_status st = brisk_comm_broadcast(ctl_of(r), r->msg, bytes, 0);
  /* A later pipeline stage: the stage's input activations follow. */
  if (!st && r->g->layer_begin > 0)
    st = brisk_comm_broadcast(ctl_of(r), brisk_forward_residual(r->fwd),
                              (size_t)h->n_tokens * r->shard->hp.n_embd * sizeof(float), 0);
  if (st) return st;
  if (atomic_exchange(&r->force_error, 0))
    return brisk_error(BRISK_E_INTERNAL, "rank %d: forced error (test hook)", r->rank);
  brisk_step_views v = brisk_step_views_of(r->msg, h);
  for (int32_t l = r->g->layer_begin; h->n_copies && l < r->g->layer_end; l++)
    if ((st = kv_be(r)->kv_copy_blocks(kv_be(r), &r->kv.layout, r->kv.k[l], v.copies,
                                       (int32_t)h->n_copies)) ||
        (st = kv_be(r)->kv_copy_blocks(kv_be(r), &r->kv.layout, r->kv.v[l], v.copies,
                                       (int32_t)h->n_copies)))
      return st;
  brisk_forward_batch fb = {(int32_t)h->n_tokens,
                            v.tokens,
                            v.pos,
                            v.seq_row,
                            v.slot,
                            v.tables,
                            (int32_t)h->n_seqs,
                            (int32_t)h->max_blocks,
                            (int32_t)h->n_out,
                            v.out_rows,
                            NULL,
                            0,
                            NULL,
                            NULL,
                            NULL};
  return brisk_forward_run(r->fwd, &r->kv, &fb, r->logits, NULL, NULL);
}

static void *follow(void *arg) {
  tp_rank *r = arg;
  for (;;) {
    tp_header h;
    brisk_status st = brisk_comm_broadcast(ctl_of(r), &h, sizeof h, 0);
    if (!st && h.op == TP_OP_SHUTDOWN) break;
    if (!st) st = follow_step(r, &h);
    if (st) {
      /* Every other rank's collective now fails instead of waiting; a
       * failure of this rank's own is carried to them by one more
       * collective (MPI ranks learn of it there). */
      BRISK_DEBUG("tensor-parallel rank %d stops: %s", r->rank, brisk_last_error());
      brisk_comm_abort(r->comm);
      if (r->ctl) brisk_comm_abort(r->ctl);
      if (st != BRISK_E_CANCELLED) (void)brisk_comm_barrier(ctl_of(r));
      r->status = st;
      break;
    }
  }
  return NULL;
}

brisk_status brisk_world_context_begin(uint32_t kv_dtype, int32_t n_blocks, int32_t block_size,
                                       int32_t max_tokens, int32_t grid_tp) {
  brisk_comm *w = brisk_world();
  if (brisk_comm_rank(w) != 0)
    return brisk_error(BRISK_E_INVALID_STATE,
                       "rank %d of the MPI world: rank 0 creates the contexts, this rank follows "
                       "them through brisk_worker_run",
                       brisk_comm_rank(w));
  if (world_failed) return brisk_error(BRISK_E_CANCELLED, "a rank of the MPI world failed earlier");
  world_header h = {WORLD_OP_CONTEXT, kv_dtype, n_blocks, block_size, max_tokens};
  brisk_status st = brisk_comm_broadcast(w, &h, sizeof h, 0);
  if (st) {
    world_failed = true;
    return st;
  }
  if (grid_tp > 1) {
    /* The workers make the grid's groups now too (a collective). */
    brisk_comm *group, *stages;
    if ((st = brisk_world_grid(grid_tp, &group, &stages))) brisk_comm_abort(w);
  }
  brisk_status met = brisk_comm_barrier(w);
  if (!st) st = met;
  if (st) world_failed = true;
  return st;
}

void brisk_world_fail(void) { world_failed = true; }

bool brisk_world_forced_error(void) { return ++worker_served == worker_force_at; }

/* Rank 0 of an MPI world as large as the model's TP: the workers
 * (brisk_worker_run) are told the geometry and answer in a barrier. */
static brisk_status create_remote(brisk_tp *g, brisk_comm *w, uint32_t kv_dtype, int32_t n_blocks,
                                  int32_t block_size, brisk_tp **out, brisk_comm **comm0) {
  brisk_status st = brisk_world_context_begin(kv_dtype, n_blocks, block_size, g->max_tokens, 1);
  g->remote = true;
  g->comm[0] = w;
  if (st) {
    g->failed = true; /* nothing more to send the workers */
    brisk_tp_free(g);
    return st;
  }
  *comm0 = w;
  *out = g;
  return BRISK_OK;
}

/* A stage's TP group in an MPI world that is a grid of pipeline stages of
 * TP groups (context/pp.h): the stage's group of processes. On rank 0 (the
 * context's stage 0) this is where the workers are told of the context,
 * and the grid's groups made; a later stage's leader (a worker, in
 * brisk_pp_serve) just takes its group. */
static brisk_status create_grid(brisk_tp *g, brisk_comm *w, uint32_t kv_dtype, int32_t n_blocks,
                                int32_t block_size, brisk_tp **out, brisk_comm **comm0) {
  brisk_status st = BRISK_OK;
  if (brisk_comm_rank(w) == 0)
    st = brisk_world_context_begin(kv_dtype, n_blocks, block_size, g->max_tokens, g->size);
  brisk_comm *group = NULL, *stages = NULL;
  if (!st) st = brisk_world_grid(g->size, &group, &stages);
  g->remote = true;
  g->comm[0] = group;
  if (st) {
    g->failed = true; /* nothing more to send the group */
    brisk_tp_free(g);
    return st;
  }
  *comm0 = group;
  *out = g;
  return BRISK_OK;
}

/* Ranks on CUDA devices: the step messages' threads handles and one NCCL
 * group over the shards' devices (every handle made, or none). */
static brisk_status create_device_comms(brisk_tp *g) {
  const brisk_model *m = g->model;
  const struct brisk_nccl_rt *rt = NULL;
  int devices[BRISK_TP_MAX];
  for (int q = 0; q < g->size; q++) devices[q] = m->tp_ranks[q]->device.index;
  brisk_status st;
  if ((st = brisk_device_nccl(&m->tp_ranks[0]->device, &rt))) {
    char why[256]; /* copied: brisk_error rewrites the message */
    snprintf(why, sizeof why, "%s", brisk_last_error());
    return brisk_error(st, "tensor parallelism on %d devices: %s", g->size, why);
  }
  if ((st = brisk_comm_threads_create(g->size, g->ctl))) return st;
  if ((st = brisk_comm_nccl_create_local(rt, g->size, devices, g->comm))) {
    for (int q = 0; q < g->size; q++) {
      brisk_comm_free(g->ctl[q]);
      g->ctl[q] = NULL;
    }
  }
  return st;
}

brisk_status brisk_tp_create(const brisk_model *m, int n_threads, uint32_t kv_dtype,
                             int32_t n_blocks, int32_t block_size, int32_t max_tokens,
                             int32_t layer_begin, int32_t layer_end, brisk_tp **out,
                             brisk_comm **comm0) {
  brisk_tp *g = brisk_calloc(1, sizeof *g);
  if (!g) return brisk_error_oom();
  g->model = m;
  g->size = m->tp_size;
  g->max_tokens = max_tokens;
  g->layer_begin = layer_begin;
  g->layer_end = layer_end;
  g->device = m->tp_ranks[0] && m->tp_ranks[0]->n_dev_layers > 0;
  brisk_comm *w = brisk_world();
  if (w && m->pp_size > 1 && brisk_comm_size(w) == g->size * m->pp_size) {
    if (g->device) {
      brisk_free(g);
      return brisk_error(BRISK_E_UNSUPPORTED,
                         "tensor parallelism on GPU devices runs its ranks in one process; under "
                         "an MPI job of %d processes it is not wired yet",
                         g->size * m->pp_size);
    }
    return create_grid(g, w, kv_dtype, n_blocks, block_size, out, comm0);
  }
  if (w && brisk_comm_size(w) == g->size && layer_begin == 0 &&
      layer_end == (int32_t)m->hp.n_layer) {
    if (!g->device) return create_remote(g, w, kv_dtype, n_blocks, block_size, out, comm0);
    brisk_free(g);
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "tensor parallelism on GPU devices runs its ranks in one process; under "
                       "an MPI job of %d processes it is not wired yet",
                       g->size);
  }
  brisk_status st =
      g->device ? create_device_comms(g) : brisk_comm_threads_create(g->size, g->comm);
  if (st) {
    brisk_free(g);
    return st;
  }
  brisk_device_ref host = brisk_device_cpu();
  size_t logit_floats;
  if (brisk_mul_overflow_size((size_t)max_tokens, m->hp.n_vocab, &logit_floats)) {
    st = brisk_error(BRISK_E_INVALID_ARGUMENT, "logits of %d tokens do not fit", max_tokens);
    goto fail;
  }
  for (int q = 1; q < g->size && !st; q++) {
    tp_rank *r = &g->ranks[q];
    r->g = g;
    r->rank = q;
    r->shard = m->tp_ranks[q];
    r->comm = g->comm[q];
    r->ctl = g->ctl[q];
    g->comm[q] = g->ctl[q] = NULL;
    if (!r->shard) {
      st = brisk_error(BRISK_E_INVALID_STATE,
                       "tensor-parallel rank %d: this process holds one rank's shard only (the "
                       "model was loaded in an MPI job); its ranks are the job's processes",
                       q);
      break;
    }
    if ((st = brisk_threadpool_create(n_threads, &r->pool)) ||
        (st = brisk_device_backend_create(&host, r->pool, &r->be)) ||
        (g->device && (st = brisk_device_backend_create(&r->shard->device, r->pool, &r->dev_be))) ||
        (st = alloc_kv(r, kv_dtype, n_blocks, block_size)) ||
        (st = brisk_forward_create(r->shard, r->be, r->dev_be, max_tokens, &r->fwd)))
      break;
    brisk_forward_set_comm(r->fwd, r->comm);
    brisk_forward_set_layers(r->fwd, layer_begin, layer_end);
    if (r->dev_be)
      st = r->dev_be->buffer_alloc(r->dev_be, logit_floats * sizeof(float), (void **)&r->logits);
    else if (!(r->logits = brisk_malloc(logit_floats * sizeof(float))))
      st = brisk_error_oom();
  }
  if (st) goto fail;
  for (int q = 1; q < g->size; q++) {
    if (pthread_create(&g->ranks[q].thread, NULL, follow, &g->ranks[q])) {
      st = brisk_error(BRISK_E_INTERNAL, "cannot start tensor-parallel rank %d", q);
      goto fail;
    }
    g->ranks[q].started = true;
  }
  *comm0 = g->comm[0];
  *out = g;
  return BRISK_OK;
fail:
  brisk_tp_fail(g, BRISK_E_CANCELLED);
  brisk_tp_free(g);
  return st;
}

brisk_status brisk_tp_step(brisk_tp *g, const int32_t *copies, int32_t n_copies,
                           const brisk_forward_batch *b, float *x) {
  if (g->failed)
    return brisk_error(BRISK_E_CANCELLED,
                       "a tensor-parallel rank of this context failed earlier; make a new context");
  tp_header h = {TP_OP_STEP, b->n_tokens, b->n_seqs, b->max_blocks, b->n_out, n_copies};
  size_t bytes = brisk_step_payload_bytes(&h);
  brisk_status gst = brisk_step_grow(&g->msg, &g->msg_cap, bytes);
  if (gst) return gst;
  brisk_step_views v = brisk_step_views_of(g->msg, &h);
  size_t n = (size_t)b->n_tokens;
  memcpy(v.slot, b->slot, n * sizeof(int64_t));
  memcpy(v.tokens, b->tokens, n * sizeof(int32_t));
  memcpy(v.pos, b->pos, n * sizeof(int32_t));
  memcpy(v.seq_row, b->seq_row, n * sizeof(int32_t));
  memcpy(v.out_rows, b->out_rows, (size_t)b->n_out * sizeof(int32_t));
  memcpy(v.tables, b->block_tables, (size_t)(b->n_seqs * b->max_blocks) * sizeof(int32_t));
  if (n_copies) memcpy(v.copies, copies, (size_t)n_copies * 2 * sizeof(int32_t));
  brisk_status st;
  if ((st = brisk_comm_broadcast(ctl0(g), &h, sizeof h, 0)) ||
      (st = brisk_comm_broadcast(ctl0(g), g->msg, bytes, 0)) ||
      (g->layer_begin > 0 &&
       (st = brisk_comm_broadcast(ctl0(g), x, n * g->model->hp.n_embd * sizeof(float), 0))))
    g->failed = true;
  if (!st && g->force_error0) {
    /* Rank 0 failing once the followers have the step (test hook). */
    g->force_error0 = false;
    st = brisk_error(BRISK_E_INTERNAL, "rank 0: forced error (test hook)");
    brisk_tp_fail(g, st);
  }
  return st;
}

void brisk_tp_fail(brisk_tp *g, brisk_status why) {
  if (!g || g->failed) return;
  g->failed = true;
  if (g->remote) world_failed = true;
  if (g->comm[0]) brisk_comm_abort(g->comm[0]);
  if (g->ctl[0]) brisk_comm_abort(g->ctl[0]);
  for (int q = 1; q < g->size; q++) {
    if (g->ranks[q].comm) brisk_comm_abort(g->ranks[q].comm);
    if (g->ranks[q].ctl) brisk_comm_abort(g->ranks[q].ctl);
  }
  /* A failure of rank 0's own (not one a collective reported) reaches the
   * MPI ranks in one more collective; threads ranks are woken above. */
  if (ctl0(g) && why != BRISK_E_CANCELLED) (void)brisk_comm_barrier(ctl0(g));
}

void brisk_tp_force_error(brisk_tp *g, int rank) {
  if (g && rank == 0) g->force_error0 = true;
  if (g && rank > 0 && rank < g->size && !g->remote) atomic_store(&g->ranks[rank].force_error, 1);
}

void brisk_tp_free(brisk_tp *g) {
  if (!g) return;
  if (!g->failed) {
    tp_header h = {TP_OP_SHUTDOWN, 0, 0, 0, 0, 0};
    if (brisk_comm_broadcast(ctl0(g), &h, sizeof h, 0)) brisk_tp_fail(g, BRISK_E_CANCELLED);
  }
  for (int q = 1; q < g->size; q++)
    if (g->ranks[q].started) pthread_join(g->ranks[q].thread, NULL);
  for (int q = 1; q < g->size; q++)
    if (g->ranks[q].shard) free_rank(&g->ranks[q]);
  for (int q = g->remote ? 1 : 0; q < g->size; q++) brisk_comm_free(g->comm[q]);
  for (int q = 0; q < g->size; q++) brisk_comm_free(g->ctl[q]);
  brisk_free(g->msg);
  brisk_free(g);
}

/* A worker process as TP rank rank(comm) > 0 of a group over layers
 * [layer_begin, layer_end) (all of them, or a pipeline stage's), for one
 * context of the geometry h: sets up, reports in the world's barrier,
 * follows the group's leader until it frees the context. */
static brisk_status serve_rank(const brisk_model *m, int n_threads, const world_header *h,
                               brisk_comm *comm, int32_t layer_begin, int32_t layer_end) {
  brisk_comm *w = brisk_world();
  brisk_tp g = {.model = m,
                .size = m->tp_size,
                .max_tokens = (int32_t)h->max_tokens,
                .layer_begin = layer_begin,
                .layer_end = layer_end,
                .remote = true};
  tp_rank *r = &g.ranks[brisk_comm_rank(comm)];
  r->g = &g;
  r->rank = brisk_comm_rank(comm);
  r->shard = m->tp_ranks[r->rank];
  r->comm = comm;
  brisk_device_ref host = brisk_device_cpu();
  size_t logit_floats = 0;
  brisk_status st = BRISK_OK;
  if (!r->shard || h->max_tokens < 1 || h->max_tokens > (1 << 20) ||
      brisk_mul_overflow_size((size_t)h->max_tokens, m->hp.n_vocab, &logit_floats))
    st = brisk_error(BRISK_E_INVALID_ARGUMENT,
                     "rank %d: a context of %lld tokens per pass (or no shard of this rank)",
                     r->rank, (long long)h->max_tokens);
  if (!st &&
      ((st = brisk_threadpool_create(n_threads, &r->pool)) ||
       (st = brisk_device_backend_create(&host, r->pool, &r->be)) ||
       (st = alloc_kv(r, (uint32_t)h->kv_dtype, (int32_t)h->n_blocks, (int32_t)h->block_size)) ||
       (st = brisk_forward_create(r->shard, r->be, NULL, g.max_tokens, &r->fwd))))
    (void)0;
  if (!st && !(r->logits = brisk_malloc(logit_floats * sizeof(float)))) st = brisk_error_oom();
  if (!st) {
    brisk_forward_set_comm(r->fwd, r->comm);
    brisk_forward_set_layers(r->fwd, layer_begin, layer_end);
  }
  if (!st && brisk_world_forced_error()) atomic_store(&r->force_error, 1);
  /* The setup's outcome, in the barrier rank 0 waits in. */
  if (st) brisk_comm_abort(w);
  brisk_status met = brisk_comm_barrier(w);
  if (!st && !met) {
    follow(r);
    st = r->status;
  } else if (!st) {
    st = met;
  }
  r->comm = NULL; /* the world's, not this context's */
  if (r->shard) free_rank(r);
  return st;
}

/* A worker whose setup cannot start: its failure, in the barrier rank 0
 * waits in. */
static brisk_status refuse(brisk_status st) {
  brisk_comm *w = brisk_world();
  brisk_comm_abort(w);
  (void)brisk_comm_barrier(w);
  return st;
}

brisk_status brisk_tp_serve(const brisk_model *m, int n_threads, bool *ended) {
  brisk_comm *w = brisk_world();
  *ended = false;
  world_header h;
  brisk_status st = brisk_comm_broadcast(w, &h, sizeof h, 0);
  if (st) return st;
  if (h.op == WORLD_OP_END) {
    *ended = true;
    return BRISK_OK;
  }
  if (m->pp_size > 1 && m->tp_size > 1) {
    /* A grid: pipeline stages of TP groups (process p: TP rank p % tp of
     * stage p / tp). A stage's TP rank 0 runs the stage, the others follow
     * it over the stage's group. */
    brisk_comm *group = NULL, *stages = NULL;
    if ((st = brisk_world_grid(m->tp_size, &group, &stages)))
      st = refuse(st);
    else if (brisk_comm_rank(group) == 0)
      st = brisk_pp_serve(m, n_threads, (uint32_t)h.kv_dtype, h.n_blocks, h.block_size,
                          h.max_tokens, stages);
    else {
      const int32_t s = brisk_comm_rank(w) / m->tp_size;
      st = serve_rank(m, n_threads, &h, group, brisk_model_stage_begin(m, s),
                      brisk_model_stage_begin(m, s + 1));
    }
  } else if (m->pp_size > 1) {
    /* The job's processes are pipeline stages (context/pp.h). */
    st = brisk_pp_serve(m, n_threads, (uint32_t)h.kv_dtype, h.n_blocks, h.block_size, h.max_tokens,
                        w);
  } else {
    st = serve_rank(m, n_threads, &h, w, 0, (int32_t)m->hp.n_layer);
  }
  if (st) world_failed = true;
  return st;
}

brisk_status brisk_tp_end_world(void) {
  brisk_comm *w = brisk_world();
  if (!w || world_failed || brisk_comm_rank(w) != 0 || brisk_comm_size(w) < 2) return BRISK_OK;
  world_header h = {WORLD_OP_END, 0, 0, 0, 0};
  return brisk_comm_broadcast(w, &h, sizeof h, 0);
}

void brisk_tp_worker_force_error(int nth) {
  worker_force_at = nth;
  worker_served = 0;
}
