/* The NCCL communicator (lib/parallel/comm_nccl.c) over the emulated NCCL
 * table (nccl_emu.c: ranks as threads, device memory and the tree-sum
 * kernel through the SIMT emulation): every collective of comm.h on device
 * buffers, groups of 1 to 4 ranks made both ways (one process with several
 * devices, and ranks joined by an id carried as bytes), all_reduce_sum
 * bitwise equal to brisk_comm_tree_sum on every rank, an aborting rank that
 * makes the others return BRISK_E_CANCELLED, and bad arguments and a failed
 * init as statuses with nothing leaked. tests/gpu/run.sh runs the same
 * checks at world size 1 on a GPU with the plugin's table. */
#include "cuda_emu.h"
#include "nccl_emu.h"
#include "test_support.h"

#include "backend/device.h"
#include "backend/plugin.h"
#include "parallel/comm_nccl.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RANKS 4
#define N_FLOATS 1000

static const brisk_nccl_rt *rt = &brisk_nccl_rt_emu;
/* On a GPU (BRISK_TEST_DEVICE=cuda:0): the plugin's table, world size 1,
 * buffers moved with the CUDA backend of device 0. */
static brisk_backend *gpu;
static int max_ranks = MAX_RANKS;

static bool on_gpu(void) {
  const char *d = getenv("BRISK_TEST_DEVICE");
  return d && strncmp(d, "cuda", 4) == 0;
}

static int setup(void **state) {
  (void)state;
  if (!on_gpu()) return 0;
  brisk_device_ref d;
  if (brisk_device_parse(getenv("BRISK_TEST_DEVICE"), &d) ||
      brisk_device_backend_create(&d, NULL, &gpu) || brisk_plugin_nccl(&rt)) {
    fprintf(stderr, "GPU: %s\n", brisk_last_error());
    return -1;
  }
  max_ranks = 1;
  return 0;
}

static int teardown(void **state) {
  (void)state;
  brisk_backend_free(gpu);
  return 0;
}

/* Device memory and copies: plain memory in the emulation, the backend's on a GPU. */
static void *dev_alloc(size_t bytes) {
  void *d = NULL;
  if (gpu) return gpu->buffer_alloc(gpu, bytes, &d) ? NULL : d;
  return rt->malloc(&d, bytes) ? NULL : d;
}
static void dev_free(void *d) {
  if (gpu)
    gpu->buffer_free(gpu, d);
  else if (d)
    rt->free(d);
}
static void *dev_copy(const void *src, size_t bytes) {
  void *d = dev_alloc(bytes);
  if (!d) return NULL;
  if (gpu) {
    /* The communicator runs on its own stream: the copy must be done. */
    if (gpu->upload(gpu, d, src, bytes) || gpu->synchronize(gpu)) {
      dev_free(d);
      return NULL;
    }
  } else {
    memcpy(d, src, bytes);
  }
  return d;
}
static void from_dev(void *dst, const void *d, size_t bytes) {
  if (gpu)
    (void)gpu->download(gpu, dst, d, bytes);
  else
    memcpy(dst, d, bytes);
}

typedef struct rank_job {
  brisk_comm *c;
  int size;
  const float *inputs; /* [size][N_FLOATS] host */
  brisk_status st;
  char why[256];
  bool abort_first; /* this rank aborts instead of reducing */
  brisk_status reduce_st;
} rank_job;

#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      snprintf(j->why, sizeof j->why, __VA_ARGS__);                                                \
      j->st = BRISK_E_INTERNAL;                                                                    \
      goto out;                                                                                    \
    }                                                                                              \
  } while (0)

