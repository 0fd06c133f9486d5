/* WordPiece tokenizers (tokenizer/wordpiece.h): loading, normalization,
 * pre-tokenization and the greedy longest-match. */
#include "tokenizer/wordpiece_internal.h"

#include "core/alloc.h"
#include "core/checked.h"
#include "core/error.h"
#include "tokenizer/bert_unicode.h"
#include "tokenizer/table.h"
#include "tokenizer/utf8.h"

#include <json-c/json.h>
#include <string.h>

void brisk_wordpiece_free(brisk_wordpiece *wp) {
  if (!wp) return;
  brisk_strtab_free(&wp->vocab);
  brisk_free(wp->added);
  brisk_free(wp);
}

int32_t brisk_wordpiece_n_tokens(const brisk_wordpiece *wp) { return wp->n_tokens; }

const char *brisk_wordpiece_token(const brisk_wordpiece *wp, int32_t id) {
  return id >= 0 && id < wp->n_tokens ? brisk_strtab_str(&wp->vocab, id) : NULL;
}

int32_t brisk_wordpiece_cls(const brisk_wordpiece *wp) { return wp->cls; }
int32_t brisk_wordpiece_sep(const brisk_wordpiece *wp) { return wp->sep; }

brisk_wordpiece *brisk_wordpiece_new(void) {
  brisk_wordpiece *wp = brisk_calloc(1, sizeof *wp);
  if (!wp) return NULL;
  brisk_strtab_init(&wp->vocab);
  wp->unk = wp->cls = wp->sep = -1;
  wp->clean_text = wp->chinese_chars = wp->strip_accents = wp->lowercase = true;
  wp->split_words = true;
  wp->max_word_chars = 100;
  memcpy(wp->prefix, "##", 3);
  wp->prefix_len = 2;
  return wp;
}

/* Looks up the special tokens by their conventional texts. */
void brisk_wordpiece_default_specials(brisk_wordpiece *wp) {
  if (wp->unk < 0) wp->unk = brisk_strtab_find(&wp->vocab, "[UNK]", 5);
  if (wp->cls < 0) wp->cls = brisk_strtab_find(&wp->vocab, "[CLS]", 5);
  if (wp->sep < 0) wp->sep = brisk_strtab_find(&wp->vocab, "[SEP]", 5);
}

/* ---- loading ------------------------------------------------------------ */

static json_object *get(json_object *o, const char *key) {
  json_object *v = NULL;
  if (!o || !json_object_is_type(o, json_type_object)) return NULL;
  if (!json_object_object_get_ex(o, key, &v)) return NULL;
  return json_object_is_type(v, json_type_null) ? NULL : v;
}

static const char *get_str(json_object *o, const char *key) {
  json_object *v = get(o, key);
  return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}

static bool get_bool(json_object *o, const char *key, bool dflt) {
  json_object *v = get(o, key);
  return v && json_object_is_type(v, json_type_boolean) ? json_object_get_boolean(v) : dflt;
}

static brisk_status read_normalizer(brisk_wordpiece *wp, json_object *n) {
  if (!n) {
    wp->clean_text = wp->chinese_chars = wp->strip_accents = wp->lowercase = false;
    return BRISK_OK;
  }
  const char *t = get_str(n, "type");
  if (!t || strcmp(t, "BertNormalizer"))
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "tokenizer.json: normalizer '%s' with a WordPiece model is not supported "
                       "(BertNormalizer is)",
                       t ? t : "(no type)");
  wp->clean_text = get_bool(n, "clean_text", true);
  wp->chinese_chars = get_bool(n, "handle_chinese_chars", true);
  wp->lowercase = get_bool(n, "lowercase", true);
  /* strip_accents null follows lowercase, as in transformers. */
  wp->strip_accents = get_bool(n, "strip_accents", wp->lowercase);
  return BRISK_OK;
}

static brisk_status read_pre_tokenizer(brisk_wordpiece *wp, json_object *p) {
  if (!p) {
    wp->split_words = false;
    return BRISK_OK;
  }
  const char *t = get_str(p, "type");
  if (!t || strcmp(t, "BertPreTokenizer"))
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "tokenizer.json: pre_tokenizer '%s' with a WordPiece model is not "
                       "supported (BertPreTokenizer is)",
                       t ? t : "(no type)");
  return BRISK_OK;
}

/* The id a post-processor gives a special token: TemplateProcessing's
 * special_tokens[name].ids[0], BertProcessing's [name, id] pairs. */
