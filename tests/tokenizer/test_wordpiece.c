/* The WordPiece tokenizer's refusals (each with a message) and its memory
 * behaviour: every allocation of a load and of an encode failing in turn
 * gives BRISK_E_OUT_OF_MEMORY and leaks nothing. What it tokenizes is
 * checked against the tokenizers library in model_embed_reference. */
#include "test_support.h"

#include "core/alloc.h"
#include "core/error.h"
#include "tokenizer/wordpiece.h"

#include <stdio.h>
#include <string.h>

#define VOCAB                                                                                      \
  "{\"[PAD]\":0,\"[UNK]\":1,\"[CLS]\":2,\"[SEP]\":3,\"hello\":4,\"##s\":5,\",\":6,\"w\":7,"        \
  "\"##orld\":8,\"cafe\":9}"

static char *tokenizer_json(const char *normalizer, const char *model_extra, const char *vocab) {
  static char buf[4096];
  snprintf(buf, sizeof buf,
           "{\"added_tokens\":[{\"id\":2,\"content\":\"[CLS]\",\"special\":true}],"
           "\"normalizer\":%s,\"pre_tokenizer\":{\"type\":\"BertPreTokenizer\"},"
           "\"model\":{\"type\":\"WordPiece\"%s,\"vocab\":%s}}",
           normalizer, model_extra, vocab);
  return buf;
}

static void expect_refused(const char *json, brisk_status want, const char *fragment) {
  brisk_wordpiece *wp = (brisk_wordpiece *)1;
  brisk_status st = brisk_wordpiece_from_hf_json(json, strlen(json), &wp);
  if (st != want) fail_msg("%s: status %d (%s), want %d", json, st, brisk_last_error(), want);
  assert_null(wp);
  if (!strstr(brisk_last_error(), fragment))
    fail_msg("message '%s' lacks '%s'", brisk_last_error(), fragment);
}

static void test_refusals(void **state) {
  (void)state;
  const char *bert = "{\"type\":\"BertNormalizer\",\"lowercase\":true}";
  expect_refused(tokenizer_json("{\"type\":\"NFKC\"}", ",\"unk_token\":\"[UNK]\"", VOCAB),
                 BRISK_E_UNSUPPORTED, "normalizer 'NFKC'");
  expect_refused(tokenizer_json(bert, ",\"unk_token\":\"[UNK]\"", "{\"a\":0,\"b\":2}"),
                 BRISK_E_FORMAT, "ids must be 0..1");
  expect_refused(tokenizer_json(bert, ",\"unk_token\":\"[UNK]\"", "{\"a\":0,\"b\":\"x\"}"),
                 BRISK_E_FORMAT, "not an integer");
  expect_refused(tokenizer_json(bert, ",\"unk_token\":\"<unk>\"", "{\"a\":0,\"b\":1,\"[CLS]\":2}"),
                 BRISK_E_FORMAT, "no unknown token");
  expect_refused(tokenizer_json(bert, "", "{}"), BRISK_E_FORMAT, "0 tokens");
  const char *bpe = "{\"model\":{\"type\":\"BPE\",\"vocab\":{}}}";
  expect_refused(bpe, BRISK_E_UNSUPPORTED, "not WordPiece");
  expect_refused("{\"model\":", BRISK_E_FORMAT, "tokenizer.json");
  expect_refused("{} trailing", BRISK_E_FORMAT, "tokenizer.json");
  /* The added token must be the vocabulary's token of that id. */
  const char *wrong = "{\"added_tokens\":[{\"id\":0,\"content\":\"[CLS]\",\"special\":true}],"
                      "\"model\":{\"type\":\"WordPiece\",\"vocab\":" VOCAB "}}";
  expect_refused(wrong, BRISK_E_UNSUPPORTED, "added token '[CLS]'");
  brisk_wordpiece *wp = NULL;
  assert_int_equal(brisk_wordpiece_from_vocab_txt("a\nb\n", 4, true, &wp), BRISK_E_FORMAT);
  assert_null(wp);
  assert_non_null(strstr(brisk_last_error(), "[UNK]"));
  assert_int_equal(brisk_wordpiece_from_vocab_txt("", 0, true, &wp), BRISK_E_FORMAT);
  assert_int_equal(brisk_wordpiece_from_hf_json(NULL, 0, &wp), BRISK_E_INVALID_ARGUMENT);
}

