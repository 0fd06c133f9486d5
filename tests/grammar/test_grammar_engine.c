/* Constrained requests through the engine: every completion of a sampled
 * request (stories260K, temperature 1) ends by end-of-generation with text
 * that json-c parses and that meets the schema; prompt-lookup speculation
 * gives exactly the tokens of plain decoding; an invalid constraint is an
 * error at submit naming the position; a constraint no token can continue
 * finishes with BRISK_FINISH_CONSTRAINT. */
#include "grammar/grammar.h"

#include "engine/engine_internal.h"
#include "test_models.h"
#include "test_support.h"

#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

typedef struct out {
  char text[8192];
  size_t len;
  int32_t tokens[1024];
  int n_tokens;
  brisk_finish_reason reason;
  int finished;
} out;

/* Runs one request to the end; outs[i] is completion i. */
static void run(brisk_engine *e, const brisk_request_params *rp, const brisk_constraint_params *cp,
                out *outs) {
  uint64_t id;
  brisk_status st = brisk_engine_submit_constrained(e, rp, cp, &id);
  if (st) fail_msg("submit: %s", brisk_last_error());
  memset(outs, 0, (size_t)rp->n * sizeof *outs);
  for (int open = rp->n, steps = 0; open > 0; steps++) {
    assert_true(steps < 5000);
    assert_int_equal(brisk_engine_step(e, NULL), BRISK_OK);
    brisk_engine_event ev[16];
    size_t n;
    assert_int_equal(brisk_engine_poll(e, ev, 16, &n), BRISK_OK);
    for (size_t i = 0; i < n; i++) {
      out *o = &outs[ev[i].index];
      assert_true(o->len + ev[i].text_len < sizeof o->text);
      memcpy(o->text + o->len, ev[i].text, ev[i].text_len);
      o->len += ev[i].text_len;
      if (ev[i].token >= 0 && o->n_tokens < 1024) o->tokens[o->n_tokens++] = ev[i].token;
      if (ev[i].finished) {
        o->finished = 1;
        o->reason = ev[i].reason;
        open--;
      }
    }
  }
}

static const char *SCHEMA =
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":8},"
    "\"age\":{\"type\":\"integer\",\"minimum\":3,\"maximum\":77},\"pet\":{\"enum\":[\"cat\","
    "\"dog\",null]},\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"boolean\"},\"maxItems\":"
    "3}},\"required\":[\"name\",\"age\",\"pet\"]}";

static void check_schema_output(const out *o) {
  if (o->reason != BRISK_FINISH_EOG)
    fail_msg("reason %d for '%.*s'", o->reason, (int)o->len, o->text);
  char buf[8192];
  memcpy(buf, o->text, o->len);
  buf[o->len] = 0;
  json_object *v = json_tokener_parse(buf);
  if (!v) fail_msg("not JSON: '%s'", buf);
  json_object *x;
  assert_true(json_object_object_get_ex(v, "name", &x) && json_object_is_type(x, json_type_string));
  assert_true(strlen(json_object_get_string(x)) <= 8 * 4);
  assert_true(json_object_object_get_ex(v, "age", &x) && json_object_is_type(x, json_type_int));
  int64_t age = json_object_get_int64(x);
  assert_true(age >= 3 && age <= 77);
  assert_true(json_object_object_get_ex(v, "pet", &x));
  assert_true(!x || (json_object_is_type(x, json_type_string) &&
                     (!strcmp(json_object_get_string(x), "cat") ||
                      !strcmp(json_object_get_string(x), "dog"))));
  if (json_object_object_get_ex(v, "tags", &x)) {
    assert_true(json_object_is_type(x, json_type_array) && json_object_array_length(x) <= 3);
    for (size_t i = 0; i < json_object_array_length(x); i++)
      assert_true(json_object_is_type(json_object_array_get_idx(x, i), json_type_boolean));
  }
  json_object_put(v);
}

