/* Model loading with progress people can see. Most of a load's time on a
 * cold cache is the first read of the weights, which a mapped file defers to
 * the first decode (where nothing reports progress). On a terminal,
 * cli_load_model first reads the file(s) through the page cache, with a bar
 * in bytes, then shows the loader's own progress (repacking, checks), so the
 * bar moves while the time goes and the first decode finds the pages in
 * memory. A model larger than 3/4 of the available memory is not read
 * ahead (the cache could not keep it): only the loader's progress shows. */
#ifndef BRISK_TOOLS_LOAD_PROGRESS_H
#define BRISK_TOOLS_LOAD_PROGRESS_H

#include "brisk.h"

#include <stdbool.h>
#include <stdint.h>

/* brisk_model_load(path, mp, out), with a progress bar on stderr when
 * `show` (callers pass "stderr is a terminal and no --json"). mp's own
 * progress callback is replaced while the bar is shown. */
brisk_status cli_load_model(const char *path, const brisk_model_params *mp, bool show,
                            brisk_model **out);

/* A progress line on stderr: "label [#####     ]  42%  extra"; redrawn at
 * most every 1/10 s unless done. */
typedef struct cli_bar {
  const char *label;
  double last_draw;
  int last_pct;
  bool drawn;
} cli_bar;

void cli_bar_draw(cli_bar *b, double fraction, const char *extra);
/* Erases the line (if anything was drawn). */
void cli_bar_clear(cli_bar *b);

#endif
