/* The threads communicator: every collective at group sizes 1..5 and 8 on
 * random data, against a serial reference computed with the same fixed
 * tree (bit for bit, the same bits on every rank); point to point in a
 * ring; ranks that disagree; and a rank that fails mid-step making every
 * other rank return instead of waiting forever. */
#include "test_support.h"

#include "parallel/comm.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RANKS 8

typedef struct job job;
typedef brisk_status (*rank_fn)(job *j, int rank);

struct job {
  brisk_comm *ranks[MAX_RANKS];
  int size;
  rank_fn fn;
  brisk_status st[MAX_RANKS];
  float *data[MAX_RANKS]; /* per-rank buffers */
  int64_t n;
  void *extra;
};

typedef struct arg {
  job *j;
  int rank;
} arg;

static void *thread_main(void *p) {
  arg *a = p;
  a->j->st[a->rank] = a->j->fn(a->j, a->rank);
  return NULL;
}

/* Runs fn on every rank, each on its own thread. */
static void run_ranks(job *j) {
  pthread_t t[MAX_RANKS];
  arg a[MAX_RANKS];
  for (int r = 0; r < j->size; r++) {
    a[r] = (arg){j, r};
    assert_int_equal(pthread_create(&t[r], NULL, thread_main, &a[r]), 0);
  }
  for (int r = 0; r < j->size; r++) pthread_join(t[r], NULL);
}

static void make_group(job *j, int size) {
  memset(j, 0, sizeof *j);
  j->size = size;
  assert_int_equal(brisk_comm_threads_create(size, j->ranks), BRISK_OK);
  for (int r = 0; r < size; r++) {
    assert_int_equal(brisk_comm_rank(j->ranks[r]), r);
    assert_int_equal(brisk_comm_size(j->ranks[r]), size);
  }
}

static void free_group(job *j) {
  for (int r = 0; r < j->size; r++) {
    brisk_comm_free(j->ranks[r]);
    free(j->data[r]);
  }
}

static brisk_status do_reduce(job *j, int r) {
  return brisk_comm_all_reduce_sum(j->ranks[r], j->data[r], j->n);
}

static void test_all_reduce(void **state) {
  (void)state;
  test_rng rng = test_rng_seeded("comm_reduce");
  const int sizes[] = {1, 2, 3, 4, 5, 8};
  const int64_t ns[] = {0, 1, 7, 1000, 100003};
  for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
    for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
      job j;
      make_group(&j, sizes[s]);
      j.n = ns[k];
      j.fn = do_reduce;
      float *want = malloc((size_t)(j.n ? j.n : 1) * sizeof(float));
      for (int r = 0; r < j.size; r++) {
        j.data[r] = malloc((size_t)(j.n ? j.n : 1) * sizeof(float));
        for (int64_t i = 0; i < j.n; i++) j.data[r][i] = (float)test_rng_uniform(&rng, -1e3, 1e3);
      }
      for (int64_t i = 0; i < j.n; i++) {
        float v[MAX_RANKS];
        for (int r = 0; r < j.size; r++) v[r] = j.data[r][i];
        want[i] = brisk_comm_tree_sum(v, j.size);
      }
      run_ranks(&j);
      for (int r = 0; r < j.size; r++) {
        assert_int_equal(j.st[r], BRISK_OK);
        if (j.n) assert_memory_equal(j.data[r], want, (size_t)j.n * sizeof(float));
      }
      free(want);
      free_group(&j);
    }
}

/* The tree is the documented one: ((a + b) + (c + d)), ((a + b) + c). */
static void test_tree_order(void **state) {
  (void)state;
  const float v[5] = {1e8f, 1.0f, -1e8f, 1.0f, 0.5f};
  assert_true(brisk_comm_tree_sum(v, 4) == (v[0] + v[1]) + (v[2] + v[3]));
  assert_true(brisk_comm_tree_sum(v, 3) == (v[0] + v[1]) + v[2]);
  assert_true(brisk_comm_tree_sum(v, 5) == ((v[0] + v[1]) + (v[2] + v[3])) + v[4]);
  assert_true(brisk_comm_tree_sum(v, 1) == v[0]);
}

static brisk_status do_gather_bcast(job *j, int r) {
  brisk_comm *c = j->ranks[r];
  size_t bytes = (size_t)j->n;
  unsigned char *send = malloc(bytes + 1), *recv = malloc(bytes * (size_t)j->size + 1);
  for (size_t i = 0; i < bytes; i++) send[i] = (unsigned char)(r * 31 + i);
  brisk_status st = brisk_comm_all_gather(c, send, bytes, recv);
  for (int q = 0; q < j->size && !st; q++)
    for (size_t i = 0; i < bytes; i++)
      if (recv[(size_t)q * bytes + i] != (unsigned char)(q * 31 + i)) st = BRISK_E_INTERNAL;
  for (int root = 0; root < j->size && !st; root++) {
    for (size_t i = 0; i < bytes; i++) send[i] = (unsigned char)(r == root ? 200 + i : 0);
    if ((st = brisk_comm_broadcast(c, send, bytes, root))) break;
    for (size_t i = 0; i < bytes; i++)
      if (send[i] != (unsigned char)(200 + i)) st = BRISK_E_INTERNAL;
  }
  if (!st) st = brisk_comm_barrier(c);
  free(send);
  free(recv);
  return st;
}

