/* A naive float64 reference forward pass (tests only). */
#ifndef BRISK_TEST_REF_FORWARD_H
#define BRISK_TEST_REF_FORWARD_H

#include "model/model.h"

typedef struct ref_model ref_model;

/* A reference run of `m` for up to n_ctx positions of one sequence. */
ref_model *ref_create(const brisk_model *m, int64_t n_ctx);
void ref_free(ref_model *r);
/* Feeds the next token; writes n_vocab logits. */
void ref_eval(ref_model *r, int32_t token, double *logits);

#endif