static void read_post_processor(brisk_wordpiece *wp, json_object *pp) {
  const char *t = get_str(pp, "type");
  if (!t) return;
  if (!strcmp(t, "BertProcessing") || !strcmp(t, "RobertaProcessing")) {
    const char *keys[2] = {"cls", "sep"};
    int32_t *dst[2] = {&wp->cls, &wp->sep};
    for (int i = 0; i < 2; i++) {
      json_object *pair = get(pp, keys[i]);
      if (pair && json_object_is_type(pair, json_type_array) &&
          json_object_array_length(pair) == 2) {
        int64_t id = json_object_get_int64(json_object_array_get_idx(pair, 1));
        if (id >= 0 && id < wp->n_tokens) *dst[i] = (int32_t)id;
      }
    }
    return;
  }
  if (strcmp(t, "TemplateProcessing")) return;
  json_object *single = get(pp, "single"), *specials = get(pp, "special_tokens");
  if (!single || !json_object_is_type(single, json_type_array)) return;
  size_t n = json_object_array_length(single);
  for (size_t i = 0; i < n; i++) {
    json_object *st = get(json_object_array_get_idx(single, i), "SpecialToken");
    const char *name = get_str(st, "id");
    json_object *ids = get(get(specials, name ? name : ""), "ids");
    if (!name || !ids || !json_object_is_type(ids, json_type_array) ||
        json_object_array_length(ids) != 1)
      continue;
    int64_t id = json_object_get_int64(json_object_array_get_idx(ids, 0));
    if (id < 0 || id >= wp->n_tokens) continue;
    /* The first special of the template opens a sequence, a later one closes it. */
    bool first = i == 0;
    if (first)
      wp->cls = (int32_t)id;
    else
      wp->sep = (int32_t)id;
  }
}

/* model.vocab {text: id} into the string table in id order. */
static brisk_status read_vocab(brisk_wordpiece *wp, json_object *vocab) {
  size_t n = (size_t)json_object_object_length(vocab);
  if (n == 0 || n > (1u << 24))
    return brisk_error(BRISK_E_FORMAT, "tokenizer.json: model.vocab has %zu tokens", n);
  const char **text = brisk_calloc(n, sizeof *text);
  size_t *len = brisk_calloc(n, sizeof *len);
  brisk_status st = BRISK_OK;
  if (!text || !len) {
    st = brisk_error_oom();
    goto done;
  }
  json_object_object_foreach(vocab, key, val) {
    if (!json_object_is_type(val, json_type_int)) {
      st = brisk_error(BRISK_E_FORMAT, "tokenizer.json: the id of token '%.64s' is not an integer",
                       key);
      goto done;
    }
    int64_t id = json_object_get_int64(val);
    if (id < 0 || (uint64_t)id >= n || text[id]) {
      st = brisk_error(BRISK_E_FORMAT,
                       "tokenizer.json: token '%.64s' has id %lld; ids must be 0..%zu, each once",
                       key, (long long)id, n - 1);
      goto done;
    }
    text[id] = key;
    len[id] = strlen(key);
  }
  for (size_t i = 0; i < n && !st; i++) {
    int32_t id;
    st = brisk_strtab_append(&wp->vocab, text[i], len[i], &id);
  }
  wp->n_tokens = (int32_t)n;
done:
  brisk_free(text);
  brisk_free(len);
  return st;
}

static brisk_status read_added(brisk_wordpiece *wp, json_object *added) {
  if (!added) return BRISK_OK;
  if (!json_object_is_type(added, json_type_array))
    return brisk_error(BRISK_E_FORMAT, "tokenizer.json: added_tokens is not an array");
  size_t n = json_object_array_length(added);
  if (n == 0) return BRISK_OK;
  if (!(wp->added = brisk_calloc(n, sizeof *wp->added))) return brisk_error_oom();
  for (size_t i = 0; i < n; i++) {
    json_object *a = json_object_array_get_idx(added, i), *idv = get(a, "id");
    const char *content = get_str(a, "content");
    if (!content || !idv || !json_object_is_type(idv, json_type_int))
      return brisk_error(BRISK_E_FORMAT, "tokenizer.json: added_tokens[%zu] lacks id or content",
                         i);
    int64_t id = json_object_get_int64(idv);
    if (id < 0 || id >= wp->n_tokens || strcmp(brisk_strtab_str(&wp->vocab, (int32_t)id), content))
      return brisk_error(BRISK_E_UNSUPPORTED,
                         "tokenizer.json: added token '%.64s' (id %lld) is not the vocabulary's "
                         "token of that id",
                         content, (long long)id);
    if (content[0] && get_bool(a, "special", false)) wp->added[wp->n_added++] = (int32_t)id;
  }
  return BRISK_OK;
}

