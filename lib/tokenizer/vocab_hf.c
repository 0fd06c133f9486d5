/* A vocabulary from a Hugging Face tokenizer.json (BPE models), via json-c.
 * json-c allocates with the C library's malloc: the parsed tree is not
 * counted by brisk's allocator; everything kept afterwards is. */
#include "tokenizer/vocab_internal.h"

#include "core/alloc.h"
#include "core/error.h"
#include "core/log.h"

#include <json-c/json.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define HF_MAX_FILE (256u << 20)

typedef struct hf_load {
  brisk_vocab_desc d;
  brisk_vocab_str *toks; /* [n_tokens] */
  uint16_t *attrs;       /* [n_tokens] */
  brisk_vocab_str *ml, *mr;
  brisk_pretok *pre;
  brisk_norm_op *norm;
  size_t n_norm, norm_cap;
  bool saw_bytelevel;
} hf_load;

static json_object *get(json_object *o, const char *key) {
  json_object *v = NULL;
  if (!o || !json_object_is_type(o, json_type_object)) return NULL;
  if (!json_object_object_get_ex(o, key, &v)) return NULL;
  return json_object_is_type(v, json_type_null) ? NULL : v;
}

static const char *get_str(json_object *o, const char *key, size_t *len) {
  json_object *v = get(o, key);
  if (!v || !json_object_is_type(v, json_type_string)) return NULL;
  if (len) *len = (size_t)json_object_get_string_len(v);
  return json_object_get_string(v);
}

static bool get_bool(json_object *o, const char *key, bool dflt) {
  json_object *v = get(o, key);
  return v && json_object_is_type(v, json_type_boolean) ? json_object_get_boolean(v) : dflt;
}

static const char *type_of(json_object *o) {
  const char *t = get_str(o, "type", NULL);
  return t ? t : "";
}

static brisk_status add_norm(hf_load *L, brisk_norm_kind kind, const char *from, size_t from_len,
                             const char *to, size_t to_len) {
  if (brisk_grow((void **)&L->norm, &L->norm_cap, L->n_norm + 1, sizeof *L->norm) != 0)
    return brisk_error_oom();
  brisk_norm_op *op = &L->norm[L->n_norm];
  memset(op, 0, sizeof *op);
  op->kind = kind;
  op->from = brisk_strndup(from ? from : "", from_len);
  op->to = brisk_strndup(to ? to : "", to_len);
  if (!op->from || !op->to) {
    brisk_free(op->from);
    brisk_free(op->to);
    return brisk_error_oom();
  }
  op->from_len = from_len, op->to_len = to_len;
  L->n_norm++;
  return BRISK_OK;
}

static brisk_status ensure_pre(hf_load *L) {
  return L->pre ? BRISK_OK : brisk_pretok_create(&L->pre);
}

static brisk_status normalizer(hf_load *L, json_object *n) {
  if (!n) return BRISK_OK;
  const char *t = type_of(n);
  if (strcmp(t, "Sequence") == 0) {
    json_object *list = get(n, "normalizers");
    size_t k =
        list && json_object_is_type(list, json_type_array) ? json_object_array_length(list) : 0;
    for (size_t i = 0; i < k; i++) {
      brisk_status st = normalizer(L, json_object_array_get_idx(list, i));
      if (st != BRISK_OK) return st;
    }
    return BRISK_OK;
  }
  if (strcmp(t, "Prepend") == 0) {
    size_t len = 0;
    const char *p = get_str(n, "prepend", &len);
    if (!p)
      return brisk_error(BRISK_E_FORMAT, "tokenizer.json: Prepend normalizer without 'prepend'");
    return add_norm(L, BRISK_NORM_PREPEND, NULL, 0, p, len);
  }
  if (strcmp(t, "Replace") == 0) {
    size_t fl = 0, tl = 0;
    const char *from = get_str(get(n, "pattern"), "String", &fl);
    const char *to = get_str(n, "content", &tl);
    if (!from || !to)
      return brisk_error(
          BRISK_E_UNSUPPORTED,
          "tokenizer.json: Replace normalizer with a regex pattern is not supported");
    return add_norm(L, BRISK_NORM_REPLACE, from, fl, to, tl);
  }
  if (strcmp(t, "NFC") == 0 || strcmp(t, "NFKC") == 0 || strcmp(t, "NFD") == 0 ||
      strcmp(t, "NFKD") == 0) {
    BRISK_WARN("tokenizer.json: %s normalizer not applied; input text is assumed normalized", t);
    return BRISK_OK;
  }
  return brisk_error(BRISK_E_UNSUPPORTED, "tokenizer.json: normalizer '%s' is not supported", t);
}

