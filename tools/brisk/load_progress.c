#include "load_progress.h"

#include "core/cpu.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void cli_bar_draw(cli_bar *b, double f, const char *extra) {
  if (f < 0) f = 0;
  if (f > 1) f = 1;
  int pct = (int)(f * 100);
  double t = now_s();
  if (b->drawn && t - b->last_draw < 0.1 && (pct != 100 || b->last_pct == 100)) return;
  static const char hashes[] = "##############################";
  fprintf(stderr, "\r%s [%-30.*s] %3d%%  %s\033[K", b->label, (int)(f * 30), hashes, pct,
          extra ? extra : "");
  fflush(stderr);
  b->drawn = true;
  b->last_pct = pct;
  b->last_draw = t;
}

void cli_bar_clear(cli_bar *b) {
  if (b->drawn) fputs("\r\033[K", stderr), fflush(stderr);
  b->drawn = false;
}

/* The files a model path reads its weights from: the path itself, or the
 * .safetensors files of a Hugging Face folder. */
typedef struct file_list {
  char **paths;
  uint64_t *sizes;
  size_t n;
  uint64_t total;
} file_list;

static void add_file(file_list *l, const char *path) {
  struct stat st;
  if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return;
  char **p = realloc(l->paths, (l->n + 1) * sizeof *p);
  if (p) l->paths = p;
  uint64_t *s = realloc(l->sizes, (l->n + 1) * sizeof *s);
  if (s) l->sizes = s;
  char *copy = strdup(path);
  if (!p || !s || !copy) {
    free(copy);
    return;
  }
  l->paths[l->n] = copy;
  l->sizes[l->n++] = (uint64_t)st.st_size;
  l->total += (uint64_t)st.st_size;
}

static void list_files(const char *path, file_list *l) {
  struct stat st;
  if (stat(path, &st) != 0) return;
  if (!S_ISDIR(st.st_mode)) {
    add_file(l, path);
    return;
  }
  DIR *d = opendir(path);
  if (!d) return;
  for (struct dirent *e; (e = readdir(d));) {
    size_t n = strlen(e->d_name);
    if (n > 12 && !strcmp(e->d_name + n - 12, ".safetensors")) {
      char full[4096];
      if (snprintf(full, sizeof full, "%s/%s", path, e->d_name) < (int)sizeof full)
        add_file(l, full);
    }
  }
  closedir(d);
}

/* Reads every file once (into the page cache), drawing the bar in bytes.
 * Best effort: a file that cannot be read is left to the loader to report. */
static void read_through(const file_list *l, cli_bar *bar) {
  enum { CHUNK = 4 << 20 };
  char *buf = malloc(CHUNK);
  if (!buf) return;
  uint64_t done = 0;
  char extra[64];
  for (size_t i = 0; i < l->n; i++) {
    int fd = open(l->paths[i], O_RDONLY);
    if (fd < 0) continue;
    posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    for (ssize_t got; (got = read(fd, buf, CHUNK)) > 0;) {
      done += (uint64_t)got;
      snprintf(extra, sizeof extra, "%.0f / %.0f MiB", (double)done / 1048576.0,
               (double)l->total / 1048576.0);
      cli_bar_draw(bar, l->total ? (double)done / (double)l->total : 1.0, extra);
    }
    close(fd);
  }
  free(buf);
}

static int on_progress(float f, void *user) {
  cli_bar_draw(user, f, "preparing the weights");
  return 1;
}

brisk_status cli_load_model(const char *path, const brisk_model_params *mp, bool show,
                            brisk_model **out) {
  if (!show) return brisk_model_load(path, mp, out);
  double t0 = now_s();
  file_list l = {0};
  list_files(path, &l);
  cli_bar bar = {.label = "loading"};
  /* Reading ahead pays only when the page cache can keep what is read;
   * a model larger than that would be read twice. */
  const uint64_t avail = brisk_memory_available();
  if (!mp->vocab_only && (avail == 0 || l.total <= avail / 4 * 3)) read_through(&l, &bar);
  brisk_model_params p = *mp;
  p.progress = on_progress;
  p.progress_user_data = &bar;
  brisk_status st = brisk_model_load(path, &p, out);
  cli_bar_clear(&bar);
  if (!st)
    fprintf(stderr, "loaded %s (%.0f MiB) in %.1f s\n", path, (double)l.total / 1048576.0,
            now_s() - t0);
  for (size_t i = 0; i < l.n; i++) free(l.paths[i]);
  free(l.paths);
  free(l.sizes);
  return st;
}