static brisk_status from_json(brisk_wordpiece *wp, json_object *root) {
  json_object *model = get(root, "model");
  const char *mt = get_str(model, "type");
  if (!mt) return brisk_error(BRISK_E_FORMAT, "tokenizer.json: no model type");
  if (strcmp(mt, "WordPiece"))
    return brisk_error(BRISK_E_UNSUPPORTED, "tokenizer.json: model type '%s' is not WordPiece", mt);
  json_object *vocab = get(model, "vocab");
  if (!vocab || !json_object_is_type(vocab, json_type_object))
    return brisk_error(BRISK_E_FORMAT, "tokenizer.json: model.vocab is missing or not an object");
  brisk_status st;
  if ((st = read_vocab(wp, vocab))) return st;
  const char *prefix = get_str(model, "continuing_subword_prefix");
  if (prefix) {
    size_t pl = strlen(prefix);
    if (pl > WP_MAX_PREFIX)
      return brisk_error(BRISK_E_UNSUPPORTED,
                         "tokenizer.json: continuing_subword_prefix longer than %d bytes",
                         WP_MAX_PREFIX);
    memcpy(wp->prefix, prefix, pl + 1);
    wp->prefix_len = pl;
  }
  json_object *mx = get(model, "max_input_chars_per_word");
  if (mx && json_object_is_type(mx, json_type_int)) {
    int64_t v = json_object_get_int64(mx);
    wp->max_word_chars = v < 1 ? 1 : v > (1 << 20) ? (1u << 20) : (uint32_t)v;
  }
  const char *unk = get_str(model, "unk_token");
  if (unk) wp->unk = brisk_strtab_find(&wp->vocab, unk, strlen(unk));
  if ((st = read_normalizer(wp, get(root, "normalizer"))) ||
      (st = read_pre_tokenizer(wp, get(root, "pre_tokenizer"))) ||
      (st = read_added(wp, get(root, "added_tokens"))))
    return st;
  read_post_processor(wp, get(root, "post_processor"));
  brisk_wordpiece_default_specials(wp);
  if (wp->unk < 0)
    return brisk_error(BRISK_E_FORMAT, "tokenizer.json: the WordPiece model has no unknown token");
  return BRISK_OK;
}

brisk_status brisk_wordpiece_from_hf_json(const char *json, size_t len, brisk_wordpiece **out) {
  if (!json || !out)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "wordpiece_from_hf_json: NULL argument");
  *out = NULL;
  if (len > INT32_MAX) return brisk_error(BRISK_E_FORMAT, "tokenizer.json is too large");
  json_tokener *tok = json_tokener_new_ex(64);
  if (!tok) return brisk_error_oom();
  json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
  json_object *root = json_tokener_parse_ex(tok, json, (int)len);
  enum json_tokener_error je = json_tokener_get_error(tok);
  if (!root || je != json_tokener_success || json_tokener_get_parse_end(tok) != len) {
    /* Trailing bytes after the object, or a parse error. */
    size_t at = json_tokener_get_parse_end(tok);
    json_tokener_free(tok);
    json_object_put(root);
    return brisk_error(BRISK_E_FORMAT, "tokenizer.json: %s at byte %zu",
                       je != json_tokener_success ? json_tokener_error_desc(je) : "unexpected data",
                       at);
  }
  json_tokener_free(tok);
  brisk_wordpiece *wp = brisk_wordpiece_new();
  brisk_status st = wp ? from_json(wp, root) : brisk_error_oom();
  json_object_put(root);
  if (st) {
    brisk_wordpiece_free(wp);
    return st;
  }
  *out = wp;
  return BRISK_OK;
}

