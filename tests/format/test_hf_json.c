/* The JSON layer under safetensors and Hugging Face folders: parse errors
 * with positions, the depth limit, typed lookups at the edges of the integer
 * range, the raw top-level key scan, and the UTF-8 check. */
#include "core/utf8.h"
#include "test_support.h"

#include "core/alloc.h"
#include "format/json.h"

#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct json_object *parse_ok(const char *text, bool strict) {
  struct json_object *o = NULL;
  brisk_status s = brisk_json_parse(text, strlen(text), strict, "t.json", &o);
  if (s != BRISK_OK) {
    fprintf(stderr, "parse of %s failed: %s\n", text, brisk_last_error());
    fail();
  }
  return o;
}

static void expect_parse_error(const char *text, bool strict, const char *frag) {
  struct json_object *o = NULL;
  assert_int_equal(brisk_json_parse(text, strlen(text), strict, "t.json", &o), BRISK_E_FORMAT);
  assert_null(o);
  if (!strstr(brisk_last_error(), frag)) {
    fprintf(stderr, "parse of %s: '%s' lacks '%s'\n", text, brisk_last_error(), frag);
    fail();
  }
}

static void test_parse_errors(void **state) {
  (void)state;
  expect_parse_error("", false, "t.json: empty");
  expect_parse_error(" \n\t", true, "t.json: empty");
  expect_parse_error("{\n\"a\": [1,\n 2,, 3]}", true, "invalid JSON at line 3, column 4");
  expect_parse_error("{\"a\": 1", false, "t.json: invalid JSON");
  expect_parse_error("{\"a\": 1} 2", false,
                     "unexpected byte 0x32 after the JSON value at line 1, "
                     "column 10");
  expect_parse_error("\"\xc3\x28\"", false, "utf-8");
  /* A bare number at the very end parses (json-c needs a terminator). */
  struct json_object *o = parse_ok("42", true);
  assert_int_equal(json_object_get_int64(o), 42);
  brisk_json_free(o);
  brisk_json_free(NULL);
}

static void test_depth_limit(void **state) {
  (void)state;
  char deep[2 * BRISK_JSON_MAX_DEPTH + 8];
  for (int n = BRISK_JSON_MAX_DEPTH - 1; n <= BRISK_JSON_MAX_DEPTH + 1; n++) {
    memset(deep, '[', (size_t)n);
    memset(deep + n, ']', (size_t)n);
    deep[2 * n] = 0;
    struct json_object *o = NULL;
    brisk_status s = brisk_json_parse(deep, strlen(deep), true, "deep", &o);
    if (n <= BRISK_JSON_MAX_DEPTH) { /* json-c allows exactly depth levels */
      assert_int_equal(s, BRISK_OK);
      brisk_json_free(o);
    } else {
      assert_int_equal(s, BRISK_E_FORMAT);
      assert_non_null(strstr(brisk_last_error(), "nesting too deep"));
    }
  }
}

static void test_integer_edges(void **state) {
  (void)state;
  struct json_object *o =
      parse_ok("{\"max\": 9223372036854775806, \"min\": -9223372036854775807,"
               " \"over\": 9223372036854775808, \"under\": -9223372036854775809,"
               " \"u\": 18446744073709551614, \"u_over\": 18446744073709551616,"
               " \"neg\": -1, \"f\": 1e300, \"nan\": NaN, \"two\": 2.0, \"b\": true}",
               false);
  int64_t i;
  uint64_t u;
  double d;
  assert_int_equal(brisk_json_get_int(o, "t", "max", &i), BRISK_OK);
  assert_true(i == INT64_MAX - 1);
  assert_int_equal(brisk_json_get_int(o, "t", "min", &i), BRISK_OK);
  assert_true(i == INT64_MIN + 1);
  assert_int_equal(brisk_json_get_int(o, "t", "over", &i), BRISK_E_FORMAT);
  assert_int_equal(brisk_json_get_int(o, "t", "under", &i), BRISK_E_FORMAT);
  assert_int_equal(brisk_json_get_int(o, "t", "f", &i), BRISK_E_FORMAT);
  assert_int_equal(brisk_json_get_int(o, "t", "nan", &i), BRISK_E_FORMAT);
  assert_int_equal(brisk_json_get_int(o, "t", "b", &i), BRISK_E_FORMAT);
  assert_int_equal(brisk_json_get_int(o, "t", "two", &i), BRISK_OK);
  assert_int_equal(i, 2);
  struct json_object *v;
  assert_int_equal(brisk_json_find(o, "t", "u", &v), BRISK_OK);
  assert_int_equal(brisk_json_as_uint(v, "t", "u", &u), BRISK_OK);
  assert_true(u == UINT64_MAX - 1);
  assert_int_equal(brisk_json_find(o, "t", "u_over", &v), BRISK_OK);
  assert_int_equal(brisk_json_as_uint(v, "t", "u_over", &u), BRISK_E_FORMAT);
  assert_int_equal(brisk_json_find(o, "t", "neg", &v), BRISK_OK);
  assert_int_equal(brisk_json_as_uint(v, "t", "neg", &u), BRISK_E_FORMAT);
  assert_non_null(strstr(brisk_last_error(), "t: key 'neg' is negative (-1)"));
  assert_int_equal(brisk_json_find(o, "t", "two", &v), BRISK_OK);
  assert_int_equal(brisk_json_as_uint(v, "t", "two", &u), BRISK_E_FORMAT); /* sizes are integers */
  /* Integers beyond int64 still read as numbers. */
  assert_int_equal(brisk_json_get_float(o, "t", "u", &d), BRISK_OK);
  assert_true(d == 18446744073709551614.0);
  assert_int_equal(brisk_json_get_float(o, "t", "neg", &d), BRISK_OK);
  assert_true(d == -1.0);
  /* A missing tree (an absent optional file) is "not found". */
  assert_int_equal(brisk_json_get_int(NULL, "gen.json", "x", &i), BRISK_E_NOT_FOUND);
  assert_non_null(strstr(brisk_last_error(), "gen.json: key 'x': the file is absent"));
  char long_key[300];
  memset(long_key, 'k', sizeof long_key - 1);
  long_key[sizeof long_key - 1] = 0;
  assert_int_equal(brisk_json_get_int(o, "t", long_key, &i), BRISK_E_INVALID_ARGUMENT);
  brisk_json_free(o);

  o = parse_ok("[1, 2]", true);
  assert_int_equal(brisk_json_get_int(o, "t", "a", &i), BRISK_E_FORMAT);
  assert_non_null(strstr(brisk_last_error(), "the document is an array, not an object"));
  brisk_json_free(o);
}

