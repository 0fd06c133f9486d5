/* A draft model must speak the target's vocabulary: same size, and every
 * token id standing for the same bytes. */
#include "spec/spec_internal.h"

#include "core/alloc.h"
#include "core/error.h"

#include <string.h>

/* The bytes of token t into *buf (grown as needed); *len their count.
 * Returns BRISK_E_UNSUPPORTED for a model without vocabulary. */
static brisk_status piece(const brisk_model *m, int32_t t, char **buf, size_t *cap, size_t *len) {
  brisk_status st = brisk_token_to_piece(m, t, BRISK_DETOKENIZE_RENDER_SPECIAL, *buf, *cap, len);
  if (st != BRISK_E_BUFFER_TOO_SMALL) return st;
  if (brisk_grow((void **)buf, cap, *len, 1)) return brisk_error_oom();
  return brisk_token_to_piece(m, t, BRISK_DETOKENIZE_RENDER_SPECIAL, *buf, *cap, len);
}

brisk_status brisk_spec_check_vocab(const brisk_model *target, const brisk_model *draft) {
  int32_t nt = brisk_model_n_vocab(target), nd = brisk_model_n_vocab(draft);
  if (nt != nd)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_spec_create: the draft model's vocabulary has %d tokens, the "
                       "target's %d (first differing token id %d)",
                       nd, nt, nt < nd ? nt : nd);
  int ht = brisk_model_tokenizer(target)[0] != 0, hd = brisk_model_tokenizer(draft)[0] != 0;
  if (ht != hd)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_spec_create: the %s model has a vocabulary, the %s model none",
                       ht ? "target" : "draft", ht ? "draft" : "target");
  if (!ht) return BRISK_OK; /* ids only: equal sizes is all there is to compare */
  char *bt = NULL, *bd = NULL;
  size_t ct = 0, cd = 0, lt = 0, ld = 0;
  brisk_status st = BRISK_OK;
  for (int32_t t = 0; t < nt && !st; t++) {
    if ((st = piece(target, t, &bt, &ct, &lt)) || (st = piece(draft, t, &bd, &cd, &ld))) break;
    if (lt == ld && (lt == 0 || memcmp(bt, bd, lt) == 0)) continue;
    /* Texts are shown as stored: token pieces are short, but cap them. */
    st = brisk_error(BRISK_E_INVALID_ARGUMENT,
                     "brisk_spec_create: vocabularies differ at token id %d: target \"%.*s\", "
                     "draft \"%.*s\"",
                     t, (int)(lt < 64 ? lt : 64), lt ? bt : "", (int)(ld < 64 ? ld : 64),
                     ld ? bd : "");
  }
  brisk_free(bt);
  brisk_free(bd);
  return st;
}
