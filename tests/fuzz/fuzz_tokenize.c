/* Fuzz target for the tokenizer: tokenize then detokenize arbitrary bytes
 * with two small vocabularies built once in code (SPM with byte fallback,
 * and byte-level BPE with the GPT-2 pre-tokenizer). Both are lossless, so
 * detokenize(tokenize(x)) must give x back, and the streaming detokenizer
 * must give the same bytes.
 *
 * Input: one flags byte (bit 0 SPM/BPE, bit 1 add_special, bit 2
 * parse_special), then the text. */
#include "fuzz_target.h"

#include "tokenizer/pretok.h"
#include "tokenizer/utf8.h"
#include "tokenizer/vocab_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static brisk_vocab *g_vocab[2];

/* Tokens: all 256 bytes, specials, then a few multi-byte pieces. */
static brisk_vocab *make_vocab(int bpe) {
  static const char *words[] = {"th", "the", "he", "in", "ing", "an", "and", "er", "on"};
  char store[512][16];
  brisk_vocab_str toks[512];
  uint16_t attrs[512];
  float scores[512];
  brisk_vocab_str ml[16], mr[16];
  size_t n = 0, nm = 0;
  for (int b = 0; b < 256; b++, n++) {
    size_t len;
    if (bpe) {
      len = brisk_utf8_encode(brisk_byte_to_cp((uint8_t)b), store[n]);
    } else {
      len = (size_t)snprintf(store[n], sizeof store[n], "<0x%02X>", b);
    }
    toks[n] = (brisk_vocab_str){store[n], len};
    attrs[n] = bpe ? BRISK_TOKEN_ATTR_NORMAL : BRISK_TOKEN_ATTR_BYTE;
    scores[n] = 0;
  }
  const char *specials[] = {"<unk>", "<s>", "</s>", "<|user|>"};
  const uint16_t kinds[] = {BRISK_TOKEN_ATTR_UNKNOWN, BRISK_TOKEN_ATTR_CONTROL,
                            BRISK_TOKEN_ATTR_CONTROL, BRISK_TOKEN_ATTR_USER_DEFINED};
  for (int i = 0; i < 4; i++, n++) {
    toks[n] = (brisk_vocab_str){specials[i], strlen(specials[i])};
    attrs[n] = kinds[i];
    scores[n] = 0;
  }
  const char *spm_units[] = {"\xE2\x96\x81", "t", "h", "e", "i", "n", "g", "a", "d", "r", "o"};
  if (!bpe) {
    for (size_t i = 0; i < sizeof spm_units / sizeof spm_units[0]; i++, n++) {
      toks[n] = (brisk_vocab_str){spm_units[i], strlen(spm_units[i])};
      attrs[n] = BRISK_TOKEN_ATTR_NORMAL;
      scores[n] = -10;
    }
  }
  for (size_t i = 0; i < sizeof words / sizeof words[0]; i++, n++) {
    toks[n] = (brisk_vocab_str){words[i], strlen(words[i])};
    attrs[n] = BRISK_TOKEN_ATTR_NORMAL;
    scores[n] = -(float)i;
    size_t wl = strlen(words[i]);
    ml[nm] = (brisk_vocab_str){words[i], wl - 1};
    mr[nm] = (brisk_vocab_str){words[i] + wl - 1, 1};
    nm++;
  }
  brisk_vocab_desc d;
  brisk_vocab_desc_init(&d);
  d.type = bpe ? BRISK_VOCAB_BPE : BRISK_VOCAB_SPM;
  d.n_tokens = (uint32_t)n;
  d.tokens = toks, d.attrs = attrs, d.scores = scores;
  d.special[BRISK_VOCAB_UNK] = 256, d.special[BRISK_VOCAB_BOS] = 257,
  d.special[BRISK_VOCAB_EOS] = 258;
  d.add_bos = true;
  brisk_pretok *pre = NULL;
  if (bpe) {
    d.byte_level = true;
    d.n_merges = nm, d.merge_left = ml, d.merge_right = mr;
    if (brisk_pretok_create(&pre) != BRISK_OK ||
        brisk_pretok_add_named(pre, "llama3", NULL) != BRISK_OK)
      abort();
  } else {
    d.escape_spaces = d.add_space_prefix = d.strip_leading_space = d.byte_fallback = true;
  }
  brisk_vocab *v = NULL;
  if (brisk_vocab_build(&d, pre, NULL, 0, &v) != BRISK_OK) abort();
  return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  if (!g_vocab[0]) g_vocab[0] = make_vocab(0), g_vocab[1] = make_vocab(1);
  const brisk_vocab *v = g_vocab[data[0] & 1];
  bool add_special = (data[0] & 2) != 0, parse_special = (data[0] & 4) != 0;
  const char *text = (const char *)data + 1;
  size_t len = size - 1, n = 0;
  brisk_status st = brisk_vocab_tokenize(v, text, len, add_special, parse_special, NULL, 0, &n);
  if (st != BRISK_OK && st != BRISK_E_BUFFER_TOO_SMALL) abort();
  int32_t *toks = malloc((n ? n : 1) * sizeof *toks);
  size_t n2 = 0;
  if (brisk_vocab_tokenize(v, text, len, add_special, parse_special, toks, n, &n2) != BRISK_OK ||
      n2 != n)
    abort();
  uint32_t flags = BRISK_DETOK_RENDER_SPECIAL | (add_special ? BRISK_DETOK_REMOVE_SPECIAL : 0);
  size_t dn = 0;
  st = brisk_vocab_detokenize(v, toks, n, flags, NULL, 0, &dn);
  if (st != BRISK_OK && st != BRISK_E_BUFFER_TOO_SMALL) abort();
  char *back = malloc(dn + 1);
  if (brisk_vocab_detokenize(v, toks, n, flags, back, dn, &dn) != BRISK_OK) abort();
  /* Lossless: with specials parsed they render as their text again. The one
   * exception: SPM spells spaces U+2581, so a literal U+2581 comes back as a
   * space. */
  bool lossless = (data[0] & 1) || !memmem(text, len, "\xE2\x96\x81", 3);
  if (lossless && (dn != len || memcmp(back, text, len) != 0)) abort();
  brisk_detok_stream *s = NULL;
  if (brisk_detok_stream_create(v, BRISK_DETOK_RENDER_SPECIAL, &s) != BRISK_OK) abort();
  size_t off = 0, start = add_special && n > 0 ? 1 : 0; /* skip the BOS it added */
  if (!add_special) start = 0;
  for (size_t i = start; i <= n; i++) {
    const char *p;
    size_t k;
    if (i < n)
      st = brisk_detok_stream_push(s, toks[i], &p, &k);
    else
      st = brisk_detok_stream_flush(s, &p, &k);
    if (st != BRISK_OK || off + k > dn || memcmp(p, back + off, k) != 0) abort();
    off += k;
  }
  if (off != dn) abort();
  brisk_detok_stream_free(s);
  free(back);
  free(toks);
  return 0;
}
