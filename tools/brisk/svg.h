/* Line plots as standalone SVG files, written by hand (no dependencies):
 * axes with round ticks, one polyline (with point markers) per series in
 * its own colour and dash pattern, and a legend sized to its names. */
#ifndef BRISK_TOOLS_SVG_H
#define BRISK_TOOLS_SVG_H

#include <stdbool.h>
#include <stdint.h>

typedef struct svg_series {
  const char *name;
  const double *x, *y; /* [n] points, drawn in order */
  int32_t n;
} svg_series;

typedef struct svg_plot {
  const char *title, *x_label, *y_label;
  bool step;    /* a staircase (for CDFs) instead of straight segments */
  bool markers; /* a dot at every point */
  const svg_series *series;
  int32_t n_series;
} svg_plot;

/* The colour and dash pattern ("" for solid) of series s: distinct pairs
 * for the first 40 series. */
void svg_style(int32_t s, const char **color, const char **dash);

/* Writes the plot to path; false (and a message on stderr) on I/O errors.
 * Non-finite points are skipped. Both axes start at 0 unless a value is
 * negative. */
bool svg_write(const char *path, const svg_plot *plot);

#endif
