#include "format/json.h"

#include "core/utf8.h"

#include "core/alloc.h"
#include "core/error.h"
#include "core/memcap.h"

#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void line_col(const char *text, size_t off, size_t *line, size_t *col) {
  *line = 1;
  *col = 1;
  for (size_t i = 0; i < off; i++) {
    if (text[i] == '\n') {
      (*line)++;
      *col = 1;
    } else {
      (*col)++;
    }
  }
}

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* json-c's trees of model folders' files take 7 to 11 bytes per byte of text
 * (tokenizer.json, measured with mallinfo2); a small config up to 22, which
 * the constant covers. */
#define JSON_TREE_BYTES_PER_BYTE 16

typedef struct tree_charge {
  brisk_mem_account *account;
  uint64_t bytes;
} tree_charge;

static void drop_charge(struct json_object *obj, void *userdata) {
  (void)obj;
  tree_charge *c = userdata;
  brisk_mem_uncharge(c->account, c->bytes);
  brisk_free(c);
}

brisk_status brisk_json_parse(const char *text, size_t len, bool strict, const char *what,
                              struct json_object **out) {
  /* json-c takes an int length. */
  if (len > INT_MAX)
    return brisk_error(BRISK_E_FORMAT, "%s: %zu bytes of JSON is more than the parser takes", what,
                       len);
  size_t first = 0;
  while (first < len && is_ws(text[first])) first++;
  if (first == len) return brisk_error(BRISK_E_FORMAT, "%s: empty, no JSON value", what);
  /* json-c allocates the tree with malloc, outside brisk's allocator, so its
   * memory is charged to the memory limits as a bound before the parse. */
  tree_charge *charge = brisk_malloc(sizeof *charge);
  if (!charge) return brisk_error_oom();
  charge->account = brisk_mem_current();
  charge->bytes = (uint64_t)len * JSON_TREE_BYTES_PER_BYTE + 4096;
  if (brisk_mem_charge(charge->account, charge->bytes)) {
    brisk_free(charge);
    return brisk_error_oom();
  }
  struct json_tokener *tok = json_tokener_new_ex(BRISK_JSON_MAX_DEPTH);
  if (!tok) {
    drop_charge(NULL, charge);
    return brisk_error_oom();
  }
  int flags = JSON_TOKENER_VALIDATE_UTF8 | (strict ? JSON_TOKENER_STRICT : 0);
  json_tokener_set_flags(tok, flags);
  struct json_object *obj = json_tokener_parse_ex(tok, text, (int)len);
  enum json_tokener_error err = json_tokener_get_error(tok);
  size_t end = json_tokener_get_parse_end(tok);
  if (!obj && err == json_tokener_continue) {
    /* A bare number at the very end is only complete once the parser sees a
     * terminator; a NUL is json-c's way to say "input ends here". */
    obj = json_tokener_parse_ex(tok, "", 1);
    err = json_tokener_get_error(tok);
    end = len;
  }
  json_tokener_free(tok);
  if (obj &&
      (json_object_is_type(obj, json_type_object) || json_object_is_type(obj, json_type_array))) {
    /* Released when the tree is (a double's user data is its text). */
    json_object_set_userdata(obj, charge, drop_charge);
  } else {
    drop_charge(NULL, charge);
  }
  if (!obj) {
    if (err == json_tokener_continue || err == json_tokener_success)
      return brisk_error(BRISK_E_FORMAT, "%s: JSON ends early (%zu bytes)", what, len);
    size_t line, col;
    line_col(text, end < len ? end : len, &line, &col);
    return brisk_error(BRISK_E_FORMAT, "%s: invalid JSON at line %zu, column %zu: %s", what, line,
                       col, json_tokener_error_desc(err));
  }
  for (size_t i = end; i < len; i++) {
    if (!is_ws(text[i])) {
      json_object_put(obj);
      size_t line, col;
      line_col(text, i, &line, &col);
      return brisk_error(BRISK_E_FORMAT,
                         "%s: unexpected byte 0x%02x after the JSON value at line %zu, column %zu",
                         what, (unsigned)(unsigned char)text[i], line, col);
    }
  }
  *out = obj;
  return BRISK_OK;
}

void brisk_json_free(struct json_object *obj) {
  if (obj) json_object_put(obj);
}

/* Reads exactly n bytes; a short file reads as an I/O error since its size
 * was just measured. */
static brisk_status read_exact(int fd, char *buf, size_t n, const char *path) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = read(fd, buf + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return brisk_error(BRISK_E_IO, "cannot read %s: %s", path, strerror(errno));
    if (r == 0)
      return brisk_error(BRISK_E_IO, "%s shrank while being read (%zu of %zu bytes)", path, got, n);
    got += (size_t)r;
  }
  return BRISK_OK;
}

