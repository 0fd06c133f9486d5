/* Constrained requests (brisk_engine_submit_constrained): each completion
 * gets a constraint state over one shared mask cache, set on its sampler,
 * so every sampled token keeps the output in the constraint's language.
 * Prompt-lookup drafts go through the same sampling one row at a time
 * (step.c's produce), so speculation stays exact; the draft-model path
 * samples drafts elsewhere and is refused with a constraint. */
#include "grammar/grammar.h"

#include "engine/engine_internal.h"

#include "core/abi.h"
#include "core/alloc.h"
#include "core/error.h"
#include "core/hash.h"

#include <string.h>

/* The engine's constraint cache: the last BRISK_ENGINE_CCONST distinct
 * constraints (kind, text, root), each a template constraint whose mask
 * caches every request with that constraint clones, so a server's repeated
 * schema pays the vocabulary sort, the position walks and the mask cache's
 * warm-up once. Looked up and filled under e->mu (submit runs on any
 * thread); the masker itself is used by the stepping thread only, and its
 * owner count is atomic, so a clone made while a step runs is safe. A
 * template is evicted least recently used; requests still holding its
 * masker keep it alive. */

static uint64_t cconst_hash(const brisk_constraint_params *cp) {
  uint64_t h = brisk_hash64(&cp->kind, sizeof cp->kind, 0xC0);
  if (cp->text) h = brisk_hash64(cp->text, strlen(cp->text), h);
  if (cp->root) h = brisk_hash64(cp->root, strlen(cp->root), h ^ 0x5A);
  return h;
}

static int same_str(const char *a, const char *b) { return a == b || (a && b && !strcmp(a, b)); }

static char *dup_or_null(const char *s, int *oom) {
  if (!s) return NULL;
  size_t n = strlen(s) + 1;
  char *d = brisk_malloc(n);
  if (!d)
    *oom = 1;
  else
    memcpy(d, s, n);
  return d;
}

/* The cached template for cp (a clone of it, in *out), under e->mu; 0 if
 * none. */
static brisk_status cconst_find(brisk_engine *e, const brisk_constraint_params *cp, uint64_t h,
                                brisk_constraint **out) {
  *out = NULL;
  if (!e->cconst) return BRISK_OK;
  for (int i = 0; i < BRISK_ENGINE_CCONST; i++) {
    struct brisk_engine_cconst *c = &e->cconst[i];
    if (!c->used || c->hash != h || c->kind != (int)cp->kind ||
        !same_str(c->text, cp->kind == BRISK_CONSTRAINT_JSON ? NULL : cp->text) ||
        !same_str(c->root, cp->root))
      continue;
    c->used = ++e->cconst_clock;
    return brisk_constraint_clone(c->tmpl, out);
  }
  return BRISK_OK;
}

/* Keeps a clone of `made` as the template of cp, under e->mu. Failing to
 * cache is not an error: the request has its constraint either way. */
static void cconst_insert(brisk_engine *e, const brisk_constraint_params *cp, uint64_t h,
                          const brisk_constraint *made) {
  if (!e->cconst && !(e->cconst = brisk_calloc(BRISK_ENGINE_CCONST, sizeof *e->cconst))) return;
  int slot = 0;
  for (int i = 0; i < BRISK_ENGINE_CCONST; i++)
    if (e->cconst[i].used < e->cconst[slot].used) slot = i;
  struct brisk_engine_cconst *c = &e->cconst[slot];
  int oom = 0;
  char *text = dup_or_null(cp->kind == BRISK_CONSTRAINT_JSON ? NULL : cp->text, &oom);
  char *root = dup_or_null(cp->root, &oom);
  brisk_constraint *tmpl = NULL;
  if (oom || brisk_constraint_clone(made, &tmpl)) {
    brisk_free(text);
    brisk_free(root);
    return;
  }
  gr_state_reset(tmpl->k, &tmpl->s);
  brisk_free(c->text);
  brisk_free(c->root);
  brisk_constraint_free(c->tmpl);
  *c = (struct brisk_engine_cconst){h, ++e->cconst_clock, (int)cp->kind, text, root, tmpl};
}

void brisk_engine_constraints_free(brisk_engine *e) {
  if (!e->cconst) return;
  for (int i = 0; i < BRISK_ENGINE_CCONST; i++) {
    brisk_free(e->cconst[i].text);
    brisk_free(e->cconst[i].root);
    brisk_constraint_free(e->cconst[i].tmpl);
  }
  brisk_free(e->cconst);
  e->cconst = NULL;
}

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
  uint64_t h = cconst_hash(cp);
  pthread_mutex_lock(&e->mu);
  brisk_status st = cconst_find(e, cp, h, &first->constraint);
  pthread_mutex_unlock(&e->mu);
  if (st) return st;
  if (!first->constraint) {
    /* Compiled outside the lock: it sorts the vocabulary and walks it. */
    brisk_grammar *g;
    if ((st = brisk_grammar_compile(cp, &g))) return st;
    if ((st = brisk_constraint_create(e->model, g, &first->constraint))) {
      brisk_grammar_free(g);
      return st;
    }
    first->constraint->g = g; /* freed with the last owner of the masker */
    pthread_mutex_lock(&e->mu);
    cconst_insert(e, cp, h, first->constraint);
    pthread_mutex_unlock(&e->mu);
  }
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