static void test_stories_schema(void **state) {
  (void)state;
  const char *path = test_shared_path("models/stories260K.gguf");
  if (!path) SKIP_BECAUSE("../shared/models/stories260K.gguf is absent");
  brisk_model *m;
  assert_int_equal(brisk_model_load(path, NULL, &m), BRISK_OK);
  brisk_engine *e;
  assert_int_equal(brisk_engine_create(m, NULL, &e), BRISK_OK);
  test_rng rng = test_rng_seeded(__func__);
  brisk_sampler_params sp;
  brisk_sampler_params_init(&sp);
  brisk_request_params rp;
  brisk_request_params_init(&rp);
  rp.prompt_text = "Once upon a time";
  rp.max_tokens = 400;
  rp.sampler = &sp;
  rp.n = 4;
  brisk_constraint_params cp;
  brisk_constraint_params_init(&cp);
  cp.kind = BRISK_CONSTRAINT_JSON_SCHEMA;
  cp.text = SCHEMA;
  static out outs[4], spec[4];
  for (int round = 0; round < 3; round++) {
    sp.seed = test_rng_u64(&rng);
    sp.temperature = round == 0 ? 0.0f : 1.0f;
    rp.spec_n_draft = 0;
    run(e, &rp, &cp, outs);
    for (int i = 0; i < rp.n; i++) check_schema_output(&outs[i]);
    /* Prompt-lookup speculation: the same tokens. */
    rp.spec_n_draft = 4;
    run(e, &rp, &cp, spec);
    for (int i = 0; i < rp.n; i++) {
      assert_int_equal(spec[i].n_tokens, outs[i].n_tokens);
      assert_memory_equal(spec[i].tokens, outs[i].tokens, (size_t)outs[i].n_tokens * 4);
      assert_int_equal(spec[i].reason, outs[i].reason);
    }
  }
  brisk_engine_counters c = {.struct_size = sizeof c};
  assert_int_equal(brisk_engine_stats(e, &c), BRISK_OK);
  assert_true(c.n_spec_drafted > 0); /* speculation ran */
  /* A regex: ends at EOG with a whole match. */
  rp.spec_n_draft = 0;
  rp.n = 2;
  cp.kind = BRISK_CONSTRAINT_REGEX;
  cp.text = "(Tim|Sue) (ran|sat)( and (ran|sat)){0,3}\\.";
  sp.temperature = 1.0f;
  run(e, &rp, &cp, outs);
  for (int i = 0; i < rp.n; i++) {
    assert_int_equal(outs[i].reason, BRISK_FINISH_EOG);
    assert_true(outs[i].len >= 8 && outs[i].text[outs[i].len - 1] == '.');
  }
  /* An invalid constraint fails at submit, naming the position. */
  uint64_t id;
  cp.kind = BRISK_CONSTRAINT_GBNF;
  cp.text = "root ::= \"a\" | [b-\n";
  assert_int_equal(brisk_engine_submit_constrained(e, &rp, &cp, &id), BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "line 1 column"));
  cp.kind = BRISK_CONSTRAINT_JSON_SCHEMA;
  cp.text = "{\"type\": \"object\", \"properties\": {\"x\": {\"uniqueItems\": true}}}";
  assert_int_equal(brisk_engine_submit_constrained(e, &rp, &cp, &id), BRISK_E_INVALID_ARGUMENT);
  assert_non_null(strstr(brisk_last_error(), "/properties/x"));
  cp.struct_size = 3;
  assert_int_equal(brisk_engine_submit_constrained(e, &rp, &cp, &id), BRISK_E_INVALID_ARGUMENT);
  brisk_engine_free(e);
  brisk_model_free(m);
}

/* A vocabulary of printable ASCII only: after "a" the grammar wants "é",
 * which no token gives. */
static void test_blocked(void **state) {
  (void)state;
  char dir[] = "/tmp/brisk-grammar-XXXXXX";
  assert_non_null(mkdtemp(dir));
  test_rng rng = test_rng_seeded(__func__);
  test_model_spec spec = test_model_default("llama");
  brisk_model *m;
  assert_int_equal(test_model_load(dir, "blocked", &spec, &rng, &m), BRISK_OK);
  brisk_engine *e;
  assert_int_equal(brisk_engine_create(m, NULL, &e), BRISK_OK);
  brisk_request_params rp;
  brisk_request_params_init(&rp);
  rp.prompt_text = "a";
  rp.max_tokens = 20;
  brisk_constraint_params cp;
  brisk_constraint_params_init(&cp);
  cp.kind = BRISK_CONSTRAINT_GBNF;
  cp.text = "root ::= \"a\" \"\\u00e9\"";
  out o[1];
  run(e, &rp, &cp, o);
  assert_int_equal(o[0].reason, BRISK_FINISH_CONSTRAINT);
  assert_int_equal(o[0].len, 1);
  assert_int_equal(o[0].text[0], 'a');
  brisk_engine_free(e);
  brisk_model_free(m);
  char file[128];
  snprintf(file, sizeof file, "%s/blocked.gguf", dir);
  remove(file);
  remove(dir);
}