brisk_status brisk_json_read_file(const char *path, size_t max_bytes, char **text, size_t *len) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return brisk_error(BRISK_E_IO, "cannot open %s: %s", path, strerror(errno));
  struct stat st;
  brisk_status s = BRISK_OK;
  char *buf = NULL;
  if (fstat(fd, &st) != 0) {
    s = brisk_error(BRISK_E_IO, "cannot stat %s: %s", path, strerror(errno));
  } else if (!S_ISREG(st.st_mode)) {
    s = brisk_error(BRISK_E_IO, "%s is not a regular file", path);
  } else if ((uint64_t)st.st_size > max_bytes) {
    s = brisk_error(BRISK_E_FORMAT, "%s is %llu bytes, more than the %zu-byte limit", path,
                    (unsigned long long)st.st_size, max_bytes);
  } else {
    size_t n = (size_t)st.st_size;
    buf = brisk_malloc(n + 1);
    if (!buf) s = brisk_error_oom();
    if (s == BRISK_OK) s = read_exact(fd, buf, n, path);
    if (s == BRISK_OK) {
      buf[n] = 0;
      *text = buf;
      *len = n;
      buf = NULL;
    }
  }
  brisk_free(buf);
  close(fd);
  return s;
}

brisk_status brisk_json_parse_file(const char *path, size_t max_bytes, struct json_object **out) {
  char *buf;
  size_t n;
  brisk_status s = brisk_json_read_file(path, max_bytes, &buf, &n);
  if (s != BRISK_OK) return s;
  const char *text = buf;
  /* Editors on some systems prepend a byte-order mark. */
  if (n >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0) {
    text += 3;
    n -= 3;
  }
  s = brisk_json_parse(text, n, false, path, out);
  brisk_free(buf);
  return s;
}

const char *brisk_json_type_name(const struct json_object *v) {
  switch (json_object_get_type(v)) {
  case json_type_null: return "null";
  case json_type_boolean: return "a boolean";
  case json_type_double: return "a number";
  case json_type_int: return "an integer";
  case json_type_object: return "an object";
  case json_type_array: return "an array";
  case json_type_string: return "a string";
  }
  return "unknown";
}

brisk_status brisk_json_find(const struct json_object *root, const char *what, const char *path,
                             struct json_object **out) {
  if (!path || !*path) return brisk_error(BRISK_E_INVALID_ARGUMENT, "%s: empty key", what);
  if (!root) return brisk_error(BRISK_E_NOT_FOUND, "%s: key '%s': the file is absent", what, path);
  struct json_object *cur = (struct json_object *)root;
  const char *seg = path;
  for (;;) {
    const char *dot = strchr(seg, '.');
    size_t n = dot ? (size_t)(dot - seg) : strlen(seg);
    char key[256];
    if (n == 0 || n >= sizeof key)
      return brisk_error(BRISK_E_INVALID_ARGUMENT, "%s: key '%s' has an empty or overlong part",
                         what, path);
    memcpy(key, seg, n);
    key[n] = 0;
    if (!json_object_is_type(cur, json_type_object)) {
      if (seg == path)
        return brisk_error(BRISK_E_FORMAT, "%s: key '%s': the document is %s, not an object", what,
                           path, brisk_json_type_name(cur));
      return brisk_error(BRISK_E_FORMAT, "%s: key '%s': '%.*s' is %s, not an object", what, path,
                         (int)(seg - path - 1), path, brisk_json_type_name(cur));
    }
    struct json_object *next = NULL;
    if (!json_object_object_get_ex(cur, key, &next) || json_object_is_type(next, json_type_null))
      return brisk_error(BRISK_E_NOT_FOUND, "%s: no key '%s'", what, path);
    cur = next;
    if (!dot) break;
    seg = dot + 1;
  }
  *out = cur;
  return BRISK_OK;
}

static brisk_status wrong_type(const struct json_object *v, const char *what, const char *path,
                               const char *expected) {
  return brisk_error(BRISK_E_FORMAT, "%s: key '%s' is %s, expected %s", what, path,
                     brisk_json_type_name(v), expected);
}

brisk_status brisk_json_as_int(const struct json_object *v, const char *what, const char *path,
                               int64_t *out) {
  if (json_object_is_type(v, json_type_int)) {
    int64_t i = json_object_get_int64(v);
    /* json-c clamps integers outside int64 to these bounds. */
    if (i == INT64_MAX || i == INT64_MIN)
      return brisk_error(BRISK_E_FORMAT, "%s: key '%s': integer out of range", what, path);
    *out = i;
    return BRISK_OK;
  }
  if (json_object_is_type(v, json_type_double)) {
    double d = json_object_get_double(v);
    if (!isfinite(d) || d != trunc(d) || d < -0x1p63 || d >= 0x1p63)
      return brisk_error(BRISK_E_FORMAT, "%s: key '%s' is %g, expected an integer", what, path, d);
    *out = (int64_t)d;
    return BRISK_OK;
  }
  return wrong_type(v, what, path, "an integer");
}

