/* The step cost model (see budget.h). The fit solves the decayed normal
 * equations by projected coordinate descent, which keeps every coefficient
 * >= 0: with few or collinear observations (say, only decode steps of one
 * size) plain least squares could fit a negative per-token cost and promise
 * that more tokens take less time. */
#include "engine/budget.h"

#include <string.h>

/* Weight of the previous fit's data at each new observation (memory of
 * about 1 / (1 - DECAY) = 20 steps). */
#define DECAY 0.95
/* Relative ridge on the diagonal, so collinear features stay solvable. */
#define RIDGE 1e-6
#define SWEEPS 64

void brisk_step_plan_begin(brisk_step_plan *p) {
  memset(p, 0, sizeof *p);
  p->x[0] = 1;
}

/* Keys attended by tokens at pos0 .. pos0 + count - 1 (each sees itself and
 * every earlier position). */
static double keys(int32_t pos0, int32_t count) {
  return (double)count * ((double)pos0 + 1) + (double)count * ((double)count - 1) / 2;
}

void brisk_step_plan_add(brisk_step_plan *p, int32_t pos0, int32_t count, int logits) {
  if (count < 1) return;
  p->x[1] += logits ? 1 : 0;
  p->x[2] += count - (logits ? 1 : 0);
  p->x[3] += keys(pos0, count);
  p->n_tokens += count;
}

static double dot(const double *w, const double *x) {
  double s = 0;
  for (int i = 0; i < BRISK_COST_N; i++) s += w[i] * x[i];
  return s;
}

double brisk_step_cost_predict(const brisk_step_cost *m, const brisk_step_plan *p) {
  return m->n_obs < BRISK_COST_MIN_OBS ? 0 : dot(m->w, p->x);
}

static int fits(const brisk_step_cost *m, const brisk_step_plan *p, double budget_ns, int32_t pos0,
                int32_t count, int logits) {
  if (m->n_obs < BRISK_COST_MIN_OBS) return p->n_tokens + count <= BRISK_COST_PROBE_TOKENS;
  brisk_step_plan q = *p;
  brisk_step_plan_add(&q, pos0, count, logits);
  return dot(m->w, q.x) <= budget_ns;
}

int32_t brisk_step_cost_fit(const brisk_step_cost *m, const brisk_step_plan *p, double budget_ns,
                            int32_t pos0, int32_t count, int logits_at_end) {
  int32_t floor = p->n_tokens == 0 ? 1 : 0;
  if (count < 1) return 0;
  if (fits(m, p, budget_ns, pos0, count, logits_at_end)) return count;
  /* The largest shorter prefix that fits: the cost grows with its length. */
  int32_t lo = 0, hi = count - 1;
  while (lo < hi) {
    int32_t mid = lo + (hi - lo + 1) / 2;
    if (fits(m, p, budget_ns, pos0, mid, 0))
      lo = mid;
    else
      hi = mid - 1;
  }
  if (lo >= floor) return lo;
  /* An empty step would stall: take one token (with logits if it is the
   * request's last). */
  return 1;
}

void brisk_step_cost_observe(brisk_step_cost *m, const brisk_step_plan *p, double ns) {
  for (int i = 0; i < BRISK_COST_N; i++) {
    for (int j = 0; j < BRISK_COST_N; j++) m->xtx[i][j] = DECAY * m->xtx[i][j] + p->x[i] * p->x[j];
    m->xty[i] = DECAY * m->xty[i] + p->x[i] * ns;
  }
  m->n_obs++;
  for (int sweep = 0; sweep < SWEEPS; sweep++)
    for (int i = 0; i < BRISK_COST_N; i++) {
      double a = m->xtx[i][i] * (1 + RIDGE);
      if (a <= 0) {
        m->w[i] = 0; /* a feature never seen yet */
        continue;
      }
      double r = m->xty[i];
      for (int j = 0; j < BRISK_COST_N; j++)
        if (j != i) r -= m->xtx[i][j] * m->w[j];
      m->w[i] = r > 0 ? r / a : 0;
    }
}