static void test_gather_broadcast_barrier(void **state) {
  (void)state;
  for (int size = 1; size <= 5; size++)
    for (int64_t n = 0; n <= 300; n += 150) {
      job j;
      make_group(&j, size);
      j.n = n;
      j.fn = do_gather_bcast;
      run_ranks(&j);
      for (int r = 0; r < size; r++) assert_int_equal(j.st[r], BRISK_OK);
      free_group(&j);
    }
}

/* Rank r sends to r + 1 and receives from r - 1 (even ranks send first, so
 * the ring cannot deadlock), 50 rounds. */
static brisk_status do_ring(job *j, int r) {
  brisk_comm *c = j->ranks[r];
  int next = (r + 1) % j->size, prev = (r + j->size - 1) % j->size;
  for (int round = 0; round < 50; round++) {
    int32_t out[3] = {r, round, r * 1000 + round}, in[3] = {0};
    brisk_status st;
    if (r % 2 == 0) {
      if ((st = brisk_comm_send(c, out, sizeof out, next)) ||
          (st = brisk_comm_recv(c, in, sizeof in, prev)))
        return st;
    } else if ((st = brisk_comm_recv(c, in, sizeof in, prev)) ||
               (st = brisk_comm_send(c, out, sizeof out, next))) {
      return st;
    }
    if (in[0] != prev || in[1] != round || in[2] != prev * 1000 + round) return BRISK_E_INTERNAL;
  }
  return BRISK_OK;
}

static void test_send_recv_ring(void **state) {
  (void)state;
  for (int size = 2; size <= 6; size += 2) {
    job j;
    make_group(&j, size);
    j.fn = do_ring;
    run_ranks(&j);
    for (int r = 0; r < size; r++) assert_int_equal(j.st[r], BRISK_OK);
    free_group(&j);
  }
}

/* Rank 1 reduces a different length: every rank fails alike, none hangs. */
static brisk_status do_mismatch(job *j, int r) {
  return brisk_comm_all_reduce_sum(j->ranks[r], j->data[r], r == 1 ? j->n - 1 : j->n);
}

static void test_ranks_disagree(void **state) {
  (void)state;
  job j;
  make_group(&j, 3);
  j.n = 10;
  j.fn = do_mismatch;
  for (int r = 0; r < 3; r++) j.data[r] = calloc(10, sizeof(float));
  run_ranks(&j);
  for (int r = 0; r < 3; r++) assert_int_equal(j.st[r], BRISK_E_INVALID_ARGUMENT);
  /* The group still works afterwards. */
  j.fn = do_reduce;
  run_ranks(&j);
  for (int r = 0; r < 3; r++) assert_int_equal(j.st[r], BRISK_OK);
  free_group(&j);
}

/* Rank 2 fails before its third collective and aborts; the others, waiting
 * in it (or in a recv from rank 2), return BRISK_E_CANCELLED. */
static brisk_status do_fail(job *j, int r) {
  brisk_comm *c = j->ranks[r];
  brisk_status st;
  for (int step = 0; step < 5; step++) {
    if (r == 2 && step == 2) {
      brisk_comm_abort(c);
      return BRISK_E_INTERNAL; /* its own error */
    }
    if ((st = brisk_comm_all_reduce_sum(c, j->data[r], j->n)))
      /* The message (thread-local) says why. */
      return strstr(brisk_last_error(), "a rank of the group failed") ? st : BRISK_E_INTERNAL;
  }
  return BRISK_OK;
}

static brisk_status do_fail_p2p(job *j, int r) {
  brisk_comm *c = j->ranks[r];
  int32_t x = 0;
  if (r == 1) {
    brisk_comm_abort(c);
    return BRISK_E_INTERNAL;
  }
  return brisk_comm_recv(c, &x, sizeof x, 1);
}

static void test_failing_rank(void **state) {
  (void)state;
  job j;
  make_group(&j, 4);
  j.n = 64;
  j.fn = do_fail;
  for (int r = 0; r < 4; r++) j.data[r] = calloc(64, sizeof(float));
  run_ranks(&j);
  for (int r = 0; r < 4; r++)
    assert_int_equal(j.st[r], r == 2 ? BRISK_E_INTERNAL : BRISK_E_CANCELLED);
  free_group(&j);
  make_group(&j, 2);
  j.fn = do_fail_p2p;
  run_ranks(&j);
  assert_int_equal(j.st[0], BRISK_E_CANCELLED);
  free_group(&j);
}

static void test_arguments(void **state) {
  (void)state;
  brisk_comm *r[2];
  assert_int_equal(brisk_comm_threads_create(0, r), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_comm_threads_create(257, r), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_comm_threads_create(2, r), BRISK_OK);
  int32_t x = 0;
  assert_int_equal(brisk_comm_send(r[0], &x, 4, 0), BRISK_E_INVALID_ARGUMENT); /* itself */
  assert_int_equal(brisk_comm_recv(r[0], &x, 4, 2), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_comm_broadcast(r[0], &x, 4, 5), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_comm_all_reduce_sum(r[0], NULL, 3), BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_comm_all_reduce_sum(NULL, NULL, 0), BRISK_E_INVALID_ARGUMENT);
  brisk_comm_free(r[0]);
  brisk_comm_free(r[1]);
  brisk_comm_free(NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_tree_order),
      cmocka_unit_test(test_all_reduce),
      cmocka_unit_test(test_gather_broadcast_barrier),
      cmocka_unit_test(test_send_recv_ring),
      cmocka_unit_test(test_ranks_disagree),
      cmocka_unit_test(test_failing_rank),
      cmocka_unit_test(test_arguments),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