brisk_status brisk_wordpiece_from_vocab_txt(const char *text, size_t len, bool lowercase,
                                            brisk_wordpiece **out) {
  if (!text || !out)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "wordpiece_from_vocab_txt: NULL argument");
  *out = NULL;
  brisk_wordpiece *wp = brisk_wordpiece_new();
  if (!wp) return brisk_error_oom();
  wp->lowercase = wp->strip_accents = lowercase;
  brisk_status st = BRISK_OK;
  size_t i = 0;
  while (i < len && !st) {
    size_t j = i;
    while (j < len && text[j] != '\n') j++;
    size_t e = j;
    if (e > i && text[e - 1] == '\r') e--;
    int32_t id;
    if (wp->vocab.n >= (1u << 24))
      st = brisk_error(BRISK_E_FORMAT, "vocab.txt has more than %u tokens", 1u << 24);
    else
      st = brisk_strtab_append(&wp->vocab, text + i, e - i, &id);
    i = j + 1;
  }
  wp->n_tokens = (int32_t)wp->vocab.n;
  if (!st && wp->n_tokens == 0) st = brisk_error(BRISK_E_FORMAT, "vocab.txt is empty");
  if (!st) {
    brisk_wordpiece_default_specials(wp);
    if (wp->unk < 0) st = brisk_error(BRISK_E_FORMAT, "vocab.txt has no [UNK] token");
  }
  /* BERT's special tokens, matched in the text as transformers'
   * BertTokenizer does (they are never split). */
  static const char *const specials[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  if (!st && !(wp->added = brisk_calloc(5, sizeof *wp->added))) st = brisk_error_oom();
  for (size_t k = 0; k < 5 && !st; k++) {
    int32_t id = brisk_strtab_find(&wp->vocab, specials[k], strlen(specials[k]));
    if (id >= 0) wp->added[wp->n_added++] = id;
  }
  if (st) {
    brisk_wordpiece_free(wp);
    return st;
  }
  *out = wp;
  return BRISK_OK;
}

/* ---- encoding ----------------------------------------------------------- */

typedef struct wp_out {
  int32_t *ids;
  size_t n, cap;
} wp_out;

static brisk_status push(wp_out *o, int32_t id) {
  if (brisk_grow((void **)&o->ids, &o->cap, o->n + 1, sizeof *o->ids)) return brisk_error_oom();
  o->ids[o->n++] = id;
  return BRISK_OK;
}

/* Code points of the normalized text, with a scratch buffer for a word's
 * UTF-8 and the byte offset of each of its characters. */
typedef struct wp_scratch {
  uint32_t *cp;
  size_t n, cap;
  char *word;
  size_t word_cap;
  size_t *char_off;
  size_t char_cap;
  char *piece;
  size_t piece_cap;
} wp_scratch;

static brisk_status put_cp(wp_scratch *s, uint32_t cp) {
  if (brisk_grow((void **)&s->cp, &s->cap, s->n + 1, sizeof *s->cp)) return brisk_error_oom();
  s->cp[s->n++] = cp;
  return BRISK_OK;
}

/* BertNormalizer over text[0, len), appended to s->cp. */
static brisk_status normalize(const brisk_wordpiece *wp, const char *text, size_t len,
                              wp_scratch *s) {
  const unsigned char *u = (const unsigned char *)text;
  brisk_status st = BRISK_OK;
  for (size_t i = 0; i < len && !st;) {
    uint32_t cp;
    size_t k = brisk_utf8_seq(u + i, len - i, &cp);
    if (k == 0) cp = 0xFFFD, k = 1;
    i += k;
    if (wp->clean_text) {
      bool keep_ctl = cp == '\t' || cp == '\n' || cp == '\r';
      if (cp == 0 || cp == 0xFFFD || (!keep_ctl && brisk_cp_is_other(cp))) continue;
      if (brisk_cp_is_space(cp)) cp = ' ';
    }
    uint32_t parts[3] = {cp, 0, 0};
    size_t np = 1;
    if (wp->strip_accents) np = brisk_cp_strip_accents(cp, parts);
    for (size_t p = 0; p < np && !st; p++) {
      uint32_t lo[3] = {parts[p], 0, 0};
      size_t nl = wp->lowercase ? brisk_cp_lower(parts[p], lo) : 1;
      for (size_t q = 0; q < nl && !st; q++) {
        bool cjk = wp->chinese_chars && brisk_cp_is_cjk(lo[q]);
        if (cjk) st = put_cp(s, ' ');
        if (!st) st = put_cp(s, lo[q]);
        if (!st && cjk) st = put_cp(s, ' ');
      }
    }
  }
  return st;
}

