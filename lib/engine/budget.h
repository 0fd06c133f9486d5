/* The step cost model behind the step time budget: a step's wall time is
 * fitted as fixed + a * (tokens with logits) + b * (tokens without) +
 * c * (attended keys), the coefficients non-negative, by least squares over
 * exponentially decayed past steps, so it follows a machine whose speed
 * drifts. The scheduler asks it how many of a request's tokens still fit. */
#ifndef BRISK_ENGINE_BUDGET_H
#define BRISK_ENGINE_BUDGET_H

#include <stdint.h>

enum { BRISK_COST_N = 4 }; /* features: 1, logit tokens, other tokens, attended keys */

typedef struct brisk_step_cost {
  double xtx[BRISK_COST_N][BRISK_COST_N]; /* decayed sum of x x^T */
  double xty[BRISK_COST_N];               /* decayed sum of x * ns */
  double w[BRISK_COST_N];                 /* the fit, ns per unit of each feature */
  int32_t n_obs;                          /* steps observed */
} brisk_step_cost;

/* One step's batch as the model sees it. */
typedef struct brisk_step_plan {
  double x[BRISK_COST_N];
  int32_t n_tokens;
} brisk_step_plan;

/* Steps observed before the fit is trusted; until then a budgeted step
 * takes at most BRISK_COST_PROBE_TOKENS tokens. */
enum { BRISK_COST_MIN_OBS = 3, BRISK_COST_PROBE_TOKENS = 16 };

void brisk_step_plan_begin(brisk_step_plan *p);
/* Adds `count` tokens of one sequence at positions pos0, pos0 + 1, ...,
 * the last one with logits if `logits`. */
void brisk_step_plan_add(brisk_step_plan *p, int32_t pos0, int32_t count, int logits);

/* Predicted ns of a plan; 0 while the model has fewer than MIN_OBS steps. */
double brisk_step_cost_predict(const brisk_step_cost *m, const brisk_step_plan *p);

/* How many of `count` tokens (at pos0, ...; the last with logits if
 * `logits_at_end`) fit in budget_ns on top of *p: `count` itself, or a
 * shorter prefix (then without logits), or 0; at least 1 when p is empty,
 * so every step makes progress. */
int32_t brisk_step_cost_fit(const brisk_step_cost *m, const brisk_step_plan *p, double budget_ns,
                            int32_t pos0, int32_t count, int logits_at_end);

/* Folds in a measured step and refits. */
void brisk_step_cost_observe(brisk_step_cost *m, const brisk_step_plan *p, double ns);

#endif