static brisk_status behavior_of(json_object *o, brisk_split_behavior *b) {
  static const char *const names[] = {"Isolated", "Removed", "MergedWithPrevious", "MergedWithNext",
                                      "Contiguous"};
  const char *s = get_str(o, "behavior", NULL);
  if (!s) s = "Isolated";
  for (int i = 0; i < 5; i++) {
    if (strcmp(s, names[i]) == 0) {
      *b = (brisk_split_behavior)i;
      return BRISK_OK;
    }
  }
  return brisk_error(BRISK_E_UNSUPPORTED, "tokenizer.json: split behavior '%s' is not supported",
                     s);
}

static brisk_status pre_tokenizer(hf_load *L, json_object *p) {
  if (!p) return BRISK_OK;
  const char *t = type_of(p);
  brisk_status st;
  if (strcmp(t, "Sequence") == 0) {
    json_object *list = get(p, "pretokenizers");
    size_t k =
        list && json_object_is_type(list, json_type_array) ? json_object_array_length(list) : 0;
    for (size_t i = 0; i < k; i++) {
      st = pre_tokenizer(L, json_object_array_get_idx(list, i));
      if (st != BRISK_OK) return st;
    }
    return BRISK_OK;
  }
  if ((st = ensure_pre(L)) != BRISK_OK) return st;
  size_t before = brisk_pretok_n_steps(L->pre);
  if (strcmp(t, "ByteLevel") == 0) {
    L->saw_bytelevel = true;
    if (get_bool(p, "add_prefix_space", false)) {
      if (before > 0)
        return brisk_error(BRISK_E_UNSUPPORTED,
                           "tokenizer.json: ByteLevel add_prefix_space after other pre-tokenizers");
      st = add_norm(L, BRISK_NORM_PREPEND_UNLESS, NULL, 0, " ", 1);
      if (st != BRISK_OK) return st;
    }
    if (get_bool(p, "use_regex", true))
      return brisk_pretok_add(L->pre, brisk_pretok_bytelevel_pattern, false, BRISK_SPLIT_ISOLATED,
                              false);
    return BRISK_OK;
  }
  if (strcmp(t, "Split") == 0) {
    json_object *pat = get(p, "pattern");
    size_t len = 0;
    const char *lit = get_str(pat, "String", &len);
    const char *re = get_str(pat, "Regex", &len);
    brisk_split_behavior b;
    if ((st = behavior_of(p, &b)) != BRISK_OK) return st;
    if (!lit && !re) return brisk_error(BRISK_E_FORMAT, "tokenizer.json: Split without a pattern");
    if (strlen(lit ? lit : re) != len)
      return brisk_error(BRISK_E_UNSUPPORTED, "tokenizer.json: Split pattern with a NUL byte");
    return brisk_pretok_add(L->pre, lit ? lit : re, lit != NULL, b, get_bool(p, "invert", false));
  }
  if (strcmp(t, "Digits") == 0)
    return brisk_pretok_add(L->pre, get_bool(p, "individual_digits", false) ? "\\p{N}" : "\\p{N}+",
                            false, BRISK_SPLIT_ISOLATED, false);
  if (strcmp(t, "Punctuation") == 0) {
    brisk_split_behavior b;
    if ((st = behavior_of(p, &b)) != BRISK_OK) return st;
    /* Rust's is_ascii_punctuation plus the Unicode punctuation categories. */
    return brisk_pretok_add(L->pre, "[\\p{P}!-/:-@\\[-`{-~]", false, b, false);
  }
  if (strcmp(t, "Whitespace") == 0)
    return brisk_pretok_add(L->pre, "\\w+|[^\\w\\s]+", false, BRISK_SPLIT_REMOVED, true);
  if (strcmp(t, "WhitespaceSplit") == 0)
    return brisk_pretok_add(L->pre, "\\s+", false, BRISK_SPLIT_REMOVED, false);
  if (strcmp(t, "Metaspace") == 0) {
    if (before > 0)
      return brisk_error(BRISK_E_UNSUPPORTED,
                         "tokenizer.json: Metaspace after other pre-tokenizers is not supported");
    size_t rl = 0;
    const char *r = get_str(p, "replacement", &rl);
    if (!r) r = "\xE2\x96\x81", rl = 3;
    const char *scheme = get_str(p, "prepend_scheme", NULL);
    if (!scheme) scheme = get_bool(p, "add_prefix_space", true) ? "always" : "never";
    st = add_norm(L, BRISK_NORM_REPLACE, " ", 1, r, rl);
    if (st == BRISK_OK && strcmp(scheme, "always") == 0)
      st = add_norm(L, BRISK_NORM_PREPEND_UNLESS, NULL, 0, r, rl);
    else if (st == BRISK_OK && strcmp(scheme, "first") == 0)
      st = add_norm(L, BRISK_NORM_PREPEND_FIRST, NULL, 0, r, rl);
    if (st == BRISK_OK && get_bool(p, "split", true)) {
      char lit[16];
      if (rl >= sizeof lit)
        return brisk_error(BRISK_E_UNSUPPORTED, "tokenizer.json: long Metaspace");
      memcpy(lit, r, rl);
      lit[rl] = '\0';
      st = brisk_pretok_add(L->pre, lit, true, BRISK_SPLIT_MERGED_NEXT, false);
    }
    L->d.escape_spaces = true;
    return st;
  }
  return brisk_error(BRISK_E_UNSUPPORTED, "tokenizer.json: pre-tokenizer '%s' is not supported", t);
}