/* Requests with the same constraint share one masker through the engine's
 * cache (its owner count: the template and each live request); distinct
 * constraints past the cache's size evict the least recently used one,
 * and requests holding an evicted masker still run to a valid end. */
static void test_shared_cache(void **state) {
  (void)state;
  const char *path = test_shared_path("models/stories260K.gguf");
  if (!path) SKIP_BECAUSE("../shared/models/stories260K.gguf is absent");
  brisk_model *m;
  assert_int_equal(brisk_model_load(path, NULL, &m), BRISK_OK);
  brisk_engine *e;
  assert_int_equal(brisk_engine_create(m, NULL, &e), BRISK_OK);
  brisk_request_params rp;
  brisk_request_params_init(&rp);
  rp.prompt_text = "Once upon a time";
  rp.max_tokens = 200;
  brisk_constraint_params cp;
  brisk_constraint_params_init(&cp);
  cp.kind = BRISK_CONSTRAINT_JSON_SCHEMA;
  cp.text = SCHEMA;
  uint64_t ids[11];
  assert_int_equal(brisk_engine_submit_constrained(e, &rp, &cp, &ids[0]), BRISK_OK);
  assert_int_equal(brisk_engine_submit_constrained(e, &rp, &cp, &ids[1]), BRISK_OK);
  int used = 0;
  const brisk_constraint *t = NULL;
  for (int i = 0; i < BRISK_ENGINE_CCONST; i++)
    if (e->cconst[i].used) used++, t = e->cconst[i].tmpl;
  assert_int_equal(used, 1);
  assert_int_equal(*t->refs, 3);
  /* Nine more distinct regexes: the schema's template is evicted while its
   * two requests still hold the masker. */
  char re[9][32];
  cp.kind = BRISK_CONSTRAINT_REGEX;
  for (int i = 0; i < 9; i++) {
    snprintf(re[i], sizeof re[i], "(Tim|Sue) ran{1,%d}\\.", i + 1);
    cp.text = re[i];
    assert_int_equal(brisk_engine_submit_constrained(e, &rp, &cp, &ids[2 + i]), BRISK_OK);
  }
  for (int i = 0; i < BRISK_ENGINE_CCONST; i++)
    assert_true(e->cconst[i].kind == BRISK_CONSTRAINT_REGEX);
  int open = 11;
  out o[11];
  memset(o, 0, sizeof o);
  for (int steps = 0; open > 0; steps++) {
    assert_true(steps < 5000);
    assert_int_equal(brisk_engine_step(e, NULL), BRISK_OK);
    brisk_engine_event ev[16];
    size_t n;
    assert_int_equal(brisk_engine_poll(e, ev, 16, &n), BRISK_OK);
    for (size_t i = 0; i < n; i++) {
      int k = 0;
      while (k < 10 && ids[k] != ev[i].id) k++;
      out *x = &o[k];
      assert_true(x->len + ev[i].text_len < sizeof x->text);
      memcpy(x->text + x->len, ev[i].text, ev[i].text_len);
      x->len += ev[i].text_len;
      if (ev[i].finished) {
        x->finished = 1;
        x->reason = ev[i].reason;
        open--;
      }
    }
  }
  check_schema_output(&o[0]);
  check_schema_output(&o[1]);
  for (int i = 2; i < 11; i++) assert_int_equal(o[i].reason, BRISK_FINISH_EOG);
  brisk_engine_free(e);
  brisk_model_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stories_schema),
      cmocka_unit_test(test_blocked),
      cmocka_unit_test(test_shared_cache),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
