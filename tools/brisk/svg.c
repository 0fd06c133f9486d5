#include "svg.h"

#include <math.h>
#include <stdio.h>

#include <string.h>

/* The plot area is PLOT_W x PLOT_H; the legend on the right is as wide as
 * its longest name needs, and the picture as tall as the legend needs. */
#define PLOT_W 520.0
#define PLOT_H 324.0
#define LEFT 80.0
#define TOP 40.0
#define BOTTOM 56.0
#define LEGEND_ROW 18.0
/* An upper bound of the advance of one character at font-size 12 in the
 * usual sans-serif faces (DejaVu Sans, Liberation Sans, Arial). */
#define CHAR_W 7.6

/* Ten colours that stay apart (Tableau 10); past ten series each colour
 * comes back with another dash pattern, so no two series look alike. */
static const char *const colors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                     "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
static const char *const dashes[] = {"", "6 3", "2 2", "8 3 2 3"};
#define N_COLORS (int32_t)(sizeof colors / sizeof colors[0])
#define N_DASHES (int32_t)(sizeof dashes / sizeof dashes[0])

/* Geometry of one picture (legend-dependent width and height). */
static double W, H, RIGHT;

/* Characters of s as drawn (UTF-8 continuation bytes do not count). */
static size_t text_chars(const char *s) {
  size_t n = 0;
  for (; s && *s; s++) n += ((unsigned char)*s & 0xc0) != 0x80;
  return n;
}

static void put_text(FILE *f, const char *s) {
  for (; s && *s; s++) {
    switch (*s) {
    case '&': fputs("&amp;", f); break;
    case '<': fputs("&lt;", f); break;
    case '>': fputs("&gt;", f); break;
    case '"': fputs("&quot;", f); break;
    default: fputc(*s, f);
    }
  }
}

/* A round tick spacing (1, 2 or 5 x 10^k) giving about 5 intervals. */
static double tick_step(double span) {
  const double raw = span / 5.0, mag = pow(10.0, floor(log10(raw))), r = raw / mag;
  return (r <= 1 ? 1 : r <= 2 ? 2 : r <= 5 ? 5 : 10) * mag;
}

typedef struct axis {
  double lo, hi, step;
} axis;

static axis make_axis(double lo, double hi) {
  if (lo > 0) lo = 0;
  if (!(hi > lo)) hi = lo + 1;
  axis a;
  a.step = tick_step(hi - lo);
  a.lo = floor(lo / a.step) * a.step;
  a.hi = ceil(hi / a.step) * a.step;
  return a;
}

static double px(const axis *a, double x) {
  return LEFT + (x - a->lo) / (a->hi - a->lo) * (W - LEFT - RIGHT);
}
static double py(const axis *a, double y) {
  return H - BOTTOM - (y - a->lo) / (a->hi - a->lo) * (H - TOP - BOTTOM);
}

void svg_style(int32_t s, const char **color, const char **dash) {
  *color = colors[s % N_COLORS];
  *dash = dashes[(s / N_COLORS) % N_DASHES];
}