static void test_vocab_txt_and_json_agree(void **state) {
  (void)state;
  const char *txt = "[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n##s\n,\nw\n##orld\ncafe\n";
  const char *json = tokenizer_json("{\"type\":\"BertNormalizer\",\"lowercase\":true}",
                                    ",\"unk_token\":\"[UNK]\"", VOCAB);
  brisk_wordpiece *a = NULL, *b = NULL;
  assert_int_equal(brisk_wordpiece_from_vocab_txt(txt, strlen(txt), true, &a), BRISK_OK);
  assert_int_equal(brisk_wordpiece_from_hf_json(json, strlen(json), &b), BRISK_OK);
  assert_int_equal(brisk_wordpiece_n_tokens(a), 10);
  assert_string_equal(brisk_wordpiece_token(a, 8), "##orld");
  assert_null(brisk_wordpiece_token(a, 10));
  const char *text = "HELLOS, World! Café[CLS] xyz";
  int32_t *ia = NULL, *ib = NULL;
  size_t na = 0, nb = 0;
  assert_int_equal(brisk_wordpiece_encode(a, text, strlen(text), true, &ia, &na), BRISK_OK);
  assert_int_equal(brisk_wordpiece_encode(b, text, strlen(text), false, &ib, &nb), BRISK_OK);
  /* b has no [SEP] rule from a post-processor but finds [CLS] and [SEP] by
   * name; without add_special neither is added. */
  assert_int_equal(na, nb + 2);
  assert_memory_equal(ia + 1, ib, nb * sizeof *ib);
  assert_int_equal(ia[0], 2);
  assert_int_equal(ia[na - 1], 3);
  brisk_free(ia);
  brisk_free(ib);
  assert_int_equal(brisk_wordpiece_encode(a, NULL, 0, true, &ia, &na), BRISK_OK);
  assert_int_equal(na, 2);
  brisk_free(ia);
  assert_int_equal(brisk_wordpiece_encode(a, NULL, 3, true, &ia, &na), BRISK_E_INVALID_ARGUMENT);
  brisk_wordpiece_free(a);
  brisk_wordpiece_free(b);
}

static brisk_status load_and_encode(void *ctx) {
  (void)ctx;
  const char *json = tokenizer_json("{\"type\":\"BertNormalizer\",\"lowercase\":true}",
                                    ",\"unk_token\":\"[UNK]\"", VOCAB);
  brisk_wordpiece *wp = NULL;
  brisk_status st = brisk_wordpiece_from_hf_json(json, strlen(json), &wp);
  if (st) return st;
  const char *text = "Hellos, world! 中文 Café [CLS] unknownword";
  int32_t *ids = NULL;
  size_t n = 0;
  st = brisk_wordpiece_encode(wp, text, strlen(text), true, &ids, &n);
  brisk_free(ids);
  brisk_wordpiece_free(wp);
  return st;
}

static brisk_status load_txt(void *ctx) {
  (void)ctx;
  const char *txt = "[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n";
  brisk_wordpiece *wp = NULL;
  brisk_status st = brisk_wordpiece_from_vocab_txt(txt, strlen(txt), true, &wp);
  brisk_wordpiece_free(wp);
  return st;
}

static void test_out_of_memory(void **state) {
  (void)state;
  assert_true(test_every_allocation_fails(load_and_encode, NULL) > 5);
  assert_true(test_every_allocation_fails(load_txt, NULL) > 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_vocab_txt_and_json_agree),
      cmocka_unit_test(test_out_of_memory),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