/* Every collective once, checked against host arithmetic. */
static void *run_rank(void *arg) {
  rank_job *j = arg;
  const int r = brisk_comm_rank(j->c), n = j->size;
  float *buf = dev_copy(j->inputs + (size_t)r * N_FLOATS, N_FLOATS * sizeof(float));
  float *sum = malloc(N_FLOATS * sizeof *sum);
  unsigned char send[37], *recv = malloc(37 * (size_t)n), bc[64];
  void *dsend = NULL, *drecv = NULL, *dbc = NULL;
  CHECK(buf && recv && sum, "allocation");
  /* all_reduce_sum: the tree over ranks, bit for bit. */
  brisk_status st = brisk_comm_all_reduce_sum(j->c, buf, N_FLOATS);
  CHECK(!st, "all_reduce_sum: %s", brisk_last_error());
  from_dev(sum, buf, N_FLOATS * sizeof *sum);
  for (int i = 0; i < N_FLOATS; i++) {
    float v[MAX_RANKS];
    for (int q = 0; q < n; q++) v[q] = j->inputs[(size_t)q * N_FLOATS + i];
    float want = brisk_comm_tree_sum(v, n);
    CHECK(memcmp(&buf[i], &want, sizeof want) == 0, "rank %d element %d: %.9g, tree sum %.9g", r, i,
          (double)buf[i], (double)want);
  }
  /* all_gather of 37 bytes each. */
  for (int i = 0; i < 37; i++) send[i] = (unsigned char)(r * 37 + i);
  dsend = dev_copy(send, sizeof send);
  drecv = dev_alloc(37 * (size_t)n);
  CHECK(dsend && drecv, "allocation");
  CHECK(!brisk_comm_all_gather(j->c, dsend, 37, drecv), "all_gather: %s", brisk_last_error());
  from_dev(recv, drecv, 37 * (size_t)n);
  for (int q = 0; q < n; q++)
    for (int i = 0; i < 37; i++)
      CHECK(recv[q * 37 + i] == (unsigned char)(q * 37 + i), "all_gather: rank %d byte %d", q, i);
  /* broadcast from the last rank. */
  for (int i = 0; i < 64; i++) bc[i] = (unsigned char)(r == n - 1 ? 200 - i : 0);
  dbc = dev_copy(bc, sizeof bc);
  CHECK(dbc && !brisk_comm_broadcast(j->c, dbc, 64, n - 1), "broadcast: %s", brisk_last_error());
  from_dev(bc, dbc, 64);
  for (int i = 0; i < 64; i++) CHECK(bc[i] == (unsigned char)(200 - i), "broadcast byte %d", i);
  /* A ring of send/recv: even ranks send first, odd ranks receive first. */
  if (n > 1) {
    const int to = (r + 1) % n, from = (r + n - 1) % n;
    float mine = (float)(r + 1), got = 0, *dm = dev_copy(&mine, 4), *dg = dev_copy(&got, 4);
    CHECK(dm && dg, "allocation");
    if (r % 2 == 0)
      st = brisk_comm_send(j->c, dm, 4, to) || brisk_comm_recv(j->c, dg, 4, from);
    else
      st = brisk_comm_recv(j->c, dg, 4, from) || brisk_comm_send(j->c, dm, 4, to);
    float have = 0;
    from_dev(&have, dg, 4);
    dev_free(dm);
    dev_free(dg);
    CHECK(!st, "send/recv: %s", brisk_last_error());
    CHECK(have == (float)(from + 1), "recv from %d: %g", from, (double)have);
  }
  CHECK(!brisk_comm_barrier(j->c), "barrier: %s", brisk_last_error());
out:
  dev_free(buf);
  dev_free(dsend);
  dev_free(drecv);
  dev_free(dbc);
  free(recv);
  free(sum);
  return NULL;
}

static float *random_inputs(test_rng *g, int n) {
  float *x = malloc((size_t)n * N_FLOATS * sizeof *x);
  for (size_t i = 0; i < (size_t)n * N_FLOATS; i++) x[i] = (float)test_rng_uniform(g, -100, 100);
  return x;
}

static void run_group(brisk_comm **ranks, int n, const float *inputs, void *(*fn)(void *),
                      rank_job *jobs) {
  pthread_t th[MAX_RANKS];
  for (int r = 0; r < n; r++) {
    jobs[r].c = ranks[r];
    jobs[r].size = n;
    jobs[r].inputs = inputs;
    assert_int_equal(pthread_create(&th[r], NULL, fn, &jobs[r]), 0);
  }
  for (int r = 0; r < n; r++) pthread_join(th[r], NULL);
}