/* The WordPiece model on one word (code points w[0, n)). */
static brisk_status word_pieces(const brisk_wordpiece *wp, const uint32_t *w, size_t n,
                                wp_scratch *s, wp_out *o) {
  if (n > wp->max_word_chars) return push(o, wp->unk);
  /* UTF-8 of the word after room for the prefix, and character offsets. */
  size_t bytes_cap, room;
  if (brisk_mul_overflow_size(n, 4, &bytes_cap) ||
      brisk_add_overflow_size(bytes_cap, WP_MAX_PREFIX + 1, &room))
    return brisk_error(BRISK_E_UNSUPPORTED, "wordpiece: word too long");
  if (brisk_grow((void **)&s->word, &s->word_cap, room, 1) ||
      brisk_grow((void **)&s->char_off, &s->char_cap, n + 1, sizeof *s->char_off))
    return brisk_error_oom();
  /* s->word: the prefix, then the word; a continuation piece is looked up
   * as the prefix copied right before its bytes, into the piece buffer. */
  char *base = s->word + WP_MAX_PREFIX;
  size_t len = 0;
  for (size_t i = 0; i < n; i++) {
    s->char_off[i] = len;
    len += brisk_utf8_encode(w[i], base + len);
  }
  s->char_off[n] = len;
  if (brisk_grow((void **)&s->piece, &s->piece_cap, len + WP_MAX_PREFIX + 1, 1))
    return brisk_error_oom();
  size_t first = o->n;
  for (size_t start = 0; start < n;) {
    int32_t id = -1;
    size_t end = n;
    for (; end > start; end--) {
      size_t plen = s->char_off[end] - s->char_off[start];
      const char *p = base + s->char_off[start];
      if (start > 0) {
        memcpy(s->piece, wp->prefix, wp->prefix_len);
        memcpy(s->piece + wp->prefix_len, p, plen);
        p = s->piece;
        plen += wp->prefix_len;
      }
      id = brisk_strtab_find(&wp->vocab, p, plen);
      if (id >= 0) break;
    }
    if (id < 0) { /* an unmatched rest: the whole word is unknown */
      o->n = first;
      return push(o, wp->unk);
    }
    brisk_status st = push(o, id);
    if (st) return st;
    start = end;
  }
  return BRISK_OK;
}

/* Pre-tokenizes s->cp and runs WordPiece on each word. */
static brisk_status encode_segment(const brisk_wordpiece *wp, wp_scratch *s, wp_out *o) {
  size_t i = 0, n = s->n;
  brisk_status st = BRISK_OK;
  if (!wp->split_words) return n ? word_pieces(wp, s->cp, n, s, o) : BRISK_OK;
  while (i < n && !st) {
    if (brisk_cp_is_space(s->cp[i])) {
      i++;
      continue;
    }
    if (brisk_cp_is_punct(s->cp[i])) {
      st = word_pieces(wp, s->cp + i, 1, s, o);
      i++;
      continue;
    }
    size_t j = i;
    while (j < n && !brisk_cp_is_space(s->cp[j]) && !brisk_cp_is_punct(s->cp[j])) j++;
    st = word_pieces(wp, s->cp + i, j - i, s, o);
    i = j;
  }
  return st;
}

/* The longest special token at text[0, len), or -1. */
static int32_t match_added(const brisk_wordpiece *wp, const char *text, size_t len, size_t *mlen) {
  int32_t best = -1;
  *mlen = 0;
  for (size_t a = 0; a < wp->n_added; a++) {
    int32_t id = wp->added[a];
    size_t l = wp->vocab.len[id];
    if (l > *mlen && l <= len && !memcmp(text, brisk_strtab_str(&wp->vocab, id), l)) {
      best = id;
      *mlen = l;
    }
  }
  return best;
}

brisk_status brisk_wordpiece_encode(const brisk_wordpiece *wp, const char *text, size_t len,
                                    bool add_special, int32_t **ids, size_t *n) {
  if (!wp || (!text && len) || !ids || !n)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "wordpiece_encode: NULL argument");
  *ids = NULL;
  *n = 0;
  wp_out o = {0};
  wp_scratch s = {0};
  brisk_status st = BRISK_OK;
  if (add_special && wp->cls >= 0) st = push(&o, wp->cls);
  size_t seg = 0;
  for (size_t i = 0; i <= len && !st;) {
    size_t mlen = 0;
    int32_t special = i < len ? match_added(wp, text + i, len - i, &mlen) : -1;
    if (i < len && special < 0) {
      i++;
      continue;
    }
    /* The text before a special token (or the end) is normalized and split. */
    s.n = 0;
    if (!(st = normalize(wp, text + seg, i - seg, &s))) st = encode_segment(wp, &s, &o);
    if (!st && special >= 0) st = push(&o, special);
    if (i == len) break;
    i += mlen;
    seg = i;
  }
  if (!st && add_special && wp->sep >= 0) st = push(&o, wp->sep);
  brisk_free(s.cp);
  brisk_free(s.word);
  brisk_free(s.char_off);
  brisk_free(s.piece);
  if (st) {
    brisk_free(o.ids);
    return st;
  }
  *ids = o.ids;
  *n = o.n;
  return BRISK_OK;
}
