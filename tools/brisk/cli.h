/* Shared helpers for brisk subcommands: option parsing and JSON output. */
#ifndef BRISK_TOOLS_CLI_H
#define BRISK_TOOLS_CLI_H

#include <stdbool.h>
#include <stdio.h>

/* Each subcommand: argv[0] is the subcommand name. Returns the exit code. */
typedef int (*cli_command_fn)(int argc, char **argv);

/* Prints "brisk <cmd>: <message>" as one line on stderr and returns 1. */
int cli_fail(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Writes s as a JSON string literal (quotes and escapes included). */
void cli_json_string(FILE *out, const char *s);

/* True if argv contains exactly `flag` (e.g. "--json"). */
bool cli_has_flag(int argc, char **argv, const char *flag);

#endif