static void test_local_groups(void **state) {
  (void)state;
  test_rng g = test_rng_seeded("comm_nccl_local");
  const size_t before = brisk_cuda_emu_in_use();
  for (int n = 1; n <= max_ranks; n++) {
    const int devices[MAX_RANKS] = {gpu ? 0 : 3, 0, 2, 1};
    brisk_comm *ranks[MAX_RANKS] = {0};
    if (brisk_comm_nccl_create_local(rt, n, devices, ranks))
      fail_msg("%d ranks: %s", n, brisk_last_error());
    for (int r = 0; r < n; r++) {
      assert_int_equal(brisk_comm_rank(ranks[r]), r);
      assert_int_equal(brisk_comm_size(ranks[r]), n);
    }
    float *x = random_inputs(&g, n);
    rank_job jobs[MAX_RANKS];
    memset(jobs, 0, sizeof jobs);
    run_group(ranks, n, x, run_rank, jobs);
    for (int r = 0; r < n; r++)
      if (jobs[r].st) fail_msg("%d ranks, rank %d: %s", n, r, jobs[r].why);
    for (int r = 0; r < n; r++) brisk_comm_free(ranks[r]);
    free(x);
  }
  if (!gpu) assert_int_equal(brisk_cuda_emu_in_use(), before);
}

/* One rank per "process": each thread joins by an id that reached it as bytes. */
typedef struct id_job {
  const void *id_bytes;
  int rank, size;
  brisk_comm *c;
  brisk_status st;
} id_job;

static void *join_by_id(void *arg) {
  id_job *j = arg;
  brisk_comm_id id;
  j->st = brisk_comm_id_from_bytes(&id, j->id_bytes, BRISK_COMM_ID_BYTES);
  if (!j->st) j->st = brisk_comm_nccl_create_rank(rt, &id, j->rank, j->size, j->rank, &j->c);
  return NULL;
}

static void test_ranks_by_id(void **state) {
  (void)state;
  test_rng g = test_rng_seeded("comm_nccl_id");
  const int n = gpu ? 1 : 3;
  brisk_comm_id id;
  if (brisk_comm_id_create(rt, &id)) fail_msg("id: %s", brisk_last_error());
  unsigned char wire[BRISK_COMM_ID_BYTES]; /* what the host carries */
  memcpy(wire, id.bytes, sizeof wire);
  id_job jobs[3];
  pthread_t th[3];
  for (int r = 0; r < n; r++) {
    jobs[r] = (id_job){wire, r, n, NULL, BRISK_OK};
    assert_int_equal(pthread_create(&th[r], NULL, join_by_id, &jobs[r]), 0);
  }
  for (int r = 0; r < n; r++) pthread_join(th[r], NULL);
  brisk_comm *ranks[3];
  for (int r = 0; r < n; r++) {
    if (jobs[r].st) fail_msg("rank %d: %s", r, brisk_last_error());
    ranks[r] = jobs[r].c;
  }
  float *x = random_inputs(&g, n);
  rank_job rj[MAX_RANKS];
  memset(rj, 0, sizeof rj);
  run_group(ranks, n, x, run_rank, rj);
  for (int r = 0; r < n; r++)
    if (rj[r].st) fail_msg("rank %d: %s", r, rj[r].why);
  for (int r = 0; r < n; r++) brisk_comm_free(ranks[r]);
  free(x);
}

/* Rank 1 fails (aborts) where the others reduce: they return CANCELLED. */
static void *reduce_or_abort(void *arg) {
  rank_job *j = arg;
  float *buf = NULL;
  if (rt->malloc((void **)&buf, N_FLOATS * sizeof(float))) {
    j->reduce_st = BRISK_E_OUT_OF_MEMORY;
    return NULL;
  }
  if (j->abort_first) {
    brisk_comm_abort(j->c);
    j->reduce_st = BRISK_OK;
  } else {
    j->reduce_st = brisk_comm_all_reduce_sum(j->c, buf, N_FLOATS);
    if (j->reduce_st) snprintf(j->why, sizeof j->why, "%s", brisk_last_error());
  }
  rt->free(buf);
  return NULL;
}