bool svg_write(const char *path, const svg_plot *p) {
  size_t longest = 0;
  for (int32_t s = 0; s < p->n_series; s++) {
    size_t n = text_chars(p->series[s].name);
    if (n > longest) longest = n;
  }
  RIGHT = 38.0 + CHAR_W * (double)longest + 12.0;
  if (RIGHT < 120.0) RIGHT = 120.0;
  W = LEFT + PLOT_W + RIGHT;
  H = TOP + PLOT_H + BOTTOM;
  const double legend_bottom = TOP + 10 + LEGEND_ROW * p->n_series + 8;
  if (legend_bottom > H) H = legend_bottom;
  double xmin = INFINITY, xmax = -INFINITY, ymin = INFINITY, ymax = -INFINITY;
  for (int32_t s = 0; s < p->n_series; s++)
    for (int32_t i = 0; i < p->series[s].n; i++) {
      const double x = p->series[s].x[i], y = p->series[s].y[i];
      if (!isfinite(x) || !isfinite(y)) continue;
      xmin = fmin(xmin, x), xmax = fmax(xmax, x), ymin = fmin(ymin, y), ymax = fmax(ymax, y);
    }
  if (!isfinite(xmin)) xmin = xmax = ymin = ymax = 0;
  const axis ax = make_axis(xmin, xmax), ay = make_axis(ymin, ymax);
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "cannot write %s\n", path);
    return false;
  }
  fprintf(f,
          "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
          "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"12\">\n",
          W, H, W, H);
  fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
  fprintf(f, "<text x=\"%.1f\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">",
          (LEFT + W - RIGHT) / 2);
  put_text(f, p->title);
  fputs("</text>\n", f);
  /* Grid and tick labels; the +0.5 step guards against rounding. */
  for (double x = ax.lo; x <= ax.hi + 0.5 * ax.step; x += ax.step) {
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n",
            px(&ax, x), TOP, px(&ax, x), H - BOTTOM);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n", px(&ax, x),
            H - BOTTOM + 16, fabs(x) < 1e-12 * ax.step ? 0.0 : x);
  }
  for (double y = ay.lo; y <= ay.hi + 0.5 * ay.step; y += ay.step) {
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", LEFT,
            py(&ay, y), W - RIGHT, py(&ay, y));
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n", LEFT - 6,
            py(&ay, y) + 4, fabs(y) < 1e-12 * ay.step ? 0.0 : y);
  }
  fprintf(f,
          "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
          "stroke=\"black\"/>\n",
          LEFT, TOP, W - LEFT - RIGHT, H - TOP - BOTTOM);
  fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", (LEFT + W - RIGHT) / 2, H - 14);
  put_text(f, p->x_label);
  fprintf(f,
          "</text>\n<text transform=\"translate(18 %.1f) rotate(-90)\" "
          "text-anchor=\"middle\">",
          (TOP + H - BOTTOM) / 2);
  put_text(f, p->y_label);
  fputs("</text>\n", f);
  for (int32_t s = 0; s < p->n_series; s++) {
    const svg_series *se = &p->series[s];
    const char *color, *dash;
    svg_style(s, &color, &dash);
    char dash_attr[48] = "";
    if (dash[0]) snprintf(dash_attr, sizeof dash_attr, " stroke-dasharray=\"%s\"", dash);
    fprintf(f, "<polyline fill=\"none\" stroke=\"%s\"%s stroke-width=\"1.8\" points=\"", color,
            dash_attr);
    double prev_y = NAN;
    for (int32_t i = 0; i < se->n; i++) {
      const double x = se->x[i], y = se->y[i];
      if (!isfinite(x) || !isfinite(y)) continue;
      if (p->step && isfinite(prev_y)) fprintf(f, "%.1f,%.1f ", px(&ax, x), py(&ay, prev_y));
      fprintf(f, "%.1f,%.1f ", px(&ax, x), py(&ay, y));
      prev_y = y;
    }
    fputs("\"/>\n", f);
    if (p->markers)
      for (int32_t i = 0; i < se->n; i++)
        if (isfinite(se->x[i]) && isfinite(se->y[i]))
          fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", px(&ax, se->x[i]),
                  py(&ay, se->y[i]), color);
    const double ly = TOP + 10 + 18.0 * s;
    fprintf(f,
            "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\"%s "
            "stroke-width=\"3\"/>\n",
            W - RIGHT + 12, ly, W - RIGHT + 32, ly, color, dash_attr);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">", W - RIGHT + 38, ly + 4);
    put_text(f, se->name);
    fputs("</text>\n", f);
  }
  fputs("</svg>\n", f);
  const bool ok = !ferror(f);
  if (fclose(f) != 0 || !ok) {
    fprintf(stderr, "cannot write %s\n", path);
    return false;
  }
  return true;
}
