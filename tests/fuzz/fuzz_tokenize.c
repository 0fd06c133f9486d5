/* Fuzz target for the tokenizer: tokenize then detokenize arbitrary bytes
 * with small vocabularies built in code: SPM with byte fallback, and a BPE
 * vocabulary for every GGUF pre-tokenizer name brisk knows, made as the GGUF
 * loader makes it for that name (byte-level, or raw UTF-8 with <0xXX> byte
 * fallback; its regexes, ignore_merges, clean_spaces, newline words). Each
 * is lossless, so detokenize(tokenize(x)) must give x back, and the
 * streaming detokenizer must give the same bytes.
 *
 * Input: one flags byte (bit 0 SPM/BPE, bit 1 add_special, bit 2
 * parse_special); for BPE one byte choosing the pre-tokenizer name (modulo
 * their count); then the text. */
#include "fuzz_target.h"

#include "tokenizer/pretok.h"
#include "tokenizer/utf8.h"
#include "tokenizer/vocab_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static brisk_vocab *g_spm;
static brisk_vocab *g_bpe[256]; /* by pre-tokenizer name index, made on first use */

/* Tokens: all 256 bytes, specials, then a few multi-byte pieces. */
static brisk_vocab *make_vocab(int bpe, const char *pre_name) {
  static const char *words[] = {"th", "the", "he", "in", "ing", "an", "and", "er", "on"};
  char store[512][16];
  brisk_vocab_str toks[512];
  uint16_t attrs[512];
  float scores[512];
  brisk_vocab_str ml[16], mr[16];
  size_t n = 0, nm = 0;
  brisk_pretok_info info = {0};
  if (bpe && !brisk_pretok_lookup(pre_name, &info)) abort();
  bool byte_level = bpe && !info.raw_utf8;
  for (int b = 0; b < 256; b++, n++) {
    size_t len;
    if (byte_level) {
      len = brisk_utf8_encode(brisk_byte_to_cp((uint8_t)b), store[n]);
    } else {
      len = (size_t)snprintf(store[n], sizeof store[n], "<0x%02X>", b);
    }
    toks[n] = (brisk_vocab_str){store[n], len};
    attrs[n] = byte_level ? BRISK_TOKEN_ATTR_NORMAL : BRISK_TOKEN_ATTR_BYTE;
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
    /* As vocab_gguf.c sets a BPE vocabulary up from its pre-tokenizer name
     * (without the U+2581 space normalizer of the escape_spaces names: their
     * text keeps its spaces and takes the byte tokens). */
    d.pre_name = pre_name;
    d.byte_level = byte_level;
    d.byte_fallback = info.raw_utf8;
    d.escape_spaces = info.escape_spaces;
    d.ignore_merges = info.ignore_merges;
    d.clean_spaces = info.clean_spaces;
    d.newline_words = info.newline_words;
    d.n_merges = nm, d.merge_left = ml, d.merge_right = mr;
    if (brisk_pretok_create(&pre) != BRISK_OK ||
        brisk_pretok_add_named(pre, pre_name, NULL) != BRISK_OK)
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
  bool bpe = data[0] & 1, escaped = !bpe;
  bool add_special = (data[0] & 2) != 0, parse_special = (data[0] & 4) != 0;
  const brisk_vocab *v;
  size_t skip = 1;
  if (!bpe) {
    if (!g_spm) g_spm = make_vocab(0, NULL);
    v = g_spm;
  } else {
    if (size < 2) return 0;
    size_t names = brisk_pretok_n_names(), i = data[1] % names;
    if (names > 256) abort(); /* g_bpe's size */
    if (!g_bpe[i]) g_bpe[i] = make_vocab(1, brisk_pretok_name_at(i));
    brisk_pretok_info info;
    brisk_pretok_lookup(brisk_pretok_name_at(i), &info);
    escaped = info.escape_spaces;
    v = g_bpe[i];
    skip = 2;
  }
  const char *text = (const char *)data + skip;
  size_t len = size - skip, n = 0;
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
   * exception: SPM (and BPE with escaped spaces) spells spaces U+2581, so a
   * literal U+2581 comes back as a space. */
  bool lossless = !escaped || !memmem(text, len, "\xE2\x96\x81", 3);
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