brisk_status brisk_json_as_uint(const struct json_object *v, const char *what, const char *path,
                                uint64_t *out) {
  if (!json_object_is_type(v, json_type_int)) return wrong_type(v, what, path, "an integer");
  if (json_object_get_int64(v) < 0)
    return brisk_error(BRISK_E_FORMAT, "%s: key '%s' is negative (%lld)", what, path,
                       (long long)json_object_get_int64(v));
  uint64_t u = json_object_get_uint64(v);
  /* json-c clamps integers past uint64 to UINT64_MAX. */
  if (u == UINT64_MAX)
    return brisk_error(BRISK_E_FORMAT, "%s: key '%s': integer out of range", what, path);
  *out = u;
  return BRISK_OK;
}

brisk_status brisk_json_get_int(const struct json_object *root, const char *what, const char *path,
                                int64_t *out) {
  struct json_object *v;
  brisk_status s = brisk_json_find(root, what, path, &v);
  return s != BRISK_OK ? s : brisk_json_as_int(v, what, path, out);
}

brisk_status brisk_json_get_float(const struct json_object *root, const char *what,
                                  const char *path, double *out) {
  struct json_object *v;
  brisk_status s = brisk_json_find(root, what, path, &v);
  if (s != BRISK_OK) return s;
  if (json_object_is_type(v, json_type_int)) {
    int64_t i = json_object_get_int64(v);
    *out = i == INT64_MAX ? (double)json_object_get_uint64(v) : (double)i;
    return BRISK_OK;
  }
  if (!json_object_is_type(v, json_type_double)) return wrong_type(v, what, path, "a number");
  *out = json_object_get_double(v);
  return BRISK_OK;
}

brisk_status brisk_json_get_bool(const struct json_object *root, const char *what, const char *path,
                                 bool *out) {
  struct json_object *v;
  brisk_status s = brisk_json_find(root, what, path, &v);
  if (s != BRISK_OK) return s;
  if (!json_object_is_type(v, json_type_boolean)) return wrong_type(v, what, path, "a boolean");
  *out = json_object_get_boolean(v) != 0;
  return BRISK_OK;
}

brisk_status brisk_json_get_string(const struct json_object *root, const char *what,
                                   const char *path, const char **out, size_t *len) {
  struct json_object *v;
  brisk_status s = brisk_json_find(root, what, path, &v);
  if (s != BRISK_OK) return s;
  if (!json_object_is_type(v, json_type_string)) return wrong_type(v, what, path, "a string");
  *out = json_object_get_string(v);
  if (len) *len = (size_t)json_object_get_string_len(v);
  return BRISK_OK;
}

brisk_status brisk_json_get_int_array(const struct json_object *root, const char *what,
                                      const char *path, int64_t *out, size_t cap, size_t *n) {
  struct json_object *v;
  brisk_status s = brisk_json_find(root, what, path, &v);
  if (s != BRISK_OK) return s;
  if (!json_object_is_type(v, json_type_array))
    return wrong_type(v, what, path, "an array of integers");
  size_t len = json_object_array_length(v);
  /* Validate every element before writing any, so out is untouched on error. */
  for (size_t i = 0; i < len; i++) {
    char elem[300];
    snprintf(elem, sizeof elem, "%s[%zu]", path, i);
    int64_t x;
    s = brisk_json_as_int(json_object_array_get_idx(v, i), what, elem, &x);
    if (s != BRISK_OK) return s;
  }
  *n = len;
  if (len > cap)
    return brisk_error(BRISK_E_BUFFER_TOO_SMALL, "%s: key '%s' has %zu integers, room for %zu",
                       what, path, len, cap);
  for (size_t i = 0; i < len; i++)
    brisk_json_as_int(json_object_array_get_idx(v, i), what, path, &out[i]);
  return BRISK_OK;
}

size_t brisk_json_scan_top_keys(const char *text, size_t len, brisk_json_key_fn fn, void *ctx) {
  size_t members = 0;
  bool key_next = false;
  int depth = 0;
  for (size_t i = 0; i < len; i++) {
    char c = text[i];
    if (c == '"' || c == '\'') { /* json-c accepts single-quoted strings too */
      bool is_key = depth == 1 && key_next, nul = false;
      size_t j = i + 1;
      for (; j < len && text[j] != c; j++) {
        if (text[j] != '\\') continue;
        if (len - j >= 6 && memcmp(text + j + 1, "u0000", 5) == 0) nul = true;
        j++; /* skip the escaped character */
      }
      if (is_key) {
        members++;
        key_next = false;
        if (fn) fn(ctx, text + i + 1, (j < len ? j : len) - (i + 1), nul);
      }
      i = j;
    } else if (c == '{' || c == '[') {
      depth++;
      key_next = depth == 1 && c == '{';
    } else if (c == '}' || c == ']') {
      depth--;
    } else if (c == ',' && depth == 1) {
      key_next = true;
    }
  }
  return members;
}

