/* XXH64 against vectors computed by the reference implementation (python
 * xxhash), covering every tail path: <4, 4..7, 8..31, >=32 bytes, seeds. */
#include "test_support.h"

#include "core/hash.h"

#include <string.h>

static void test_known_vectors(void **state) {
  (void)state;
  unsigned char seq[768];
  for (int i = 0; i < 768; i++) seq[i] = (unsigned char)(i & 0xff);
  assert_true(brisk_hash64("", 0, 0) == 0xef46db3751d8e999ull);
  assert_true(brisk_hash64("a", 1, 0) == 0xd24ec4f1a98c6e5bull);
  assert_true(brisk_hash64("abc", 3, 0) == 0x44bc2cf5ad770999ull);
  const char *s = "Nobody inspects the spammish repetition";
  assert_true(brisk_hash64(s, strlen(s), 0) == 0xfbcea83c8a378bf1ull);
  assert_true(brisk_hash64(seq, 768, 0) == 0x8e03c838c596036full);
  assert_true(brisk_hash64("abcdefgh12345", 13, 0x9e3779b97f4a7c15ull) == 0x5904bc708ac79b92ull);
  assert_true(brisk_hash64(seq, 40, 1) == 0x421d36a2ffe6ca63ull);
}

static void test_sensitivity(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("hash_sensitivity");
  unsigned char buf[100];
  for (int i = 0; i < 100; i++) buf[i] = (unsigned char)test_rng_u64(&r);
  uint64_t h = brisk_hash64(buf, sizeof buf, 7);
  /* Flipping any single bit changes the hash; so does the seed and length. */
  for (int i = 0; i < 800; i++) {
    buf[i / 8] ^= (unsigned char)(1u << (i % 8));
    assert_true(brisk_hash64(buf, sizeof buf, 7) != h);
    buf[i / 8] ^= (unsigned char)(1u << (i % 8));
  }
  assert_true(brisk_hash64(buf, sizeof buf, 8) != h);
  assert_true(brisk_hash64(buf, sizeof buf - 1, 7) != h);
  assert_true(brisk_hash64(buf, sizeof buf, 7) == h);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_known_vectors),
      cmocka_unit_test(test_sensitivity),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
