/* Status strings, thread-local last error, logging, version, system info,
 * clock and cpu detection. */
#include "test_support.h"

#include "brisk_config.h"
#include "core/clock.h"
#include "core/cpu.h"
#include "core/error.h"
#include "core/log.h"

#include <pthread.h>
#include <string.h>

static void test_status_strings(void **state) {
  (void)state;
  for (int s = BRISK_OK; s <= BRISK_E_KV_FULL; s++) {
    const char *str = brisk_status_string((brisk_status)s);
    assert_non_null(str);
    assert_string_not_equal(str, "unknown status");
  }
  assert_string_equal(brisk_status_string(BRISK_E_OUT_OF_MEMORY), "out of memory");
  assert_string_equal(brisk_status_string((brisk_status)999), "unknown status");
  assert_string_equal(brisk_status_string((brisk_status)-1), "unknown status");
}

static void *other_thread(void *arg) {
  (void)arg;
  /* A fresh thread has no error; setting one here is invisible elsewhere. */
  if (strcmp(brisk_last_error(), "") != 0) return (void *)1;
  brisk_error(BRISK_E_IO, "thread-local %d", 42);
  return strcmp(brisk_last_error(), "thread-local 42") == 0 ? NULL : (void *)1;
}

static void test_last_error_thread_local(void **state) {
  (void)state;
  assert_int_equal(brisk_error(BRISK_E_FORMAT, "main %s", "thread"), BRISK_E_FORMAT);
  pthread_t t;
  void *ret = (void *)1;
  assert_int_equal(pthread_create(&t, NULL, other_thread, NULL), 0);
  pthread_join(t, &ret);
  assert_null(ret);
  assert_string_equal(brisk_last_error(), "main thread");
  /* Long messages are truncated, not overflowed. */
  char big[4000];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = 0;
  brisk_error(BRISK_E_FORMAT, "%s", big);
  assert_true(strlen(brisk_last_error()) < sizeof big);
}

typedef struct log_capture {
  int n;
  brisk_log_level level;
  char msg[256];
} log_capture;

static void capture(brisk_log_level level, const char *message, void *user) {
  log_capture *c = user;
  c->n++;
  c->level = level;
  snprintf(c->msg, sizeof c->msg, "%s", message);
}

static void test_log_callback(void **state) {
  (void)state;
  log_capture c = {0};
  assert_int_equal(brisk_set_log_callback(capture, &c, BRISK_LOG_INFO), BRISK_OK);
  BRISK_DEBUG("hidden %d", 1);
  assert_int_equal(c.n, 0);
  BRISK_INFO("shown %d", 2);
  assert_int_equal(c.n, 1);
  assert_int_equal(c.level, BRISK_LOG_INFO);
  assert_string_equal(c.msg, "shown 2");
  brisk_log(BRISK_LOG_ERROR, "error %s", "x");
  assert_int_equal(c.level, BRISK_LOG_ERROR);
  assert_int_equal(brisk_set_log_callback(capture, &c, BRISK_LOG_NONE), BRISK_OK);
  brisk_log(BRISK_LOG_ERROR, "silenced");
  assert_int_equal(c.n, 2);
  assert_int_equal(brisk_set_log_callback(capture, &c, (brisk_log_level)17),
                   BRISK_E_INVALID_ARGUMENT);
  assert_int_equal(brisk_set_log_callback(NULL, NULL, BRISK_LOG_WARN), BRISK_OK);
}

static void test_version(void **state) {
  (void)state;
  char want[32];
  snprintf(want, sizeof want, "%d.%d.%d", BRISK_VERSION_MAJOR, BRISK_VERSION_MINOR,
           BRISK_VERSION_PATCH);
  assert_string_equal(brisk_version_string(), want);
  assert_string_equal(brisk_version_string(), BRISK_VERSION_STRING); /* meson agrees */
  assert_int_equal(brisk_version_number(), BRISK_VERSION_NUMBER);
  assert_int_equal(brisk_abi_version(), BRISK_ABI_VERSION);
  const char *info = brisk_system_info();
  assert_non_null(strstr(info, "cpu:"));
  assert_non_null(strstr(info, brisk_version_string()));
  if (brisk_cpu()->avx2) assert_non_null(strstr(info, "avx2"));
}

static void test_clock_and_cpu(void **state) {
  (void)state;
  uint64_t a = brisk_now_ns(), b = brisk_now_ns();
  assert_true(b >= a);
  struct timespec ts = {0, 2000000};
  nanosleep(&ts, NULL);
  assert_true(brisk_now_ns() - a >= 2000000);
  assert_true(brisk_cpu_count() >= 1);
#ifdef __linux__
  /* /proc/meminfo: some memory is available, and less than 2^50 bytes. */
  const uint64_t avail = brisk_memory_available();
  assert_true(avail > 0 && avail < (1ull << 50));
#endif
#if defined(__AVX2__)
  assert_true(brisk_cpu()->avx2); /* compiled for AVX2 means the cpu has it */
#endif
  assert_ptr_equal(brisk_cpu(), brisk_cpu());
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_status_strings), cmocka_unit_test(test_last_error_thread_local),
      cmocka_unit_test(test_log_callback),   cmocka_unit_test(test_version),
      cmocka_unit_test(test_clock_and_cpu),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
