#include "serve_run.h"

#include "core/alloc.h"
#include "core/clock.h"

#include <errno.h>
#include <sys/resource.h>
#include <string.h>
#include <time.h>

double sb_now_s(void) { return (double)brisk_now_ns() * 1e-9; }

double sb_cpu_s(void) {
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
  return (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
         1e-6 * (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

void sb_sleep_until(double t) {
  for (;;) {
    const double left = t - sb_now_s();
    if (left <= 0) return;
    struct timespec ts = {.tv_sec = (time_t)left,
                          .tv_nsec = (long)((left - (double)(time_t)left) * 1e9)};
    if (nanosleep(&ts, NULL) == 0) return;
    if (errno != EINTR) return;
  }
}

bool sb_run(const sb_common *common, const sb_config *c, const wl_workload *w, sb_result *out) {
  memset(out, 0, sizeof *out);
  return c->kind == SB_STATIC ? sb_run_static(common, c, w, out) : sb_run_engine(common, c, w, out);
}

void sb_result_free(sb_result *r) {
  brisk_free(r->req);
  brisk_free(r->itl);
  r->req = NULL;
  r->itl = NULL;
}

bool sb_itl_init(sb_itl *itl, const wl_workload *w) {
  memset(itl, 0, sizeof *itl);
  for (int32_t i = 0; i < w->n; i++) itl->cap += (size_t)w->req[i].n_output - 1;
  itl->n_req = w->n;
  itl->gap = brisk_calloc(itl->cap ? itl->cap : 1, sizeof *itl->gap);
  itl->t_last = brisk_calloc((size_t)w->n, sizeof *itl->t_last);
  if (!itl->gap || !itl->t_last) {
    sb_itl_free(itl);
    return false;
  }
  for (int32_t i = 0; i < w->n; i++) itl->t_last[i] = -1;
  return true;
}

void sb_itl_token(sb_itl *itl, int32_t i, double t) {
  if (i < 0 || i >= itl->n_req) return;
  if (itl->t_last[i] >= 0 && itl->n < itl->cap) itl->gap[itl->n++] = t - itl->t_last[i];
  itl->t_last[i] = t;
}

void sb_itl_finish(sb_itl *itl, sb_result *out) {
  out->itl = itl->gap;
  out->n_itl = itl->n;
  itl->gap = NULL;
  sb_itl_free(itl);
}

void sb_itl_free(sb_itl *itl) {
  brisk_free(itl->gap);
  brisk_free(itl->t_last);
  memset(itl, 0, sizeof *itl);
}