static void decoder(hf_load *L, json_object *dec) {
  if (!dec) return;
  const char *t = type_of(dec);
  if (strcmp(t, "Sequence") == 0) {
    json_object *list = get(dec, "decoders");
    size_t k =
        list && json_object_is_type(list, json_type_array) ? json_object_array_length(list) : 0;
    for (size_t i = 0; i < k; i++) decoder(L, json_object_array_get_idx(list, i));
  } else if (strcmp(t, "ByteLevel") == 0) {
    L->saw_bytelevel = true;
  } else if (strcmp(t, "Replace") == 0) {
    size_t fl = 0;
    const char *from = get_str(get(dec, "pattern"), "String", &fl);
    const char *to = get_str(dec, "content", NULL);
    if (from && to && fl == 3 && memcmp(from, "\xE2\x96\x81", 3) == 0 && strcmp(to, " ") == 0)
      L->d.escape_spaces = true;
  } else if (strcmp(t, "Strip") == 0) {
    json_object *start = get(dec, "start");
    const char *content = get_str(dec, "content", NULL);
    if (start && json_object_get_int64(start) >= 1 && content && strcmp(content, " ") == 0)
      L->d.strip_leading_space = true;
  } else if (strcmp(t, "Metaspace") == 0) {
    L->d.escape_spaces = true;
    const char *scheme = get_str(dec, "prepend_scheme", NULL);
    bool prefix = scheme ? strcmp(scheme, "never") != 0 : get_bool(dec, "add_prefix_space", true);
    if (prefix) L->d.strip_leading_space = true;
  }
}

/* BOS/EOS from a TemplateProcessing (or Roberta/Bert) post-processor. */
static void post_processor(hf_load *L, json_object *pp, json_object *vocab) {
  if (!pp) return;
  const char *t = type_of(pp);
  if (strcmp(t, "Sequence") == 0) {
    json_object *list = get(pp, "processors");
    size_t k =
        list && json_object_is_type(list, json_type_array) ? json_object_array_length(list) : 0;
    for (size_t i = 0; i < k; i++) post_processor(L, json_object_array_get_idx(list, i), vocab);
    return;
  }
  if (strcmp(t, "TemplateProcessing") == 0) {
    json_object *single = get(pp, "single"), *sp = get(pp, "special_tokens");
    size_t k = single && json_object_is_type(single, json_type_array)
                   ? json_object_array_length(single)
                   : 0;
    bool seen_seq = false;
    for (size_t i = 0; i < k; i++) {
      json_object *item = json_object_array_get_idx(single, i);
      if (get(item, "Sequence")) {
        seen_seq = true;
        continue;
      }
      const char *name = get_str(get(item, "SpecialToken"), "id", NULL);
      if (!name) continue;
      json_object *ids = get(get(sp, name), "ids");
      int64_t id = -1;
      if (ids && json_object_is_type(ids, json_type_array) && json_object_array_length(ids) == 1)
        id = json_object_get_int64(json_object_array_get_idx(ids, 0));
      if (id < 0 || id >= (int64_t)L->d.n_tokens) continue;
      if (!seen_seq) {
        L->d.special[BRISK_VOCAB_BOS] = (int32_t)id;
        L->d.add_bos = true;
      } else {
        L->d.special[BRISK_VOCAB_EOS] = (int32_t)id;
        L->d.add_eos = true;
      }
    }
    return;
  }
  if (strcmp(t, "RobertaProcessing") == 0 || strcmp(t, "BertProcessing") == 0) {
    json_object *cls = get(pp, "cls"), *sep = get(pp, "sep");
    if (cls && json_object_is_type(cls, json_type_array) && json_object_array_length(cls) == 2) {
      int64_t id = json_object_get_int64(json_object_array_get_idx(cls, 1));
      if (id >= 0 && id < (int64_t)L->d.n_tokens) {
        L->d.special[BRISK_VOCAB_BOS] = (int32_t)id;
        L->d.add_bos = true;
      }
    }
    if (sep && json_object_is_type(sep, json_type_array) && json_object_array_length(sep) == 2) {
      int64_t id = json_object_get_int64(json_object_array_get_idx(sep, 1));
      if (id >= 0 && id < (int64_t)L->d.n_tokens) {
        L->d.special[BRISK_VOCAB_EOS] = (int32_t)id;
        L->d.add_eos = true;
      }
    }
  }
  (void)vocab;
}

