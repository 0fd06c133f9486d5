/* The public constraint API (experimental section of brisk.h). */
#include "grammar/grammar.h"

#include "core/abi.h"
#include "core/alloc.h"
#include "core/error.h"

#include <string.h>

BRISK_API void brisk_constraint_params_init(brisk_constraint_params *p) {
  if (!p) return;
  memset(p, 0, sizeof *p);
  p->struct_size = sizeof *p;
}

BRISK_API brisk_status brisk_grammar_compile(const brisk_constraint_params *params,
                                             brisk_grammar **out) {
  if (!params || !out)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_grammar_compile: params or out is NULL");
  brisk_constraint_params copy;
  brisk_constraint_params_init(&copy);
  brisk_status read = brisk_abi_read(&brisk_abi_constraint_params, params, &copy);
  if (read) return read;
  params = &copy;
  const char *text = params->text;
  if (params->kind != BRISK_CONSTRAINT_JSON && !text)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_grammar_compile: text is NULL");
  char *gbnf = NULL;
  brisk_status st = BRISK_OK;
  const char *what = "grammar";
  switch (params->kind) {
  case BRISK_CONSTRAINT_GBNF: break;
  case BRISK_CONSTRAINT_JSON_SCHEMA:
    st = gr_schema_to_gbnf(text, strlen(text), &gbnf);
    what = "json_schema (generated grammar)";
    break;
  case BRISK_CONSTRAINT_JSON:
    text = gr_json_gbnf();
    what = "json (built-in grammar)";
    break;
  case BRISK_CONSTRAINT_REGEX:
    st = gr_regex_to_gbnf(text, strlen(text), &gbnf);
    what = "regex (generated grammar)";
    break;
  default:
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_grammar_compile: kind %d is invalid",
                       (int)params->kind);
  }
  if (st) return st;
  if (gbnf) text = gbnf;
  const char *root = params->kind == BRISK_CONSTRAINT_GBNF ? params->root : NULL;
  st = gr_parse(text, strlen(text), root, what, out);
  brisk_free(gbnf);
  return st;
}

BRISK_API void brisk_grammar_free(brisk_grammar *g) { gr_free(g); }

BRISK_API const char *brisk_grammar_gbnf(const brisk_grammar *g) { return g ? g->gbnf : NULL; }

BRISK_API brisk_status brisk_constraint_create(const brisk_model *model, const brisk_grammar *g,
                                               brisk_constraint **out) {
  if (!model || !g || !out)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_constraint_create: model, grammar or out is NULL");
  brisk_constraint *c = brisk_calloc(1, sizeof *c);
  if (!c) return brisk_error_oom();
  brisk_status st = BRISK_OK;
  if (!(c->k = brisk_calloc(1, sizeof *c->k)) || !(c->refs = brisk_calloc(1, sizeof *c->refs))) {
    st = brisk_error_oom();
    goto fail;
  }
  if ((st = gr_masker_init(c->k, g, model)) || (st = gr_masker_precompute(c->k))) goto fail;
  *c->refs = 1;
  if ((st = gr_state_init(c->k, &c->s))) goto fail;
  *out = c;
  return BRISK_OK;
fail:
  if (c->k) gr_masker_release(c->k);
  brisk_free(c->k);
  brisk_free(c->refs);
  brisk_free(c);
  return st;
}

brisk_status brisk_constraint_clone(const brisk_constraint *src, brisk_constraint **out) {
  brisk_constraint *c = brisk_calloc(1, sizeof *c);
  if (!c) return brisk_error_oom();
  c->k = src->k;
  c->refs = src->refs;
  c->g = src->g;
  if (gr_state_init(c->k, &c->s) || gr_state_copy(&c->s, &src->s)) {
    gr_state_release(&c->s);
    brisk_free(c);
    return brisk_error_oom();
  }
  __atomic_add_fetch(c->refs, 1, __ATOMIC_RELAXED); /* an engine clones on submit threads */
  *out = c;
  return BRISK_OK;
}

BRISK_API void brisk_constraint_free(brisk_constraint *c) {
  if (!c) return;
  gr_state_release(&c->s);
  if (c->refs && __atomic_sub_fetch(c->refs, 1, __ATOMIC_ACQ_REL) == 0) {
    gr_masker_release(c->k);
    brisk_free(c->k);
    brisk_free(c->refs);
    gr_free(c->g);
  }
  brisk_free(c);
}

BRISK_API brisk_status brisk_constraint_mask(brisk_constraint *c, const uint32_t **mask,
                                             int32_t *n_allowed) {
  if (!c || !mask)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_constraint_mask: constraint or mask is NULL");
  int32_t n;
  brisk_status st = gr_mask(c->k, &c->s, mask, &n);
  if (!st && n_allowed) *n_allowed = n;
  return st;
}

BRISK_API brisk_status brisk_constraint_accept(brisk_constraint *c, int32_t token) {
  if (!c)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_constraint_accept: constraint is NULL");
  return gr_accept(c->k, &c->s, token);
}

BRISK_API int brisk_constraint_is_complete(const brisk_constraint *c) {
  return c && (c->s.ended || gr_state_accepting(&c->s));
}

BRISK_API void brisk_constraint_reset(brisk_constraint *c) {
  if (c) gr_state_reset(c->k, &c->s);
}
