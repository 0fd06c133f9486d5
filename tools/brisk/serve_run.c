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
  r->req = NULL;
}
