/* Pipeline-parallel stages as threads (context/pp.h). */
#include "context/pp.h"
#include "context/step_msg.h"

#include "backend/device.h"
#include "core/alloc.h"
#include "core/checked.h"
#include "core/clock.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/log.h"
#include "core/threadpool.h"
#include "model/model.h"
#include "model/shard.h"
#include "parallel/world.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

enum { PP_OP_STEP = 1, PP_OP_SHUTDOWN = 2 };

/* The step header every stage receives first; the payload's size follows
 * from it. */
typedef brisk_step_header pp_header;

typedef struct pp_stage {
  brisk_pp *g;
  int stage;
  int32_t begin, end; /* its layers */
  brisk_comm *comm;   /* its handle on the pipeline's communicator */
  brisk_threadpool *pool;
  brisk_backend *be;
  brisk_forward *fwd;
  brisk_forward_kv kv;
  brisk_tp *tp; /* its TP followers (NULL without TP) */
  brisk_comm *tp_comm0;
  float *logits;     /* last stage: [max_tokens][n_vocab], all micro-batches' */
  int32_t *out_rows; /* [max_tokens] a micro-batch's, from its first token */
  unsigned char *msg;
  size_t msg_cap;
  pthread_t thread;
  bool started;
  atomic_int force_error;
  atomic_uint_fast64_t busy_ns; /* time in its passes */
  brisk_status status;          /* how a follower ended */
} pp_stage;

struct brisk_pp {
  const brisk_model *model;
  int size;
  int32_t max_tokens;
  pp_stage stages[BRISK_PP_MAX]; /* [0] holds only stage 0's scratch */
  brisk_comm *comm0;             /* stage 0's handle */
  bool failed;
  /* The stages are the processes of the MPI world (parallel/world.h):
   * comm0 is the world's handle, borrowed, and no thread is started. */
  bool remote;
  bool force_error0; /* test hook: stage 0 fails its next step mid-way */
  uint64_t n_steps, n_micro, wall_ns;
  double ideal_sum;
};

/* A step's first failure, its message kept while the stage goes on with
 * the step's remaining sends and receives in failed mode: over MPI a peer
 * waiting in one is not woken otherwise, and each exchange then tells it
 * (it returns BRISK_E_CANCELLED and goes on the same way), so every stage
 * finishes the step with a status; over threads the abort has woken them
 * and the exchanges return at once. */
typedef struct step_fail {
  brisk_status st;
  bool in_pass; /* it came from the stage's pass (its TP group saw it) */
  char why[512];
} step_fail;

static void note(step_fail *f, brisk_comm *c, brisk_status e) {
  if (!e || f->st) return;
  f->st = e;
  snprintf(f->why, sizeof f->why, "%s", brisk_last_error());
  brisk_comm_abort(c);
}

static brisk_status outcome(const step_fail *f) {
  return f->st ? brisk_error(f->st, "%s", f->why) : BRISK_OK;
}

/* The stage's own pass (TP group and forward): a failure there is one its
 * TP group took part in when the group reported it (BRISK_E_CANCELLED). */
static void note_pass(step_fail *f, brisk_comm *c, brisk_status e) {
  if (e && !f->st) f->in_pass = e == BRISK_E_CANCELLED;
  note(f, c, e);
}

/* How the stage's TP group learns of a failed step (brisk_tp_fail): one
 * its collectives reported needs nothing more; any other (the stage's own,
 * or another stage's, which the group has not seen) reaches the group's
 * processes in one more collective. */
static brisk_status tp_why(const step_fail *f) {
  return f->in_pass ? BRISK_E_CANCELLED : BRISK_E_INTERNAL;
}

int32_t brisk_pp_micro_batches(int32_t n_tokens, int32_t stages) {
  /* Four per stage keep the ideal bubble (S - 1) / (M + S - 1) under 1/5
   * while each micro-batch stays a matrix product of several rows. */
  int32_t m = 4 * stages;
  return n_tokens < m ? n_tokens : m;
}

/* Micro-batch j of m of batch b: tokens [t0, t1) of it, and its out rows
 * rebased to t0 in out_rows; *o0 is the index of its first out row in b's. */
