/* Reading the lines of `brisk run --chat`: on a terminal, libedit (BSD
 * editline) gives line editing with the arrow keys and a history; elsewhere
 * (a pipe, a file, or a build without libedit) lines are read as they come.
 * Ctrl-C while waiting for a line returns LINE_INTERRUPT instead of ending
 * the program (run_catch_interrupt must be installed). */
#ifndef BRISK_TOOLS_LINE_EDIT_H
#define BRISK_TOOLS_LINE_EDIT_H

#include <stdbool.h>

typedef struct line_reader line_reader;

typedef enum line_status { LINE_OK, LINE_EOF, LINE_INTERRUPT } line_status;

/* NULL when out of memory. */
line_reader *line_reader_open(void);

/* True when lines are edited on a terminal (prompts are then shown). */
bool line_reader_interactive(const line_reader *lr);

/* Reads one line, without its newline, into *line (owned by the reader,
 * valid until the next call). prompt is shown on a terminal only. */
line_status line_reader_get(line_reader *lr, const char *prompt, const char **line);

/* Adds a line to the history (arrow up recalls it). */
void line_reader_history_add(line_reader *lr, const char *line);

void line_reader_close(line_reader *lr);

#endif
