/* Shared helpers for brisk subcommands: option parsing and JSON output. */
#ifndef BRISK_TOOLS_CLI_H
#define BRISK_TOOLS_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Each subcommand: argv[0] is the subcommand name. Returns the exit code. */
typedef int (*cli_command_fn)(int argc, char **argv);

/* Prints "brisk <cmd>: <message>" as one line on stderr and returns 1. */
int cli_fail(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Writes s as a JSON string literal (quotes and escapes included). Bytes
 * that are not valid UTF-8 become U+FFFD (one per maximal invalid subpart),
 * so the output always parses. */
void cli_json_string(FILE *out, const char *s);

/* cli_json_string for n bytes that need not end in NUL (NULs escaped). */
void cli_json_bytes(FILE *out, const char *s, size_t n);

/* The UTF-8 character at p (n >= 1 bytes available): its length, *valid
 * set; or, for bytes that are not one, the length of the invalid part to
 * replace by one U+FFFD (its maximal subpart, as Unicode recommends). */
size_t cli_utf8_char(const unsigned char *p, size_t n, bool *valid);

/* True if argv contains exactly `flag` (e.g. "--json"). */
bool cli_has_flag(int argc, char **argv, const char *flag);

#endif
