/* The MPI communicator, run by the suite under `mpirun -np 2` and `-np 3`:
 * every collective against the same fixed tree computed locally from every
 * rank's (regenerable) data, point to point, ranks that disagree, and a
 * failing rank. Not cmocka (each process checks and exits nonzero on the
 * first failure, which mpirun reports). The communicator is the process's
 * world, from the MPI plugin (libbrisk-mpi.so, parallel/mpi_plugin.h). */
#include "parallel/world.h"

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

/* Rank r's value i: the same on every process that asks. */
static float value(int r, int64_t i) {
  uint32_t x = (uint32_t)(r * 2654435761u) ^ (uint32_t)(i * 40503u + 17u);
  x ^= x >> 13;
  x *= 0x5bd1e995u;
  x ^= x >> 15;
  return (float)((double)(x % 2000001u) / 1000.0 - 1000.0);
}

int main(void) {
  brisk_comm *c = NULL;
  CHECK(brisk_world_join(&c) == BRISK_OK);
  CHECK(strcmp(c->ops->name, "mpi") == 0);
  brisk_comm *again = NULL;
  CHECK(brisk_world_join(&again) == BRISK_OK && again == c); /* one world per process */
  const int r = brisk_comm_rank(c), n_ranks = brisk_comm_size(c);
  rank_g = r;
  /* all-reduce: the tree over ranks, bit for bit. */
  const int64_t ns[] = {0, 1, 13, 100003};
  for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
    int64_t n = ns[k];
    float *buf = malloc((size_t)(n ? n : 1) * sizeof(float));
    for (int64_t i = 0; i < n; i++) buf[i] = value(r, i);
    CHECK(brisk_comm_all_reduce_sum(c, buf, n) == BRISK_OK);
    for (int64_t i = 0; i < n; i++) {
      float v[256];
      for (int q = 0; q < n_ranks; q++) v[q] = value(q, i);
      float want = brisk_comm_tree_sum(v, n_ranks);
      CHECK(memcmp(&buf[i], &want, sizeof want) == 0);
    }
    free(buf);
  }
  /* all-gather and broadcast from every root. */
  unsigned char send[37], recv[37 * 8], b[37];
  for (int i = 0; i < 37; i++) send[i] = (unsigned char)(r * 7 + i);
  CHECK(brisk_comm_all_gather(c, send, sizeof send, recv) == BRISK_OK);
  for (int q = 0; q < n_ranks; q++)
    for (int i = 0; i < 37; i++) CHECK(recv[q * 37 + i] == (unsigned char)(q * 7 + i));
  for (int root = 0; root < n_ranks; root++) {
    for (int i = 0; i < 37; i++) b[i] = (unsigned char)(r == root ? 100 + i : 0);
    CHECK(brisk_comm_broadcast(c, b, sizeof b, root) == BRISK_OK);
    for (int i = 0; i < 37; i++) CHECK(b[i] == (unsigned char)(100 + i));
  }
  CHECK(brisk_comm_barrier(c) == BRISK_OK);
  /* A ring of sends: even ranks send first. */
  int next = (r + 1) % n_ranks, prev = (r + n_ranks - 1) % n_ranks;
  if (n_ranks > 1)
    for (int round = 0; round < 20; round++) {
      int32_t out[2] = {r, round}, in[2] = {-1, -1};
      if (r % 2 == 0) {
        CHECK(brisk_comm_send(c, out, sizeof out, next) == BRISK_OK);
        CHECK(brisk_comm_recv(c, in, sizeof in, prev) == BRISK_OK);
      } else {
        CHECK(brisk_comm_recv(c, in, sizeof in, prev) == BRISK_OK);
        CHECK(brisk_comm_send(c, out, sizeof out, next) == BRISK_OK);
      }
      CHECK(in[0] == prev && in[1] == round);
    }
  /* Ranks that disagree all fail, and the group works afterwards. */
  float x[4] = {1, 2, 3, 4};
  if (n_ranks > 1)
    CHECK(brisk_comm_all_reduce_sum(c, x, r == 1 ? 3 : 4) == BRISK_E_INVALID_ARGUMENT);
  CHECK(brisk_comm_barrier(c) == BRISK_OK);
  /* Rank 1 fails and aborts, then enters the step's closing collective:
   * every other rank gets BRISK_E_CANCELLED there. */
  if (n_ranks > 1) {
    if (r == 1) brisk_comm_abort(c);
    brisk_status st = brisk_comm_all_reduce_sum(c, x, 4);
    CHECK(st == BRISK_E_CANCELLED);
  }
  /* Point to point with the failed rank 1, both ways: the failed side still
   * takes part, and both sides return BRISK_E_CANCELLED (no data moves). */
  if (n_ranks > 1 && r <= 1) {
    int32_t v[3] = {r, r, r};
    if (r == 0) {
      CHECK(brisk_comm_send(c, v, sizeof v, 1) == BRISK_E_CANCELLED);
      CHECK(brisk_comm_recv(c, v, sizeof v, 1) == BRISK_E_CANCELLED);
      CHECK(v[0] == 0 && v[2] == 0);
    } else {
      CHECK(brisk_comm_recv(c, v, sizeof v, 0) == BRISK_E_CANCELLED);
      CHECK(v[0] == 1 && v[2] == 1);
      CHECK(brisk_comm_send(c, v, sizeof v, 0) == BRISK_E_CANCELLED);
    }
  }
  brisk_world_leave();
  CHECK(brisk_world() == NULL);
  if (r == 0) printf("mpi communicator: %d ranks ok\n", n_ranks);
  return 0;
}
