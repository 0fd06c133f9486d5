/* Constrained requests (brisk_engine_submit_constrained): each completion
 * gets a constraint state over one shared mask cache, set on its sampler,
 * so every sampled token keeps the output in the constraint's language.
 * Prompt-lookup drafts go through the same sampling one row at a time
 * (step.c's produce), so speculation stays exact; the draft-model path
 * samples drafts elsewhere and is refused with a constraint. */
#include "grammar/grammar.h"

#include "engine/engine_internal.h"

#include "core/abi.h"
#include "core/error.h"

brisk_status brisk_engine_constrain(brisk_engine *e, brisk_engine_request *first,
                                    const brisk_constraint_params *cp) {
  brisk_constraint_params copy;
  brisk_constraint_params_init(&copy);
  brisk_status read = brisk_abi_read(&brisk_abi_constraint_params, cp, &copy);
  if (read) return read;
  cp = &copy;
  if (cp->kind == BRISK_CONSTRAINT_NONE) return BRISK_OK;
  if (first->spec_use_draft)
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "brisk_engine_submit_constrained: drafting with a draft model "
                       "(spec_draft_model) is not supported with a constraint; prompt-lookup "
                       "speculation is");
  brisk_grammar *g;
  brisk_status st = brisk_grammar_compile(cp, &g);
  if (st) return st;
  if ((st = brisk_constraint_create(e->model, g, &first->constraint))) {
    brisk_grammar_free(g);
    return st;
  }
  first->constraint->g = g; /* freed with the last completion's constraint */
  for (brisk_engine_request *r = first->next; r && r->leader == first; r = r->next)
    if ((st = brisk_constraint_clone(first->constraint, &r->constraint))) return st;
  for (brisk_engine_request *r = first; r && r->leader == first; r = r->next)
    if ((st = brisk_sampler_set_constraint(r->sampler, r->constraint))) return st;
  return BRISK_OK;
}

brisk_finish_reason brisk_engine_constraint_blocked(brisk_engine_request *r) {
  const uint32_t *mask;
  int32_t n;
  if (brisk_constraint_mask(r->constraint, &mask, &n)) return BRISK_FINISH_ERROR;
  if (n > 0) return BRISK_FINISH_NONE;
  /* Nothing allowed: a whole match with no end-of-generation token in the
   * vocabulary ends like a stop string; anything else cannot go on. */
  return brisk_constraint_is_complete(r->constraint) ? BRISK_FINISH_STOP : BRISK_FINISH_CONSTRAINT;
}

BRISK_API brisk_status brisk_engine_submit_constrained(brisk_engine *e,
                                                       const brisk_request_params *params,
                                                       const brisk_constraint_params *constraint,
                                                       uint64_t *id) {
  return brisk_engine_submit_with(e, params, constraint, id);
}