static void test_abort(void **state) {
  (void)state;
  if (gpu) skip(); /* needs several ranks */
  const int n = 3, devices[3] = {0, 1, 2};
  const size_t before = brisk_cuda_emu_in_use();
  brisk_comm *ranks[3];
  assert_int_equal(brisk_comm_nccl_create_local(rt, n, devices, ranks), BRISK_OK);
  rank_job jobs[MAX_RANKS];
  memset(jobs, 0, sizeof jobs);
  jobs[1].abort_first = true;
  float dummy[3 * N_FLOATS] = {0};
  run_group(ranks, n, dummy, reduce_or_abort, jobs);
  for (int r = 0; r < n; r++) {
    if (r == 1) continue;
    assert_int_equal(jobs[r].reduce_st, BRISK_E_CANCELLED);
    assert_non_null(strstr(jobs[r].why, "failed"));
  }
  /* Later calls are cancelled at once, on every rank. */
  float *b = NULL;
  assert_int_equal(rt->malloc((void **)&b, 16), 0);
  for (int r = 0; r < n; r++)
    assert_int_equal(brisk_comm_all_reduce_sum(ranks[r], b, 4), BRISK_E_CANCELLED);
  rt->free(b);
  for (int r = 0; r < n; r++) brisk_comm_free(ranks[r]);
  assert_int_equal(brisk_cuda_emu_in_use(), before);
}

static void test_bad_arguments(void **state) {
  (void)state;
  if (gpu) skip(); /* the emulation's failure injection and device limits */
  brisk_comm_id id;
  unsigned char bytes[BRISK_COMM_ID_BYTES + 1] = {0};
  assert_int_equal(brisk_comm_id_from_bytes(&id, bytes, sizeof bytes), BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "128"));
  assert_int_equal(brisk_comm_id_from_bytes(&id, bytes, 12), BRISK_E_INVALID_ARGUMENT);
  brisk_comm *ranks[4] = {0};
  const int twice[2] = {1, 1}, bad[2] = {0, -1}, ok[2] = {0, 1};
  assert_int_equal(brisk_comm_nccl_create_local(rt, 2, twice, ranks), BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "twice"));
  assert_int_equal(brisk_comm_nccl_create_local(rt, 2, bad, ranks), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_comm_nccl_create_local(rt, 0, ok, ranks), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_comm_id_create(rt, &id), BRISK_OK);
  brisk_comm *c = NULL;
  assert_int_equal(brisk_comm_nccl_create_rank(rt, &id, 2, 2, 0, &c), BRISK_E_INVALID_ARGUMENT);
  assert_null(c);
  /* A device the runtime refuses. */
  assert_int_equal(brisk_comm_nccl_create_rank(rt, &id, 0, 1, 99, &c), BRISK_E_INTERNAL);
  assert_non_null(strstr(brisk_last_error(), "device"));
  assert_null(c);
  /* A failing init: a status naming NCCL, no rank left, nothing leaked. */
  const size_t before = brisk_cuda_emu_in_use();
  brisk_nccl_emu_fail_init(1);
  assert_int_equal(brisk_comm_nccl_create_local(rt, 2, ok, ranks), BRISK_E_INTERNAL);
  assert_non_null(strstr(brisk_last_error(), "ncclCommInitRank"));
  brisk_nccl_emu_fail_init(-1);
  assert_null(ranks[0]);
  assert_null(ranks[1]);
  assert_int_equal(brisk_cuda_emu_in_use(), before);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_local_groups),
      cmocka_unit_test(test_ranks_by_id),
      cmocka_unit_test(test_abort),
      cmocka_unit_test(test_bad_arguments),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
