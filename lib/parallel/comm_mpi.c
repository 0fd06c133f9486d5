/* The MPI communicator (comm_mpi.h). */
#include "parallel/comm_mpi.h"

#include "core/alloc.h"
#include "core/error.h"

#include <mpi.h>
#include <stdbool.h>
#include <string.h>

typedef struct mpi_state {
  MPI_Comm comm;
  bool we_initialized;
  bool failed; /* this rank called abort */
  brisk_comm handle;
} mpi_state;

static mpi_state *st_of(brisk_comm *c) { return c->impl; }

static brisk_status mpi_fail(int e, const char *what) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(e, msg, &len);
  return brisk_error(BRISK_E_INTERNAL, "%s: MPI error: %.*s", what, len, msg);
}

/* Every collective starts here: the ranks agree on whether one failed and
 * on the size word (op and length), so none waits in a mismatched call. */
static brisk_status agree(brisk_comm *c, long long word) {
  mpi_state *s = st_of(c);
  long long mine[2] = {s->failed ? 1 : 0, word}, lo[2], hi[2];
  int e;
  if ((e = MPI_Allreduce(mine, hi, 2, MPI_LONG_LONG, MPI_MAX, s->comm)) != MPI_SUCCESS)
    return mpi_fail(e, "collective");
  if ((e = MPI_Allreduce(mine, lo, 2, MPI_LONG_LONG, MPI_MIN, s->comm)) != MPI_SUCCESS)
    return mpi_fail(e, "collective");
  if (hi[0]) return brisk_error(BRISK_E_CANCELLED, "collective: a rank of the group failed");
  if (lo[1] != hi[1])
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "collective: the ranks called different collectives or sizes");
  return BRISK_OK;
}

static long long word(int op, long long size) { return size * 8 + op; }

static brisk_status m_all_reduce(brisk_comm *c, float *buf, int64_t n) {
  brisk_status st = agree(c, word(1, n));
  if (st || n == 0) return st;
  size_t total = (size_t)n * (size_t)c->size;
  float *all = brisk_malloc(total * sizeof(float));
  /* Every rank must take part in the gather: if one has no memory for it,
   * all give up together. */
  int have = all != NULL, every = 0;
  int e = MPI_Allreduce(&have, &every, 1, MPI_INT, MPI_MIN, st_of(c)->comm);
  if (e != MPI_SUCCESS || !every) {
    brisk_free(all);
    return e != MPI_SUCCESS ? mpi_fail(e, "all_reduce_sum") : brisk_error_oom();
  }
  e = MPI_Allgather(buf, (int)n, MPI_FLOAT, all, (int)n, MPI_FLOAT, st_of(c)->comm);
  if (e != MPI_SUCCESS) {
    brisk_free(all);
    return mpi_fail(e, "all_reduce_sum");
  }
  float v[256];
  for (int64_t i = 0; i < n; i++) {
    for (int r = 0; r < c->size; r++) v[r] = all[(size_t)r * (size_t)n + (size_t)i];
    buf[i] = brisk_comm_tree_sum(v, c->size);
  }
  brisk_free(all);
  return BRISK_OK;
}

static brisk_status m_all_gather(brisk_comm *c, const void *send, size_t bytes, void *recv) {
  brisk_status st = agree(c, word(2, (long long)bytes));
  if (st || bytes == 0) return st;
  int e = MPI_Allgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, st_of(c)->comm);
  return e == MPI_SUCCESS ? BRISK_OK : mpi_fail(e, "all_gather");
}

static brisk_status m_broadcast(brisk_comm *c, void *buf, size_t bytes, int root) {
  brisk_status st = agree(c, word(3, (long long)bytes * 512 + root));
  if (st || bytes == 0) return st;
  int e = MPI_Bcast(buf, (int)bytes, MPI_BYTE, root, st_of(c)->comm);
  return e == MPI_SUCCESS ? BRISK_OK : mpi_fail(e, "broadcast");
}

static brisk_status m_barrier(brisk_comm *c) { return agree(c, word(4, 0)); }

/* Point to point carries a header (failed flag, size) before the data, and
 * the receiver answers it (1: send, 0: another size, -1: the receiver
 * failed), so that either side learns of the other's failure or a size
 * mismatch; a failed side still takes part in the exchange, so a rank that
 * fails mid-pipeline releases the peers waiting on it. */
static brisk_status m_send(brisk_comm *c, const void *buf, size_t bytes, int peer) {
  mpi_state *s = st_of(c);
  long long hdr[2] = {s->failed ? 1 : 0, (long long)bytes};
  int e = MPI_Send(hdr, 2, MPI_LONG_LONG, peer, 1, s->comm);
  if (e != MPI_SUCCESS) return mpi_fail(e, "send");
  if (s->failed) return brisk_error(BRISK_E_CANCELLED, "send: this rank failed");
  long long ok = 0;
  if ((e = MPI_Recv(&ok, 1, MPI_LONG_LONG, peer, 2, s->comm, MPI_STATUS_IGNORE)) != MPI_SUCCESS)
    return mpi_fail(e, "send");
  if (ok < 0) return brisk_error(BRISK_E_CANCELLED, "send: rank %d of the group failed", peer);
  if (!ok)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "send: rank %d expected another size than %zu",
                       peer, bytes);
  if (bytes && (e = MPI_Send(buf, (int)bytes, MPI_BYTE, peer, 3, s->comm)) != MPI_SUCCESS)
    return mpi_fail(e, "send");
  return BRISK_OK;
}

