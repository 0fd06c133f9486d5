/* A thin layer over json-c for the JSON files of model folders and the
 * safetensors header: bounded parsing with messages that name the file and
 * the line, and typed lookups of dotted key paths ("rope_scaling.factor").
 *
 * json-c allocates with the C library's malloc, not through brisk's allocator
 * hook, so parsed trees are not counted by brisk_memory_allocated() and are
 * not subject to allocation-failure injection; instead a parse charges a
 * bound of its tree's size to the memory limits (core/memcap.h) until the
 * tree is freed. The buffers this layer reads files into are brisk
 * allocations. Parsed trees are only read after parsing,
 * so concurrent lookups on one tree are safe. */
#ifndef BRISK_FORMAT_JSON_H
#define BRISK_FORMAT_JSON_H

#include "brisk.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct json_object;

/* Nesting limit for every parse: model folders' JSON files nest a handful of
 * levels; the limit bounds the parser's stack. */
#define BRISK_JSON_MAX_DEPTH 64

/* Parses text[0, len) as one JSON value followed only by whitespace. `strict`
 * rejects most non-standard forms json-c otherwise accepts (comments, trailing
 * commas, capitalized literals; json-c still takes single-quoted strings and
 * NaN as a member value); invalid UTF-8 is always rejected. `what` names the source in
 * messages. BRISK_E_FORMAT with line and column on malformed text;
 * BRISK_E_OUT_OF_MEMORY. Free the result with brisk_json_free(). */
brisk_status brisk_json_parse(const char *text, size_t len, bool strict, const char *what,
                              struct json_object **out);

/* Reads and parses a whole file of at most max_bytes (non-strict: Python's
 * json module writes NaN and Infinity), skipping a UTF-8 byte-order mark.
 * BRISK_E_IO if it cannot be opened or read (errno's text in the message) or
 * is not a regular file, BRISK_E_FORMAT if it is larger than max_bytes or
 * malformed. Messages name `path`. */
brisk_status brisk_json_parse_file(const char *path, size_t max_bytes, struct json_object **out);

/* Reads a whole regular file of at most max_bytes into a brisk_malloc'ed,
 * NUL-terminated buffer (free with brisk_free). Errors as above. */
brisk_status brisk_json_read_file(const char *path, size_t max_bytes, char **text, size_t *len);

/* Drops a tree returned by the functions above; NULL is a no-op. */
void brisk_json_free(struct json_object *obj);

/* Typed lookups of `path` below `root`: keys separated by '.', each level an
 * object. A missing key or a JSON null is BRISK_E_NOT_FOUND (Hugging Face
 * configs write null for "not set"); a value or an intermediate level of the
 * wrong type is BRISK_E_FORMAT. Messages read "<what>: key '<path>' ...".
 * Outputs are written only on BRISK_OK. */
brisk_status brisk_json_find(const struct json_object *root, const char *what, const char *path,
                             struct json_object **out);
/* An integer, or a number with an integral value; values json-c had to clamp
 * to the int64 range are rejected as out of range. */
brisk_status brisk_json_get_int(const struct json_object *root, const char *what, const char *path,
                                int64_t *out);
/* Any number (an integer converts). */
brisk_status brisk_json_get_float(const struct json_object *root, const char *what,
                                  const char *path, double *out);
brisk_status brisk_json_get_bool(const struct json_object *root, const char *what, const char *path,
                                 bool *out);
/* The string stays valid as long as the tree. `len` may be NULL; strings
 * may hold escaped NULs, so use len when it matters. */
brisk_status brisk_json_get_string(const struct json_object *root, const char *what,
                                   const char *path, const char **out, size_t *len);
/* An array of integers. *n receives the length; if it exceeds cap, nothing
 * is written to out and BRISK_E_BUFFER_TOO_SMALL is returned. */
brisk_status brisk_json_get_int_array(const struct json_object *root, const char *what,
                                      const char *path, int64_t *out, size_t cap, size_t *n);

/* Conversions of a value already in hand; `what` and `path` only name it in
 * messages. */
brisk_status brisk_json_as_int(const struct json_object *v, const char *what, const char *path,
                               int64_t *out);
brisk_status brisk_json_as_uint(const struct json_object *v, const char *what, const char *path,
                                uint64_t *out);

/* "an object", "an array", "a string", "an integer", "a number", "a boolean"
 * or "null", for messages. */
const char *brisk_json_type_name(const struct json_object *v);

/* Calls fn for each member of the top-level object in `text`, which must
 * already have been accepted by brisk_json_parse(), with the raw text between
 * the key's quotes (escapes not decoded) and whether the key spells an
 * escaped NUL; returns the number of members. json-c keeps only the last of
 * duplicate keys and cuts keys at a NUL, so this is how a caller notices
 * either. fn may be NULL to only count. */
typedef void (*brisk_json_key_fn)(void *ctx, const char *raw, size_t len, bool escaped_nul);
size_t brisk_json_scan_top_keys(const char *text, size_t len, brisk_json_key_fn fn, void *ctx);


#endif
