/* Decode steps as CUDA graphs (backend.h's step_begin / step_end).
 *
 * A step of at most max_batch tokens (BRISK_CUDA_GRAPHS, default 64; 0 turns
 * graphs off) is captured from the backend's stream: its operations run
 * their host side as always (checks, metadata), but their copies and
 * kernels are recorded, not run. At step_end the capture becomes the graph
 * of its bucket, the step's batch size: when the bucket already has an
 * executable graph, it is updated in place from the new capture (cheap:
 * only parameters changed, the usual case from one decode step to the
 * next), and instantiated anew when the topology changed (another kernel,
 * another path; counted as a re-capture); then the graph is launched. Up to
 * 16 buckets are kept, the least recently used one makes room.
 *
 * What a graph needs that eager launches do not:
 *  - host metadata (positions, block tables, slots, token ids, uploads) is
 *    copied by the host into page-locked staging, and the graph's copy
 *    nodes read it from there when the graph runs; each step writes its own
 *    offsets of the staging, which is reused once the previous step has run
 *    (step_begin waits for it);
 *  - scratch that grows while capturing keeps its old buffer alive until
 *    the step has run (earlier nodes point into it), and a buffer freed
 *    while capturing is freed then too: nothing waits on a capturing
 *    stream.
 * Nothing may be read back inside a step (a download is refused with a
 * message); the forward pass brackets only steps that stay on the device. */
#include "backend/cuda/cuda_priv.h"

#include "core/alloc.h"
#include "core/error.h"
#include "core/log.h"

#include <stdlib.h>
#include <string.h>

#define MAX_EXECS 16
#define MAX_CHUNKS 64
#define CHUNK_BYTES ((size_t)256 << 10)
#define DEFAULT_MAX_BATCH 64

typedef struct exec_slot {
  int32_t n_tokens;
  void *exec;
  uint64_t used;
} exec_slot;

typedef struct pinned_chunk {
  unsigned char *p;
  size_t cap, used;
} pinned_chunk;

struct cuda_graphs {
  bool capturing;
  int32_t n_tokens;  /* the bucket being captured */
  int32_t max_batch; /* steps of up to this many tokens are graphed; 0: none */
  exec_slot execs[MAX_EXECS];
  uint64_t clock;
  pinned_chunk chunks[MAX_CHUNKS];
  int n_chunks;
  void **deferred; /* device buffers to free once the step has run */
  size_t n_deferred, cap_deferred;
  brisk_cuda_graph_stats stats;
};

static cuda_graphs *graphs_of(cuda_backend *cb) {
  if (cb->graphs) return cb->graphs;
  cuda_graphs *g = brisk_calloc(1, sizeof *g);
  if (!g) return NULL;
  g->max_batch = DEFAULT_MAX_BATCH;
  const char *env = getenv("BRISK_CUDA_GRAPHS");
  if (env && *env) {
    char *end;
    long v = strtol(env, &end, 10);
    if (*end || v < 0 || v > INT32_MAX)
      BRISK_WARN("%s: BRISK_CUDA_GRAPHS=%s is not a batch size; using %d", cb->name, env,
                 DEFAULT_MAX_BATCH);
    else
      g->max_batch = (int32_t)v;
  }
  cb->graphs = g;
  return g;
}

bool brisk_cuda_graph_capturing(const cuda_backend *cb) {
  return cb->graphs && cb->graphs->capturing;
}

static void free_deferred(cuda_backend *cb) {
  cuda_graphs *g = cb->graphs;
  for (size_t i = 0; i < g->n_deferred; i++) (void)cb->rt->free(g->deferred[i]);
  g->n_deferred = 0;
}

brisk_status brisk_cuda_graph_defer_free(cuda_backend *cb, void *p) {
  cuda_graphs *g = cb->graphs;
  if (g->n_deferred == g->cap_deferred) {
    size_t cap = g->cap_deferred ? g->cap_deferred * 2 : 16;
    void **d = brisk_malloc(cap * sizeof *d);
    if (!d) return brisk_error_oom();
    if (g->n_deferred) memcpy(d, g->deferred, g->n_deferred * sizeof *d);
    brisk_free(g->deferred);
    g->deferred = d;
    g->cap_deferred = cap;
  }
  g->deferred[g->n_deferred++] = p;
  return BRISK_OK;
}

/* `bytes` of staging for this step, 16-byte aligned. */
static brisk_status stage(cuda_backend *cb, size_t bytes, void **out) {
  cuda_graphs *g = cb->graphs;
  bytes = (bytes + 15) & ~(size_t)15;
  for (int i = 0; i < g->n_chunks; i++) {
    pinned_chunk *c = &g->chunks[i];
    if (c->cap - c->used >= bytes) {
      *out = c->p + c->used;
      c->used += bytes;
      return BRISK_OK;
    }
  }
  if (g->n_chunks == MAX_CHUNKS)
    return brisk_error(BRISK_E_OUT_OF_MEMORY, "%s: graph staging is full (%d chunks)", cb->name,
                       MAX_CHUNKS);
  pinned_chunk *c = &g->chunks[g->n_chunks];
  size_t cap = bytes > CHUNK_BYTES ? bytes : CHUNK_BYTES;
  void *p = NULL;
  brisk_status st = brisk_cuda_status(cb, cb->rt->host_alloc(&p, cap), "page-locked staging");
  if (st) return st;
  *c = (pinned_chunk){p, cap, bytes};
  g->n_chunks++;
  *out = p;
  return BRISK_OK;
}

