/* Ranks as threads of one process (brisk_comm_threads_create): the group
 * shares a mutex, a condition variable and a generation-counting barrier.
 * A collective posts each rank's arguments, meets at the barrier, works on
 * the posted buffers, and meets again before anyone returns, so the next
 * collective cannot overwrite what a slower rank still reads. An aborted
 * group wakes every waiter with BRISK_E_CANCELLED. */
#include "parallel/comm.h"

#include "core/alloc.h"
#include "core/error.h"

#include <pthread.h>
#include <stdbool.h>
#include <string.h>

enum { OP_REDUCE = 1, OP_GATHER, OP_BCAST, OP_BARRIER };

typedef struct post {
  int op;
  const void *send;
  void *buf;
  int64_t n;    /* floats (reduce) */
  size_t bytes; /* gather, broadcast */
  int root;
  bool oom; /* this rank could not grow the reduce scratch */
} post;

typedef struct mailbox {
  const void *data;
  size_t bytes;
  bool full, taken, mismatch;
} mailbox;

typedef struct group {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int size, alive;
  bool failed;
  int arrived;
  uint64_t generation;
  post *posts;    /* [size] */
  mailbox *mail;  /* [size * size]: [from][to] */
  float *scratch; /* reduce results [scratch_cap] */
  size_t scratch_cap;
  brisk_comm *ranks; /* [size] the handles */
} group;

static group *group_of(brisk_comm *c) { return c->impl; }

static brisk_status cancelled(void) {
  return brisk_error(BRISK_E_CANCELLED, "collective: a rank of the group failed");
}

/* Caller holds mu. */
static brisk_status barrier_locked(group *g) {
  if (g->failed) return cancelled();
  uint64_t gen = g->generation;
  if (++g->arrived == g->size) {
    g->arrived = 0;
    g->generation++;
    pthread_cond_broadcast(&g->cv);
    return BRISK_OK;
  }
  while (gen == g->generation && !g->failed) pthread_cond_wait(&g->cv, &g->mu);
  return gen == g->generation ? cancelled() : BRISK_OK;
}

static brisk_status barrier(group *g) {
  pthread_mutex_lock(&g->mu);
  brisk_status st = barrier_locked(g);
  pthread_mutex_unlock(&g->mu);
  return st;
}

/* Posts this rank's arguments and waits for all; then checks that every
 * rank called the same collective with the same sizes. */
static brisk_status post_and_meet(brisk_comm *c, post p, size_t scratch_floats) {
  group *g = group_of(c);
  pthread_mutex_lock(&g->mu);
  g->posts[c->rank] = p;
  if (scratch_floats > g->scratch_cap) {
    float *s = brisk_realloc(g->scratch, scratch_floats * sizeof(float));
    if (s) {
      g->scratch = s;
      g->scratch_cap = scratch_floats;
    } else {
      g->posts[c->rank].oom = true;
    }
  }
  brisk_status st = barrier_locked(g);
  pthread_mutex_unlock(&g->mu);
  if (st) return st;
  /* Every rank reads the same posts, so all reach the same verdict. */
  for (int r = 0; r < g->size; r++)
    if (g->posts[r].oom) return brisk_error_oom();
  for (int r = 0; r < g->size; r++) {
    const post *q = &g->posts[r];
    if (q->op != p.op || q->n != p.n || q->bytes != p.bytes || q->root != p.root)
      return brisk_error(BRISK_E_INVALID_ARGUMENT,
                         "collective: rank %d called another collective or sizes than rank %d", r,
                         c->rank);
  }
  return BRISK_OK;
}

/* The closing meeting; on any earlier error too, so that no rank leaves
 * while another still reads its buffers. */
static brisk_status finish(brisk_comm *c, brisk_status st) {
  brisk_status end = barrier(group_of(c));
  return st ? st : end;
}

static brisk_status t_all_reduce(brisk_comm *c, float *buf, int64_t n) {
  group *g = group_of(c);
  post p = {OP_REDUCE, NULL, buf, n, 0, 0, false};
  brisk_status st = post_and_meet(c, p, (size_t)n);
  if (st == BRISK_E_CANCELLED) return st;
  if (!st && n > 0) {
    /* Rank r sums its slice of the elements over all ranks' buffers. */
    int64_t per = (n + g->size - 1) / g->size;
    int64_t lo = per * c->rank, hi = lo + per < n ? lo + per : n;
    float vals[256];
    for (int64_t i = lo; i < hi; i++) {
      for (int r = 0; r < g->size; r++) vals[r] = ((const float *)g->posts[r].buf)[i];
      g->scratch[i] = brisk_comm_tree_sum(vals, g->size);
    }
    if ((st = barrier(g))) return st;
    memcpy(buf, g->scratch, (size_t)n * sizeof(float));
  }
  return finish(c, st);
}