static brisk_status m_recv(brisk_comm *c, void *buf, size_t bytes, int peer) {
  mpi_state *s = st_of(c);
  long long hdr[2];
  int e = MPI_Recv(hdr, 2, MPI_LONG_LONG, peer, 1, s->comm, MPI_STATUS_IGNORE);
  if (e != MPI_SUCCESS) return mpi_fail(e, "recv");
  if (hdr[0]) return brisk_error(BRISK_E_CANCELLED, "recv: rank %d of the group failed", peer);
  long long ok = s->failed ? -1 : hdr[1] == (long long)bytes;
  if ((e = MPI_Send(&ok, 1, MPI_LONG_LONG, peer, 2, s->comm)) != MPI_SUCCESS)
    return mpi_fail(e, "recv");
  if (ok < 0) return brisk_error(BRISK_E_CANCELLED, "recv: this rank failed");
  if (!ok)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "recv: expected %zu bytes from rank %d, which sent %lld", bytes, peer,
                       hdr[1]);
  if (bytes &&
      (e = MPI_Recv(buf, (int)bytes, MPI_BYTE, peer, 3, s->comm, MPI_STATUS_IGNORE)) != MPI_SUCCESS)
    return mpi_fail(e, "recv");
  return BRISK_OK;
}

static void m_abort(brisk_comm *c) { st_of(c)->failed = true; }

static void m_destroy(brisk_comm *c) {
  mpi_state *s = st_of(c);
  MPI_Comm_free(&s->comm);
  if (s->we_initialized) MPI_Finalize();
  brisk_free(s);
}

static const brisk_comm_ops mpi_ops = {
    "mpi", m_all_reduce, m_all_gather, m_broadcast, m_send, m_recv, m_barrier, m_abort, m_destroy,
};

brisk_status brisk_comm_mpi_world(brisk_comm **out) {
  if (!out) return brisk_error(BRISK_E_INVALID_ARGUMENT, "mpi communicator: out is NULL");
  int inited = 0, e;
  MPI_Initialized(&inited);
  bool ours = false;
  if (!inited) {
    int provided = 0;
    if ((e = MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided)) != MPI_SUCCESS)
      return mpi_fail(e, "MPI_Init_thread");
    ours = true;
  }
  mpi_state *s = brisk_calloc(1, sizeof *s);
  if (!s) return brisk_error_oom();
  int rank = 0, size = 1;
  if ((e = MPI_Comm_dup(MPI_COMM_WORLD, &s->comm)) != MPI_SUCCESS) {
    brisk_free(s);
    return mpi_fail(e, "MPI_Comm_dup");
  }
  /* Errors come back as codes, not as MPI's default abort of the job. */
  MPI_Comm_set_errhandler(s->comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(s->comm, &rank);
  MPI_Comm_size(s->comm, &size);
  if (size > 256) {
    MPI_Comm_free(&s->comm);
    brisk_free(s);
    return brisk_error(BRISK_E_UNSUPPORTED, "mpi communicator: %d ranks (at most 256)", size);
  }
  s->we_initialized = ours;
  s->handle = (brisk_comm){&mpi_ops, rank, size, s};
  *out = &s->handle;
  return BRISK_OK;
}

brisk_status brisk_comm_mpi_split(brisk_comm *c, int color, int key, brisk_comm **out) {
  if (!c || !out || c->ops != &mpi_ops || color < 0)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "mpi split: an MPI communicator, color >= 0");
  mpi_state *s = brisk_calloc(1, sizeof *s);
  /* Every rank must take part in the split: one without memory takes part
   * without a group and then says so. */
  MPI_Comm part = MPI_COMM_NULL;
  int e = MPI_Comm_split(st_of(c)->comm, s ? color : MPI_UNDEFINED, key, &part);
  if (!s) {
    if (part != MPI_COMM_NULL) MPI_Comm_free(&part);
    return brisk_error_oom();
  }
  if (e != MPI_SUCCESS) {
    brisk_free(s);
    return mpi_fail(e, "MPI_Comm_split");
  }
  s->comm = part;
  MPI_Comm_set_errhandler(s->comm, MPI_ERRORS_RETURN);
  int rank = 0, size = 1;
  MPI_Comm_rank(s->comm, &rank);
  MPI_Comm_size(s->comm, &size);
  s->handle = (brisk_comm){&mpi_ops, rank, size, s};
  *out = &s->handle;
  return BRISK_OK;
}
