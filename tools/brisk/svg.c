#include "svg.h"

#include <math.h>
#include <stdio.h>

#define W 720.0
#define H 420.0
#define LEFT 80.0
#define RIGHT 200.0 /* room for the legend */
#define TOP 40.0
#define BOTTOM 56.0

static const char *const colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                     "#9467bd", "#8c564b", "#e377c2", "#17becf"};

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

bool svg_write(const char *path, const svg_plot *p) {
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
    const char *color = colors[s % (int32_t)(sizeof colors / sizeof colors[0])];
    fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.8\" points=\"", color);
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
            "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
            "stroke-width=\"3\"/>\n",
            W - RIGHT + 12, ly, W - RIGHT + 32, ly, color);
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