brisk_status brisk_cuda_h2d(cuda_backend *cb, void *dst, const void *src, size_t bytes,
                            const char *what) {
  if (bytes == 0) return BRISK_OK;
  if (brisk_cuda_graph_capturing(cb)) {
    void *s = NULL;
    brisk_status st = stage(cb, bytes, &s);
    if (st) return st;
    memcpy(s, src, bytes);
    src = s;
  }
  return brisk_cuda_status(cb, cb->rt->memcpy_async(dst, src, bytes, BRISK_CUDA_H2D, cb->stream),
                           what);
}

static brisk_status cuda_step_begin(brisk_backend *be, int32_t n_tokens) {
  cuda_backend *cb = (cuda_backend *)be;
  cuda_graphs *g = graphs_of(cb);
  if (!g) return brisk_error_oom();
  if (g->capturing)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "%s: step_begin inside a step", cb->name);
  if (!cb->rt->capture_begin || g->max_batch == 0 || n_tokens < 1 || n_tokens > g->max_batch) {
    g->stats.eager++;
    return BRISK_OK;
  }
  /* The previous step has run: its staging and deferred buffers are free. */
  brisk_status st = brisk_cuda_status(cb, cb->rt->stream_sync(cb->stream), "stream synchronize");
  if (st) return st;
  free_deferred(cb);
  for (int i = 0; i < g->n_chunks; i++) g->chunks[i].used = 0;
  if ((st = brisk_cuda_status(cb, cb->rt->capture_begin(cb->stream), "graph capture"))) return st;
  g->capturing = true;
  g->n_tokens = n_tokens;
  return BRISK_OK;
}

static exec_slot *slot_for(cuda_graphs *g, int32_t n_tokens, bool *found) {
  exec_slot *lru = &g->execs[0];
  for (int i = 0; i < MAX_EXECS; i++) {
    exec_slot *s = &g->execs[i];
    if (s->exec && s->n_tokens == n_tokens) {
      *found = true;
      return s;
    }
    if (!s->exec || (lru->exec && s->used < lru->used)) lru = s;
  }
  *found = false;
  return lru;
}

static brisk_status cuda_step_end(brisk_backend *be, bool ok) {
  cuda_backend *cb = (cuda_backend *)be;
  cuda_graphs *g = cb->graphs;
  if (!g || !g->capturing) return BRISK_OK;
  g->capturing = false;
  void *graph = NULL;
  brisk_status st = brisk_cuda_status(cb, cb->rt->capture_end(cb->stream, &graph), "graph capture");
  /* A failed pass has its own status; its captured work is dropped. A
   * capture the runtime refused (an operation that cannot be captured)
   * turns graphs off for this backend, so later steps run eagerly. */
  if (!ok || st) {
    if (graph) cb->rt->graph_free(graph);
    if (st) {
      /* The status carries the runtime's message (the plugin has no
       * brisk_last_error to read it back). */
      BRISK_WARN("%s: graph capture failed; decode steps run without graphs from now on", cb->name);
      g->max_batch = 0;
    }
    return ok ? st : BRISK_OK;
  }
  bool found;
  exec_slot *slot = slot_for(g, g->n_tokens, &found);
  if (found && cb->rt->graph_update(slot->exec, graph) == 0) {
    g->stats.updated++;
  } else {
    if (slot->exec) cb->rt->graph_exec_free(slot->exec);
    slot->exec = NULL;
    void *exec = NULL;
    st = brisk_cuda_status(cb, cb->rt->graph_instantiate(graph, &exec), "graph instantiation");
    if (!st) {
      *slot = (exec_slot){g->n_tokens, exec, 0};
      g->stats.instantiated++;
    }
  }
  cb->rt->graph_free(graph);
  if (st) return st;
  slot->used = ++g->clock;
  g->stats.steps++;
  return brisk_cuda_launched(cb, cb->rt->graph_launch(slot->exec, cb->stream), "graph launch");
}

/* The environment is read when the backend is made (each context makes its own). */
void brisk_cuda_graph_init(cuda_backend *cb) {
  if (!cb->rt->capture_begin || !graphs_of(cb)) return;
  cb->base.step_begin = cuda_step_begin;
  cb->base.step_end = cuda_step_end;
}

void brisk_cuda_graph_fini(cuda_backend *cb) {
  cuda_graphs *g = cb->graphs;
  if (!g) return;
  if (g->capturing) {
    void *graph = NULL;
    if (cb->rt->capture_end(cb->stream, &graph) == 0 && graph) cb->rt->graph_free(graph);
  }
  (void)cb->rt->stream_sync(cb->stream);
  free_deferred(cb);
  brisk_free(g->deferred);
  for (int i = 0; i < MAX_EXECS; i++)
    if (g->execs[i].exec) cb->rt->graph_exec_free(g->execs[i].exec);
  for (int i = 0; i < g->n_chunks; i++) (void)cb->rt->host_free(g->chunks[i].p);
  brisk_free(g);
  cb->graphs = NULL;
}

void brisk_backend_cuda_graph_stats(const brisk_backend *be, brisk_cuda_graph_stats *out) {
  const cuda_backend *cb = (const cuda_backend *)be;
  if (cb->graphs)
    *out = cb->graphs->stats;
  else
    memset(out, 0, sizeof *out);
}

brisk_status brisk_backend_cuda_set_graphs(brisk_backend *be, int32_t max_batch) {
  cuda_backend *cb = (cuda_backend *)be;
  cuda_graphs *g = graphs_of(cb);
  if (!g) return brisk_error_oom();
  g->max_batch = max_batch < 0 ? 0 : max_batch;
  return BRISK_OK;
}
