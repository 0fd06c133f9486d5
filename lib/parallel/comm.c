/* The communicator calls: argument checks, then the implementation. */
#include "parallel/comm.h"

#include "core/error.h"

float brisk_comm_tree_sum(const float *v, int n) {
  if (n == 1) return v[0];
  /* Split at the largest power of two below n: ((r0 + r1) + (r2 + r3)) for
   * 4, ((r0 + r1) + r2) for 3. */
  int half = 1;
  while (half * 2 < n) half *= 2;
  return brisk_comm_tree_sum(v, half) + brisk_comm_tree_sum(v + half, n - half);
}

static brisk_status bad(const char *what, const brisk_comm *c) {
  return brisk_error(BRISK_E_INVALID_ARGUMENT, "%s: %s", what,
                     c ? "NULL buffer or size out of range" : "communicator is NULL");
}

brisk_status brisk_comm_all_reduce_sum(brisk_comm *c, float *buf, int64_t n) {
  if (!c || n < 0 || (n > 0 && !buf) || (uint64_t)n > SIZE_MAX / sizeof(float))
    return bad("all_reduce_sum", c);
  return c->ops->all_reduce_sum(c, buf, n);
}

brisk_status brisk_comm_all_gather(brisk_comm *c, const void *send, size_t bytes, void *recv) {
  if (!c || (bytes > 0 && (!send || !recv)) || (c && bytes > SIZE_MAX / (size_t)c->size))
    return bad("all_gather", c);
  return c->ops->all_gather(c, send, bytes, recv);
}

brisk_status brisk_comm_broadcast(brisk_comm *c, void *buf, size_t bytes, int root) {
  if (!c || (bytes > 0 && !buf)) return bad("broadcast", c);
  if (root < 0 || root >= c->size)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "broadcast: root %d is outside [0, %d)", root,
                       c->size);
  return c->ops->broadcast(c, buf, bytes, root);
}

static brisk_status check_peer(const char *what, const brisk_comm *c, int peer) {
  if (peer < 0 || peer >= c->size || peer == c->rank)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "%s: peer %d of rank %d is not another rank of [0, %d)", what, peer, c->rank,
                       c->size);
  return BRISK_OK;
}

brisk_status brisk_comm_send(brisk_comm *c, const void *buf, size_t bytes, int peer) {
  if (!c || (bytes > 0 && !buf)) return bad("send", c);
  brisk_status st = check_peer("send", c, peer);
  return st ? st : c->ops->send(c, buf, bytes, peer);
}

brisk_status brisk_comm_recv(brisk_comm *c, void *buf, size_t bytes, int peer) {
  if (!c || (bytes > 0 && !buf)) return bad("recv", c);
  brisk_status st = check_peer("recv", c, peer);
  return st ? st : c->ops->recv(c, buf, bytes, peer);
}

brisk_status brisk_comm_barrier(brisk_comm *c) {
  if (!c) return bad("barrier", c);
  return c->ops->barrier(c);
}

void brisk_comm_abort(brisk_comm *c) {
  if (c) c->ops->abort(c);
}

void brisk_comm_free(brisk_comm *c) {
  if (c) c->ops->destroy(c);
}