static brisk_forward_batch micro(const brisk_forward_batch *b, int32_t j, int32_t m,
                                 int32_t *out_rows, int32_t *o0) {
  int32_t t0 = (int32_t)((int64_t)j * b->n_tokens / m),
          t1 = (int32_t)((int64_t)(j + 1) * b->n_tokens / m);
  int32_t k = 0;
  while (k < b->n_out && b->out_rows[k] < t0) k++;
  *o0 = k;
  int32_t n_out = 0;
  for (; k < b->n_out && b->out_rows[k] < t1; k++) out_rows[n_out++] = b->out_rows[k] - t0;
  return (brisk_forward_batch){t1 - t0,
                               b->tokens + t0,
                               b->pos + t0,
                               b->seq_row + t0,
                               b->slot + t0,
                               b->block_tables,
                               b->n_seqs,
                               b->max_blocks,
                               n_out,
                               out_rows,
                               b->rope_pos ? b->rope_pos + t0 : NULL,
                               0,
                               NULL,
                               NULL,
                               NULL};
}

static brisk_status alloc_kv(pp_stage *s, uint32_t dtype, int32_t n_blocks, int32_t block_size) {
  const brisk_model *shard = s->g->model->tp_size > 1 ? s->g->model->tp_ranks[0] : s->g->model;
  const brisk_hparams *hp = &shard->hp;
  s->kv.layout =
      (brisk_kv_layout){dtype, n_blocks, (int32_t)hp->n_head_kv, block_size, (int32_t)hp->head_dim};
  size_t bytes = (size_t)n_blocks * (size_t)hp->n_head_kv * (size_t)block_size *
                 brisk_kvq_row_bytes(dtype, (int32_t)hp->head_dim);
  s->kv.k = brisk_calloc(hp->n_layer, sizeof(void *));
  s->kv.v = brisk_calloc(hp->n_layer, sizeof(void *));
  if (!s->kv.k || !s->kv.v) return brisk_error_oom();
  for (int32_t l = s->begin; l < s->end; l++) {
    brisk_status st;
    if ((st = s->be->buffer_alloc(s->be, bytes, &s->kv.k[l])) ||
        (st = s->be->buffer_alloc(s->be, bytes, &s->kv.v[l])))
      return st;
  }
  return BRISK_OK;
}

static void free_stage(pp_stage *s) {
  brisk_tp_free(s->tp);
  for (int32_t l = s->begin; l < s->end; l++) {
    if (s->kv.k) s->be->buffer_free(s->be, s->kv.k[l]);
    if (s->kv.v) s->be->buffer_free(s->be, s->kv.v[l]);
  }
  brisk_free(s->kv.k);
  brisk_free(s->kv.v);
  brisk_forward_free(s->fwd);
  brisk_free(s->logits);
  brisk_free(s->out_rows);
  brisk_free(s->msg);
  brisk_backend_free(s->be);
  brisk_threadpool_free(s->pool);
  brisk_comm_free(s->comm);
}

/* One micro-batch through a stage's TP group (when it has one) and pass. */
static brisk_status stage_pass(pp_stage *s, brisk_tp *tp, brisk_forward *fwd,
                               const brisk_forward_kv *kv, const int32_t *copies, int32_t n_copies,
                               const brisk_forward_batch *mb, float *logits) {
  uint64_t t = brisk_now_ns();
  brisk_status st = BRISK_OK;
  if (tp)
    st = brisk_tp_step(tp, copies, n_copies, mb, s->begin > 0 ? brisk_forward_residual(fwd) : NULL);
  if (!st) st = brisk_forward_run(fwd, kv, mb, logits, NULL, NULL);
  atomic_fetch_add(&s->busy_ns, brisk_now_ns() - t);
  return st;
}

/* A later stage's step: the payload, its block copies, then each
 * micro-batch from the previous stage to the next (or into the logits). */
