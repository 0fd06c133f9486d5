/* Stream capture and graphs for the SIMT emulation (simt_graph.h). */
#include "simt_graph.h"

/* The standard headers first: simt_emu.h defines CUDA's qualifier names
 * (__noinline__, ...) that libstdc++ uses in attributes. */
#include <memory>
#include <new>
#include <string.h>
#include <vector>

#include "simt_emu.h"

enum { UPDATE_FAILURE = 910 };

namespace {
enum node_kind { KERNEL, COPY, FILL };

struct node {
  node_kind kind;
  /* Kernels: the function (identity for updates), configuration, and the
   * copied parameters with the function that runs and frees them. */
  const void *kernel = nullptr;
  dim3 grid, block;
  size_t smem = 0;
  void (*body)(void *) = nullptr;
  std::shared_ptr<void> params;
  /* Copies and fills. */
  void *dst = nullptr;
  const void *src = nullptr;
  size_t bytes = 0;
  int value = 0;
};
} // namespace

struct brisk_simt_graph {
  std::vector<node> nodes;
};

static __thread brisk_simt_graph *tls_capture;

namespace brisk_simt {
bool capturing() { return tls_capture != nullptr; }

int capture_kernel(const void *kernel, dim3 grid, dim3 block, size_t smem, void (*body)(void *),
                   void *params, void (*release)(void *)) {
  node n;
  n.kind = KERNEL;
  n.kernel = kernel;
  n.grid = grid;
  n.block = block;
  n.smem = smem;
  n.body = body;
  n.params = std::shared_ptr<void>(params, release);
  tls_capture->nodes.push_back(std::move(n));
  return OK;
}
} // namespace brisk_simt

extern "C" {

int brisk_simt_capture_begin(void) {
  if (tls_capture) return 1;
  tls_capture = new (std::nothrow) brisk_simt_graph;
  return tls_capture ? 0 : 2;
}

bool brisk_simt_capturing(void) { return tls_capture != nullptr; }

int brisk_simt_capture_copy(void *dst, const void *src, size_t bytes) {
  if (!tls_capture) return 1;
  node n;
  n.kind = COPY;
  n.dst = dst;
  n.src = src;
  n.bytes = bytes;
  tls_capture->nodes.push_back(n);
  return 0;
}

int brisk_simt_capture_fill(void *dst, int value, size_t bytes) {
  if (!tls_capture) return 1;
  node n;
  n.kind = FILL;
  n.dst = dst;
  n.value = value;
  n.bytes = bytes;
  tls_capture->nodes.push_back(n);
  return 0;
}

int brisk_simt_capture_end(brisk_simt_graph **out) {
  *out = tls_capture;
  tls_capture = nullptr;
  return *out ? 0 : 1;
}

int brisk_simt_graph_instantiate(const brisk_simt_graph *g, brisk_simt_graph **exec) {
  *exec = g ? new (std::nothrow) brisk_simt_graph(*g) : nullptr;
  return *exec ? 0 : 1;
}

int brisk_simt_graph_update(brisk_simt_graph *exec, const brisk_simt_graph *g) {
  if (exec->nodes.size() != g->nodes.size()) return UPDATE_FAILURE;
  for (size_t i = 0; i < g->nodes.size(); i++)
    if (exec->nodes[i].kind != g->nodes[i].kind || exec->nodes[i].kernel != g->nodes[i].kernel)
      return UPDATE_FAILURE;
  exec->nodes = g->nodes;
  return 0;
}

int brisk_simt_graph_launch(const brisk_simt_graph *exec) {
  for (const node &n : exec->nodes) {
    switch (n.kind) {
    case KERNEL: {
      int st = brisk_simt::run(n.grid, n.block, n.smem, n.body, n.params.get());
      if (st) return st;
      break;
    }
    case COPY: memmove(n.dst, n.src, n.bytes); break;
    case FILL: memset(n.dst, n.value, n.bytes); break;
    }
  }
  return 0;
}

void brisk_simt_graph_free(brisk_simt_graph *g) { delete g; }

size_t brisk_simt_graph_nodes(const brisk_simt_graph *g) { return g ? g->nodes.size() : 0; }

} // extern "C"