static brisk_status t_all_gather(brisk_comm *c, const void *send, size_t bytes, void *recv) {
  group *g = group_of(c);
  post p = {OP_GATHER, send, recv, 0, bytes, 0, false};
  brisk_status st = post_and_meet(c, p, 0);
  if (st == BRISK_E_CANCELLED) return st;
  for (int r = 0; r < g->size && !st && bytes; r++)
    memcpy((char *)recv + (size_t)r * bytes, g->posts[r].send, bytes);
  return finish(c, st);
}

static brisk_status t_broadcast(brisk_comm *c, void *buf, size_t bytes, int root) {
  group *g = group_of(c);
  post p = {OP_BCAST, NULL, buf, 0, bytes, root, false};
  brisk_status st = post_and_meet(c, p, 0);
  if (st == BRISK_E_CANCELLED) return st;
  if (!st && c->rank != root && bytes) memcpy(buf, g->posts[root].buf, bytes);
  return finish(c, st);
}

static brisk_status t_barrier(brisk_comm *c) {
  post p = {OP_BARRIER, NULL, NULL, 0, 0, 0, false};
  brisk_status st = post_and_meet(c, p, 0);
  if (st == BRISK_E_CANCELLED) return st;
  return finish(c, st);
}

static brisk_status t_send(brisk_comm *c, const void *buf, size_t bytes, int peer) {
  group *g = group_of(c);
  mailbox *m = &g->mail[c->rank * g->size + peer];
  brisk_status st = BRISK_OK;
  pthread_mutex_lock(&g->mu);
  while (m->full && !g->failed) pthread_cond_wait(&g->cv, &g->mu);
  if (g->failed) {
    st = cancelled();
  } else {
    *m = (mailbox){buf, bytes, true, false, false};
    pthread_cond_broadcast(&g->cv);
    while (!m->taken && !g->failed) pthread_cond_wait(&g->cv, &g->mu);
    if (!m->taken)
      st = cancelled();
    else if (m->mismatch)
      st = brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "send: rank %d sent %zu bytes, and rank %d expected another size", c->rank,
                       bytes, peer);
    *m = (mailbox){0};
    pthread_cond_broadcast(&g->cv);
  }
  pthread_mutex_unlock(&g->mu);
  return st;
}

static brisk_status t_recv(brisk_comm *c, void *buf, size_t bytes, int peer) {
  group *g = group_of(c);
  mailbox *m = &g->mail[peer * g->size + c->rank];
  brisk_status st = BRISK_OK;
  pthread_mutex_lock(&g->mu);
  while (!(m->full && !m->taken) && !g->failed) pthread_cond_wait(&g->cv, &g->mu);
  if (g->failed) {
    st = cancelled();
  } else {
    if (m->bytes != bytes) {
      m->mismatch = true;
      st = brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "recv: rank %d expected %zu bytes from rank %d, which sent %zu", c->rank,
                       bytes, peer, m->bytes);
    } else if (bytes) {
      memcpy(buf, m->data, bytes);
    }
    m->taken = true;
    pthread_cond_broadcast(&g->cv);
  }
  pthread_mutex_unlock(&g->mu);
  return st;
}

static void t_abort(brisk_comm *c) {
  group *g = group_of(c);
  pthread_mutex_lock(&g->mu);
  g->failed = true;
  pthread_cond_broadcast(&g->cv);
  pthread_mutex_unlock(&g->mu);
}

static void group_free(group *g) {
  pthread_mutex_destroy(&g->mu);
  pthread_cond_destroy(&g->cv);
  brisk_free(g->posts);
  brisk_free(g->mail);
  brisk_free(g->scratch);
  brisk_free(g->ranks);
  brisk_free(g);
}

static void t_destroy(brisk_comm *c) {
  group *g = group_of(c);
  pthread_mutex_lock(&g->mu);
  bool last = --g->alive == 0;
  pthread_mutex_unlock(&g->mu);
  if (last) group_free(g);
}

static const brisk_comm_ops threads_ops = {
    "threads", t_all_reduce, t_all_gather, t_broadcast, t_send,
    t_recv,    t_barrier,    t_abort,      t_destroy,
};

brisk_status brisk_comm_threads_create(int size, brisk_comm **ranks) {
  if (size < 1 || size > 256 || !ranks)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "threads communicator: size %d is outside [1, 256]", size);
  group *g = brisk_calloc(1, sizeof *g);
  if (!g) return brisk_error_oom();
  g->posts = brisk_calloc((size_t)size, sizeof *g->posts);
  g->mail = brisk_calloc((size_t)size * (size_t)size, sizeof *g->mail);
  g->ranks = brisk_calloc((size_t)size, sizeof *g->ranks);
  if (!g->posts || !g->mail || !g->ranks) {
    brisk_free(g->posts);
    brisk_free(g->mail);
    brisk_free(g->ranks);
    brisk_free(g);
    return brisk_error_oom();
  }
  pthread_mutex_init(&g->mu, NULL);
  pthread_cond_init(&g->cv, NULL);
  g->size = g->alive = size;
  for (int r = 0; r < size; r++) {
    g->ranks[r] = (brisk_comm){&threads_ops, r, size, g};
    ranks[r] = &g->ranks[r];
  }
  return BRISK_OK;
}