static int parse_hex_byte_token(const char *s, size_t n) {
  if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
  int v = 0;
  for (int i = 3; i < 5; i++) {
    char c = s[i];
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

static brisk_status load_model(hf_load *L, json_object *root) {
  json_object *model = get(root, "model");
  if (!model) return brisk_error(BRISK_E_FORMAT, "tokenizer.json: no 'model'");
  const char *mt = get_str(model, "type", NULL);
  if (mt && strcmp(mt, "BPE") != 0)
    return brisk_error(BRISK_E_UNSUPPORTED, "tokenizer.json: model type '%s' is not supported", mt);
  if (get(model, "continuing_subword_prefix") || get(model, "end_of_word_suffix"))
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "tokenizer.json: BPE subword prefixes/suffixes are not supported");
  json_object *vocab = get(model, "vocab"), *merges = get(model, "merges");
  if (!vocab || !json_object_is_type(vocab, json_type_object))
    return brisk_error(BRISK_E_FORMAT, "tokenizer.json: model.vocab is missing or not an object");
  if (merges && !json_object_is_type(merges, json_type_array))
    return brisk_error(BRISK_E_FORMAT, "tokenizer.json: model.merges is not an array");
  json_object *added = get(root, "added_tokens");
  if (added && !json_object_is_type(added, json_type_array))
    return brisk_error(BRISK_E_FORMAT, "tokenizer.json: added_tokens is not an array");
  size_t n_added = added ? json_object_array_length(added) : 0;
  size_t n_entries = (size_t)json_object_object_length(vocab);

  /* Ids decide the size; refuse ids far beyond the entries (a hostile file
   * must not make us allocate for a billion tokens). */
  int64_t max_id = -1;
  size_t limit = 4 * (n_entries + n_added) + 1024;
  json_object_object_foreach(vocab, key0, val0) {
    (void)key0;
    if (!json_object_is_type(val0, json_type_int))
      return brisk_error(BRISK_E_FORMAT, "tokenizer.json: vocab entry '%.64s' has no integer id",
                         key0);
    int64_t id = json_object_get_int64(val0);
    if (id < 0 || (uint64_t)id >= limit)
      return brisk_error(BRISK_E_FORMAT, "tokenizer.json: vocab entry '%.64s' has id %lld", key0,
                         (long long)id);
    if (id > max_id) max_id = id;
  }
  for (size_t i = 0; i < n_added; i++) {
    json_object *a = json_object_array_get_idx(added, i);
    json_object *idv = get(a, "id");
    if (!idv || !json_object_is_type(idv, json_type_int) || !get_str(a, "content", NULL))
      return brisk_error(BRISK_E_FORMAT, "tokenizer.json: added_tokens[%zu] lacks id or content",
                         i);
    int64_t id = json_object_get_int64(idv);
    if (id < 0 || (uint64_t)id >= limit)
      return brisk_error(BRISK_E_FORMAT, "tokenizer.json: added_tokens[%zu] has id %lld", i,
                         (long long)id);
    if (id > max_id) max_id = id;
  }
  if (max_id < 0) return brisk_error(BRISK_E_FORMAT, "tokenizer.json: empty vocabulary");
  size_t n = (size_t)max_id + 1;
  L->toks = brisk_calloc(n, sizeof *L->toks);
  L->attrs = brisk_calloc(n, sizeof *L->attrs);
  if (!L->toks || !L->attrs) return brisk_error_oom();
  for (size_t i = 0; i < n; i++) {
    L->toks[i] = (brisk_vocab_str){"", 0};
    L->attrs[i] = BRISK_TOKEN_ATTR_UNUSED; /* ids nothing names */
  }
  L->d.n_tokens = (uint32_t)n;
  L->d.byte_fallback = get_bool(model, "byte_fallback", false);
  L->d.ignore_merges = get_bool(model, "ignore_merges", false);
  L->d.fuse_unk = get_bool(model, "fuse_unk", false);
  const char *unk = get_str(model, "unk_token", NULL);
  json_object_object_foreach(vocab, key, val) {
    int64_t id = json_object_get_int64(val);
    size_t len = strlen(key);
    L->toks[id] = (brisk_vocab_str){key, len};
    L->attrs[id] = BRISK_TOKEN_ATTR_NORMAL;
    if (L->d.byte_fallback && parse_hex_byte_token(key, len) >= 0)
      L->attrs[id] = BRISK_TOKEN_ATTR_BYTE;
    if (unk && strcmp(unk, key) == 0) {
      L->attrs[id] = BRISK_TOKEN_ATTR_UNKNOWN;
      L->d.special[BRISK_VOCAB_UNK] = (int32_t)id;
    }
  }
  for (size_t i = 0; i < n_added; i++) {
    json_object *a = json_object_array_get_idx(added, i);
    int64_t id = json_object_get_int64(get(a, "id"));
    size_t len = 0;
    const char *content = get_str(a, "content", &len);
    L->toks[id] = (brisk_vocab_str){content, len};
    uint16_t attr =
        get_bool(a, "special", false) ? BRISK_TOKEN_ATTR_CONTROL : BRISK_TOKEN_ATTR_USER_DEFINED;
    if (unk && strcmp(unk, content) == 0) attr = BRISK_TOKEN_ATTR_UNKNOWN;
    if (get_bool(a, "lstrip", false)) attr |= BRISK_TOKEN_ATTR_LSTRIP;
    if (get_bool(a, "rstrip", false)) attr |= BRISK_TOKEN_ATTR_RSTRIP;
    L->attrs[id] = attr;
  }

  size_t n_merges = merges ? json_object_array_length(merges) : 0;
  L->ml = brisk_malloc((n_merges ? n_merges : 1) * sizeof *L->ml);
  L->mr = brisk_malloc((n_merges ? n_merges : 1) * sizeof *L->mr);
  if (!L->ml || !L->mr) return brisk_error_oom();
  for (size_t i = 0; i < n_merges; i++) {
    json_object *m = json_object_array_get_idx(merges, i);
    L->ml[i] = L->mr[i] = (brisk_vocab_str){"", 0};
    if (json_object_is_type(m, json_type_string)) {
      const char *s = json_object_get_string(m);
      size_t len = (size_t)json_object_get_string_len(m);
      const char *sp = len > 1 ? memchr(s + 1, ' ', len - 1) : NULL;
      if (!sp)
        return brisk_error(BRISK_E_FORMAT, "tokenizer.json: merge %zu '%.64s' has no space", i, s);
      L->ml[i] = (brisk_vocab_str){s, (size_t)(sp - s)};
      L->mr[i] = (brisk_vocab_str){sp + 1, (size_t)(s + len - sp - 1)};
    } else if (json_object_is_type(m, json_type_array) && json_object_array_length(m) == 2 &&
               json_object_is_type(json_object_array_get_idx(m, 0), json_type_string) &&
               json_object_is_type(json_object_array_get_idx(m, 1), json_type_string)) {
      json_object *a = json_object_array_get_idx(m, 0), *b = json_object_array_get_idx(m, 1);
      L->ml[i] =
          (brisk_vocab_str){json_object_get_string(a), (size_t)json_object_get_string_len(a)};
      L->mr[i] =
          (brisk_vocab_str){json_object_get_string(b), (size_t)json_object_get_string_len(b)};
    } else {
      return brisk_error(BRISK_E_FORMAT,
                         "tokenizer.json: merge %zu is neither \"a b\" nor [\"a\", \"b\"]", i);
    }
  }
  L->d.n_merges = n_merges;
  L->d.merge_left = L->ml, L->d.merge_right = L->mr;
  L->d.tokens = L->toks;
  L->d.attrs = L->attrs;
  return BRISK_OK;
}

static brisk_status load(hf_load *L, json_object *root, brisk_vocab **out) {
  brisk_vocab_desc_init(&L->d);
  L->d.type = BRISK_VOCAB_BPE;
  L->d.pre_name = "tokenizer.json";
  brisk_status st = load_model(L, root);
  if (st == BRISK_OK) st = normalizer(L, get(root, "normalizer"));
  if (st == BRISK_OK) st = pre_tokenizer(L, get(root, "pre_tokenizer"));
  if (st != BRISK_OK) return st;
  decoder(L, get(root, "decoder"));
  post_processor(L, get(root, "post_processor"), get(get(root, "model"), "vocab"));
  L->d.byte_level = L->saw_bytelevel;
  /* A byte-level vocabulary spells spaces as U+0120, never U+2581. */
  if (L->d.byte_level) L->d.escape_spaces = false;
  if (L->pre && brisk_pretok_n_steps(L->pre) == 0) {
    brisk_pretok_free(L->pre);
    L->pre = NULL;
  }
  st = brisk_vocab_build(&L->d, L->pre, L->norm, L->n_norm, out);
  L->pre = NULL, L->norm = NULL, L->n_norm = 0; /* owned by build now */
  return st;
}

brisk_status brisk_vocab_from_hf_json(const char *json, size_t len, brisk_vocab **out) {
  if ((!json && len) || !out)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "vocab_from_hf_json: NULL argument");
  if (len > INT32_MAX)
    return brisk_error(BRISK_E_FORMAT, "tokenizer.json: %zu bytes is too large", len);
  json_tokener *tok = json_tokener_new_ex(64);
  if (!tok) return brisk_error_oom();
  json_object *root = json_tokener_parse_ex(tok, json ? json : "", (int)len);
  enum json_tokener_error jerr = json_tokener_get_error(tok);
  size_t at = (size_t)json_tokener_get_parse_end(tok);
  json_tokener_free(tok);
  if (!root || jerr != json_tokener_success) {
    json_object_put(root);
    if (jerr == json_tokener_continue) jerr = json_tokener_error_parse_eof;
    return brisk_error(BRISK_E_FORMAT, "tokenizer.json: %s at byte %zu",
                       json_tokener_error_desc(jerr), at);
  }
  for (size_t i = at; i < len; i++) {
    char ch = json[i];
    if (ch != ' ' && ch != '\n' && ch != '\r' && ch != '\t') {
      json_object_put(root);
      return brisk_error(BRISK_E_FORMAT, "tokenizer.json: trailing data at byte %zu", i);
    }
  }
  hf_load L;
  memset(&L, 0, sizeof L);
  brisk_status st = load(&L, root, out);
  brisk_free(L.toks);
  brisk_free(L.attrs);
  brisk_free(L.ml);
  brisk_free(L.mr);
  brisk_pretok_free(L.pre);
  brisk_norm_ops_free(L.norm, L.n_norm);
  json_object_put(root);
  return st;
}

brisk_status brisk_vocab_from_hf_file(const char *path, brisk_vocab **out) {
  if (!path || !out)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "vocab_from_hf_file: NULL argument");
  FILE *f = fopen(path, "rb");
  if (!f) return brisk_error(BRISK_E_IO, "cannot open '%s': %s", path, strerror(errno));
  char *buf = NULL;
  size_t n = 0, cap = 0;
  brisk_status st = BRISK_OK;
  for (;;) {
    if (brisk_grow((void **)&buf, &cap, n + 65536, 1) != 0) {
      st = brisk_error_oom();
      break;
    }
    size_t r = fread(buf + n, 1, cap - n, f);
    n += r;
    if (n > HF_MAX_FILE) {
      st = brisk_error(BRISK_E_FORMAT, "'%s' is larger than %u bytes", path, HF_MAX_FILE);
      break;
    }
    if (r == 0) {
      if (ferror(f)) st = brisk_error(BRISK_E_IO, "cannot read '%s'", path);
      break;
    }
  }
  fclose(f);
  if (st == BRISK_OK) st = brisk_vocab_from_hf_json(buf, n, out);
  brisk_free(buf);
  return st;
}