static brisk_status follow_step(pp_stage *s, const pp_header *h) {
  step_fail f = {0};
  const size_t bytes = brisk_step_payload_bytes(h);
  note(&f, s->comm, brisk_step_grow(&s->msg, &s->msg_cap, bytes));
  /* A stage that failed still enters the broadcast, which then fails on
   * every stage (its flag travels with it): no exchange follows. */
  brisk_status st = brisk_comm_broadcast(s->comm, s->msg, f.st ? 0 : bytes, 0);
  if (f.st || st) return f.st ? outcome(&f) : st;
  if (atomic_exchange(&s->force_error, 0))
    note(&f, s->comm,
         brisk_error(BRISK_E_INTERNAL, "pipeline stage %d: forced error (test hook)", s->stage));
  brisk_step_views v = brisk_step_views_of(s->msg, h);
  for (int32_t l = s->begin; !f.st && h->n_copies && l < s->end; l++)
    if ((st = s->be->kv_copy_blocks(s->be, &s->kv.layout, s->kv.k[l], v.copies,
                                    (int32_t)h->n_copies)) ||
        (st = s->be->kv_copy_blocks(s->be, &s->kv.layout, s->kv.v[l], v.copies,
                                    (int32_t)h->n_copies)))
      note(&f, s->comm, st);
  brisk_forward_batch b = {(int32_t)h->n_tokens,
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
  const brisk_model *m = s->g->model;
  const bool last = s->stage == s->g->size - 1;
  const size_t nv = m->hp.n_vocab, row = m->hp.n_embd * sizeof(float);
  float *x = brisk_forward_residual(s->fwd);
  int32_t n_micro = brisk_pp_micro_batches(b.n_tokens, s->g->size);
  for (int32_t j = 0; j < n_micro; j++) {
    int32_t o0;
    brisk_forward_batch mb = micro(&b, j, n_micro, s->out_rows, &o0);
    note(&f, s->comm, brisk_comm_recv(s->comm, x, (size_t)mb.n_tokens * row, s->stage - 1));
    if (!f.st)
      note_pass(&f, s->comm,
                stage_pass(s, s->tp, s->fwd, &s->kv, j ? NULL : v.copies,
                           j ? 0 : (int32_t)h->n_copies, &mb, last ? s->logits + o0 * nv : NULL));
    if (!last)
      note(&f, s->comm, brisk_comm_send(s->comm, x, (size_t)mb.n_tokens * row, s->stage + 1));
  }
  if (last)
    note(&f, s->comm, brisk_comm_send(s->comm, s->logits, (size_t)b.n_out * nv * sizeof(float), 0));
  /* The stage's TP group learns of the failure here; follow() then stops. */
  if (f.st) brisk_tp_fail(s->tp, tp_why(&f));
  return outcome(&f);
}

static void *follow(void *arg) {
  pp_stage *s = arg;
  for (;;) {
    pp_header h;
    brisk_status st = brisk_comm_broadcast(s->comm, &h, sizeof h, 0);
    if (!st && h.op == PP_OP_SHUTDOWN) break;
    if (!st) st = follow_step(s, &h);
    if (st) {
      /* Every other stage's send, recv or broadcast now fails instead of
       * waiting. */
      BRISK_DEBUG("pipeline stage %d stops: %s", s->stage, brisk_last_error());
      brisk_comm_abort(s->comm);
      /* A failure the stage's TP group has not seen (a broadcast of the
       * pipeline's; follow_step told the group of the others). */
      brisk_tp_fail(s->tp, BRISK_E_INTERNAL);
      s->status = st;
      break;
    }
  }
  return NULL;
}

static brisk_status create_stage(brisk_pp *g, pp_stage *s, int n_threads, uint32_t kv_dtype,
                                 int32_t n_blocks, int32_t block_size, size_t logit_floats) {
  const brisk_model *m = g->model;
  const brisk_model *shard = m->tp_size > 1 ? m->tp_ranks[0] : m;
  brisk_device_ref host = brisk_device_cpu();
  brisk_status st;
  if ((st = brisk_threadpool_create(n_threads, &s->pool)) ||
      (st = brisk_device_backend_create(&host, s->pool, &s->be)) ||
      (st = alloc_kv(s, kv_dtype, n_blocks, block_size)) ||
      (st = brisk_forward_create(shard, s->be, NULL, g->max_tokens, &s->fwd)) ||
      (m->tp_size > 1 &&
       (st = brisk_tp_create(m, n_threads, kv_dtype, n_blocks, block_size, g->max_tokens, s->begin,
                             s->end, &s->tp, &s->tp_comm0))))
    return st;
  brisk_forward_set_layers(s->fwd, s->begin, s->end);
  if (s->tp) brisk_forward_set_comm(s->fwd, s->tp_comm0);
  if (!(s->out_rows = brisk_malloc((size_t)g->max_tokens * sizeof(int32_t))) ||
      (s->stage == g->size - 1 && !(s->logits = brisk_malloc(logit_floats * sizeof(float)))))
    return brisk_error_oom();
  return BRISK_OK;
}

brisk_status brisk_pp_create(const brisk_model *m, int n_threads, uint32_t kv_dtype,
                             int32_t n_blocks, int32_t block_size, int32_t max_tokens,
                             brisk_pp **out) {
  brisk_pp *g = brisk_calloc(1, sizeof *g);
  if (!g) return brisk_error_oom();
  g->model = m;
  g->size = m->pp_size;
  g->max_tokens = max_tokens;
  for (int s = 0; s < g->size; s++) {
    g->stages[s].g = g;
    g->stages[s].stage = s;
    g->stages[s].begin = brisk_model_stage_begin(m, s);
    g->stages[s].end = brisk_model_stage_begin(m, s + 1);
  }
  /* An MPI world of pp_size processes: the stages are its processes
   * (brisk_worker_run on ranks 1..), told of the context and waited for. */
  brisk_comm *w = brisk_world();
  const int tp = m->tp_size > 1 ? m->tp_size : 1;
  if (w && brisk_comm_size(w) == g->size * tp) {
    brisk_status st = BRISK_OK;
    g->remote = true;
    g->comm0 = w;
    if (tp > 1) {
      /* A grid: the stage leaders' group, made (and the workers told of
       * the context) by stage 0's TP group, context/tp.c. */
      brisk_comm *group = NULL;
      st = brisk_world_grid(tp, &group, &g->comm0);
    } else {
      st = brisk_world_context_begin(kv_dtype, n_blocks, block_size, max_tokens, 1);
    }
    g->failed = st != BRISK_OK; /* then nothing more to send the stages */
    if (!st && !(g->stages[0].out_rows = brisk_malloc((size_t)max_tokens * sizeof(int32_t))))
      st = brisk_error_oom(); /* the stages are told to stop (brisk_pp_free) */
    if (st) {
      brisk_pp_free(g);
      return st;
    }
    *out = g;
    return BRISK_OK;
  }
  brisk_comm *comm[BRISK_PP_MAX] = {0};
  brisk_status st = brisk_comm_threads_create(g->size, comm);
  if (st) {
    brisk_free(g);
    return st;
  }
  g->comm0 = comm[0];
  for (int s = 1; s < g->size; s++) g->stages[s].comm = comm[s];
  size_t logit_floats;
  if (brisk_mul_overflow_size((size_t)max_tokens, m->hp.n_vocab, &logit_floats)) {
    st = brisk_error(BRISK_E_INVALID_ARGUMENT, "logits of %d tokens do not fit", max_tokens);
    goto fail;
  }
  if (!(g->stages[0].out_rows = brisk_malloc((size_t)max_tokens * sizeof(int32_t)))) {
    st = brisk_error_oom();
    goto fail;
  }
  for (int s = 1; s < g->size && !st; s++)
    st = create_stage(g, &g->stages[s], n_threads, kv_dtype, n_blocks, block_size, logit_floats);
  if (st) goto fail;
  for (int s = 1; s < g->size; s++) {
    if (pthread_create(&g->stages[s].thread, NULL, follow, &g->stages[s])) {
      st = brisk_error(BRISK_E_INTERNAL, "cannot start pipeline stage %d", s);
      goto fail;
    }
    g->stages[s].started = true;
  }
  *out = g;
  return BRISK_OK;
fail:
  g->failed = true;
  brisk_comm_abort(g->comm0);
  brisk_pp_free(g);
  return st;
}

static void pp_fail(brisk_pp *g) {
  if (g->failed) return;
  g->failed = true;
  if (g->remote) brisk_world_fail();
  brisk_comm_abort(g->comm0);
}

brisk_status brisk_pp_run(brisk_pp *g, brisk_forward *fwd0, brisk_tp *tp0,
                          const brisk_forward_kv *kv0, const int32_t *copies, int32_t n_copies,
                          const brisk_forward_batch *b, float *logits) {
  if (g->failed)
    return brisk_error(BRISK_E_CANCELLED,
                       "a pipeline stage of this context failed earlier; make a new context");
  uint64_t t_start = brisk_now_ns();
  pp_stage *s0 = &g->stages[0];
  pp_header h = {PP_OP_STEP, b->n_tokens, b->n_seqs, b->max_blocks, b->n_out, n_copies};
  size_t bytes = brisk_step_payload_bytes(&h);
  brisk_status st = brisk_step_grow(&s0->msg, &s0->msg_cap, bytes);
  if (st) return st; /* nothing sent yet: the group is still good */
  brisk_step_views v = brisk_step_views_of(s0->msg, &h);
  size_t n = (size_t)b->n_tokens;
  memcpy(v.slot, b->slot, n * sizeof(int64_t));
  memcpy(v.tokens, b->tokens, n * sizeof(int32_t));
  memcpy(v.pos, b->pos, n * sizeof(int32_t));
  memcpy(v.seq_row, b->seq_row, n * sizeof(int32_t));
  memcpy(v.out_rows, b->out_rows, (size_t)b->n_out * sizeof(int32_t));
  memcpy(v.tables, b->block_tables, (size_t)(b->n_seqs * b->max_blocks) * sizeof(int32_t));
  if (n_copies) memcpy(v.copies, copies, (size_t)n_copies * 2 * sizeof(int32_t));
  const size_t row = g->model->hp.n_embd * sizeof(float);
  float *x = brisk_forward_residual(fwd0);
  int32_t n_micro = brisk_pp_micro_batches(b->n_tokens, g->size);
  if ((st = brisk_comm_broadcast(g->comm0, &h, sizeof h, 0)) ||
      (st = brisk_comm_broadcast(g->comm0, s0->msg, bytes, 0)))
    goto fail;
  /* After a failure, the step's remaining exchanges in failed mode (see
   * step_fail): every stage finishes the step with a status. */
  step_fail f = {0};
  for (int32_t j = 0; j < n_micro; j++) {
    int32_t o0;
    brisk_forward_batch mb = micro(b, j, n_micro, s0->out_rows, &o0);
    if (!f.st)
      note_pass(&f, g->comm0,
                stage_pass(s0, tp0, fwd0, kv0, j ? NULL : copies, j ? 0 : n_copies, &mb, NULL));
    if (!f.st && g->force_error0) {
      /* Rank 0 failing with micro-batches in flight (test hook). */
      g->force_error0 = false;
      note(&f, g->comm0, brisk_error(BRISK_E_INTERNAL, "stage 0: forced error (test hook)"));
    }
    note(&f, g->comm0, brisk_comm_send(g->comm0, x, (size_t)mb.n_tokens * row, 1));
  }
  note(&f, g->comm0,
       brisk_comm_recv(g->comm0, logits, (size_t)b->n_out * g->model->hp.n_vocab * sizeof(float),
                       g->size - 1));
  if (f.st) {
    brisk_tp_fail(tp0, tp_why(&f));
    st = outcome(&f);
    goto fail;
  }
  g->n_steps++;
  g->n_micro += (uint64_t)n_micro;
  g->wall_ns += brisk_now_ns() - t_start;
  g->ideal_sum += (double)(g->size - 1) / (double)(n_micro + g->size - 1);
  return BRISK_OK;
fail:
  pp_fail(g);
  brisk_tp_fail(tp0, BRISK_E_INTERNAL); /* a no-op once told (above) */
  return st;
}

void brisk_pp_stats(const brisk_pp *g, uint64_t *n_micro, double *bubble, double *ideal) {
  *n_micro = g->n_micro;
  *bubble = *ideal = 0;
  if (!g->n_steps || !g->wall_ns) return;
  double busy = 0;
  for (int s = 0; s < g->size; s++) busy += (double)atomic_load(&g->stages[s].busy_ns);
  /* Stages in other processes: stage 0's own idle share. */
  const double stages = g->remote ? 1.0 : (double)g->size;
  double b = 1.0 - busy / (stages * (double)g->wall_ns);
  *bubble = b < 0 ? 0 : b;
  *ideal = g->ideal_sum / (double)g->n_steps;
}

void brisk_pp_force_error(brisk_pp *g, int stage) {
  if (g && stage == 0) g->force_error0 = true;
  if (g && stage > 0 && stage < g->size && !g->remote)
    atomic_store(&g->stages[stage].force_error, 1);
}

void brisk_pp_free(brisk_pp *g) {
  if (!g) return;
  if (!g->failed) {
    pp_header h = {PP_OP_SHUTDOWN, 0, 0, 0, 0, 0};
    if (brisk_comm_broadcast(g->comm0, &h, sizeof h, 0)) pp_fail(g);
  }
  for (int s = 1; s < g->size; s++)
    if (g->stages[s].started) pthread_join(g->stages[s].thread, NULL);
  for (int s = 1; s < g->size; s++) {
    pp_stage *st = &g->stages[s];
    if (st->fwd || st->pool || st->be || st->kv.k || st->comm) {
      if (st->tp && g->failed) brisk_tp_fail(st->tp, BRISK_E_CANCELLED);
      free_stage(st);
    }
  }
  brisk_free(g->stages[0].out_rows);
  brisk_free(g->stages[0].msg);
  if (!g->remote) brisk_comm_free(g->comm0);
  brisk_free(g);
}

brisk_status brisk_pp_serve(const brisk_model *m, int n_threads, uint32_t kv_dtype,
                            int64_t n_blocks, int64_t block_size, int64_t max_tokens,
                            brisk_comm *stages) {
  brisk_comm *w = brisk_world();
  brisk_pp g = {.model = m, .size = m->pp_size, .max_tokens = (int32_t)max_tokens, .remote = true};
  const int rank = brisk_comm_rank(stages);
  pp_stage *s = &g.stages[rank];
  s->g = &g;
  s->stage = rank;
  s->begin = brisk_model_stage_begin(m, rank);
  s->end = brisk_model_stage_begin(m, rank + 1);
  s->comm = stages;
  brisk_status st = BRISK_OK;
  size_t logit_floats = 0;
  if (brisk_comm_size(stages) != m->pp_size)
    st = brisk_error(BRISK_E_UNSUPPORTED,
                     "stage %d: pipeline stages over an MPI job need pp_size = the number of "
                     "stages the job has (%d)",
                     rank, brisk_comm_size(stages));
  else if (max_tokens < 1 || max_tokens > (1 << 20) || n_blocks < 1 || n_blocks > INT32_MAX ||
           block_size < 1 || block_size > 4096 ||
           brisk_mul_overflow_size((size_t)max_tokens, m->hp.n_vocab, &logit_floats))
    st = brisk_error(BRISK_E_INVALID_ARGUMENT,
                     "stage %d: a context of %lld tokens per pass, %lld blocks of %lld", rank,
                     (long long)max_tokens, (long long)n_blocks, (long long)block_size);
  if (!st)
    st = create_stage(&g, s, n_threads, kv_dtype, (int32_t)n_blocks, (int32_t)block_size,
                      logit_floats);
  if (!st && brisk_world_forced_error()) atomic_store(&s->force_error, 1);
  /* The setup's outcome, in the barrier rank 0 waits in. */
  if (st) brisk_comm_abort(w);
  brisk_status met = brisk_comm_barrier(w);
  if (!st && !met) {
    follow(s);
    st = s->status;
  } else if (!st) {
    st = met;
  }
  s->comm = NULL; /* the world's, not this context's */
  free_stage(s);
  return st;
}
