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
 * that are not valid UTF-8 become U+FFFD, so the output always parses. */
void cli_json_string(FILE *out, const char *s);

/* cli_json_string for n bytes that need not end in NUL (NULs escaped). */
void cli_json_bytes(FILE *out, const char *s, size_t n);

/* Length of the valid UTF-8 character at p (n bytes available), 0 if the
 * bytes there are not one. */
size_t cli_utf8_valid_prefix(const unsigned char *p, size_t n);

/* True if argv contains exactly `flag` (e.g. "--json"). */
bool cli_has_flag(int argc, char **argv, const char *flag);

#endif