typedef struct keys_seen {
  char keys[8][32];
  bool nul[8];
  size_t n;
} keys_seen;

static void on_key(void *ctx, const char *raw, size_t len, bool nul) {
  keys_seen *k = ctx;
  assert_true(k->n < 8 && len < 32);
  memcpy(k->keys[k->n], raw, len);
  k->keys[k->n][len] = 0;
  k->nul[k->n++] = nul;
}

static void test_scan_top_keys(void **state) {
  (void)state;
  const char *text = " { \"a\" : {\"x\": [\"y,\", {\"z\": 1}]}, 'b\"' :\"c}\",\n"
                     "\"d\\\"e\": [], \"f\\u0000\": 1, \"g\\\\u0000\": {}, \"\": 0 } ";
  keys_seen k = {0};
  assert_int_equal(brisk_json_scan_top_keys(text, strlen(text), on_key, &k), 6);
  assert_string_equal(k.keys[0], "a");
  assert_string_equal(k.keys[1], "b\"");
  assert_string_equal(k.keys[2], "d\\\"e");
  assert_string_equal(k.keys[3], "f\\u0000");
  assert_true(k.nul[3]);
  assert_string_equal(k.keys[4], "g\\\\u0000"); /* an escaped backslash, then text */
  assert_false(k.nul[4]);
  assert_string_equal(k.keys[5], "");
  assert_false(k.nul[0] || k.nul[1] || k.nul[2] || k.nul[5]);
  /* The count matches json-c's when there are no duplicates. */
  struct json_object *o = parse_ok(text, false);
  assert_int_equal(json_object_object_length(o), 6);
  brisk_json_free(o);
  assert_int_equal(brisk_json_scan_top_keys("{}", 2, NULL, NULL), 0);
}

static void test_utf8(void **state) {
  (void)state;
  struct {
    const char *s;
    bool ok;
  } cases[] = {
      {"plain", true},         {"caf\xc3\xa9", true},
      {"\xe2\x82\xac", true},  {"\xf0\x9f\x98\x80", true},
      {"\xc3", false},         {"\xc0\xaf", false}, /* overlong */
      {"\xed\xa0\x80", false}, /* surrogate */ {"\xf4\x90\x80\x80", false},
      {"\x80", false},         {"\xe2\x82", false},
      {"\xff", false},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    assert_int_equal(brisk_utf8_valid(cases[i].s, strlen(cases[i].s)), cases[i].ok);
}

static void test_read_file_limits(void **state) {
  (void)state;
  char path[64];
  snprintf(path, sizeof path, "/tmp/brisk-json-%ld.json", (long)getpid());
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  fputs("\xef\xbb\xbf{\"k\": [1, 2, 3]}", f);
  fclose(f);
  struct json_object *o = NULL;
  assert_int_equal(brisk_json_parse_file(path, 10, &o), BRISK_E_FORMAT);
  assert_non_null(strstr(brisk_last_error(), "more than the 10-byte limit"));
  assert_int_equal(brisk_json_parse_file(path, 1000, &o), BRISK_OK);
  size_t n;
  int64_t k[3];
  assert_int_equal(brisk_json_get_int_array(o, "t", "k", k, 3, &n), BRISK_OK);
  assert_int_equal(k[2], 3);
  brisk_json_free(o);
  unlink(path);
  assert_int_equal(brisk_json_parse_file(path, 1000, &o), BRISK_E_IO);
  assert_non_null(strstr(brisk_last_error(), "No such file"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse_errors),  cmocka_unit_test(test_depth_limit),
      cmocka_unit_test(test_integer_edges), cmocka_unit_test(test_scan_top_keys),
      cmocka_unit_test(test_utf8),          cmocka_unit_test(test_read_file_limits),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
