/* How long opening a model takes: brisk_model_load (parse + validate + bind,
 * weights mapped, not read) and then reading every weight page once, from a
 * cold page cache (evicted with posix_fadvise) and from a warm one.
 *   bench_load MODEL.gguf [repetitions] */
#include "brisk.h"
#include "core/clock.h"
#include "format/gguf.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static double ms_since(uint64_t t0) { return (double)(brisk_now_ns() - t0) / 1e6; }

static void evict(const char *path) {
  int fd = open(path, O_RDONLY);
  if (fd < 0) return;
  fdatasync(fd);
  posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  close(fd);
}

/* Reads one byte per 4 KiB page of every tensor: what the first forward pass
 * costs on top of the load. Returns a checksum so the reads stay. */
static unsigned touch_weights(const char *path, uint64_t *bytes) {
  brisk_gguf *g = NULL;
  if (brisk_gguf_open(path, &g) != BRISK_OK) return 0;
  unsigned sum = 0;
  *bytes = 0;
  for (int64_t i = 0; i < brisk_gguf_n_tensors(g); i++) {
    const brisk_gguf_tensor *t = brisk_gguf_tensor_at(g, i);
    const volatile unsigned char *p = t->data;
    for (uint64_t off = 0; off < t->n_bytes; off += 4096) sum += p[off];
    *bytes += t->n_bytes;
  }
  brisk_gguf_close(g);
  return sum;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: bench_load MODEL.gguf [repetitions]\n");
    return 1;
  }
  const char *path = argv[1];
  int reps = argc > 2 ? atoi(argv[2]) : 5;
  for (int cold = 1; cold >= 0; cold--) {
    double load_ms = 1e30, touch_ms = 1e30;
    uint64_t bytes = 0;
    for (int r = 0; r < reps; r++) {
      if (cold) evict(path);
      uint64_t t0 = brisk_now_ns();
      brisk_model *m = NULL;
      if (brisk_model_load(path, NULL, &m) != BRISK_OK) {
        fprintf(stderr, "bench_load: %s\n", brisk_last_error());
        return 1;
      }
      double l = ms_since(t0);
      brisk_model_free(m);
      if (cold) evict(path);
      t0 = brisk_now_ns();
      unsigned sum = touch_weights(path, &bytes);
      double t = ms_since(t0);
      if (sum == 0xdeadbeef) printf("(checksum)\n");
      if (l < load_ms) load_ms = l;
      if (t < touch_ms) touch_ms = t;
    }
    printf("%s page cache: brisk_model_load %.2f ms; first touch of all %.1f MiB of weight "
           "pages %.1f ms",
           cold ? "cold" : "warm", load_ms, (double)bytes / 1048576.0, touch_ms);
    if (cold) printf(" (%.2f GB/s from storage)", (double)bytes / (touch_ms * 1e6));
    printf("; best of %d\n", reps);
  }
  return 0;
}
