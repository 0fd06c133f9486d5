/* A naive float64 forward pass for one sequence with a contiguous cache, as
 * plain as llama2.c's run.c, independent of brisk's backend: weights are
 * dequantized row by row with the reference dequantizers and every sum is in
 * double. Used only by tests, to check the real forward pass. */
#include "ref_forward.h"

#include "backend/cpu/matmul/pack.h"
#include "core/dtype.h"
#include "quant/quant.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct ref_model {
  const brisk_model *m;
  int64_t n_ctx;
  double *kcache; /* [n_layer][n_ctx][n_head_kv * head_dim] */
  double *vcache; /* [n_layer][n_ctx][n_head_kv * head_dim] */
  int64_t n_past;
  int64_t sink, window, bs, first; /* streaming: window > 0; keys kept from `first` on */
};

void ref_set_stream(ref_model *r, int64_t sink_tokens, int64_t window, int64_t block_size) {
  r->sink = sink_tokens;
  r->window = window;
  r->bs = block_size;
  r->first = 0;
}

ref_model *ref_create(const brisk_model *m, int64_t n_ctx) {
  ref_model *r = calloc(1, sizeof *r);
  const brisk_hparams *hp = &m->hp;
  size_t per = (size_t)hp->n_layer * (size_t)n_ctx * hp->n_head_kv * hp->head_dim;
  r->m = m;
  r->n_ctx = n_ctx;
  r->kcache = calloc(per, sizeof(double));
  r->vcache = calloc(per, sizeof(double));
  return r;
}

void ref_free(ref_model *r) {
  if (!r) return;
  free(r->kcache);
  free(r->vcache);
  free(r);
}

/* Row r as floats; weights regrouped at load (packed ids) are first put back
 * in their stored layout. */
static void row_f32(const brisk_weight *w, int64_t r, float *out) {
  if (!brisk_dtype_is_packed(w->type)) {
    brisk_dequantize_row(w->type, (const char *)w->data + (uint64_t)r * w->row_bytes, out, w->cols);
    return;
  }
  brisk_cpu_packed_row_f32(w->type, w->data, w->rows, w->cols, r, out);
}

/* y[rows] = W x + b */
static void matvec(const brisk_weight *w, const brisk_weight *b, const double *x, double *y) {
  float *row = malloc((size_t)w->cols * sizeof(float));
  for (int64_t r = 0; r < w->rows; r++) {
    row_f32(w, r, row);
    double s = 0;
    for (int64_t c = 0; c < w->cols; c++) s += (double)row[c] * x[c];
    y[r] = s + (b && b->data ? (double)((const float *)b->data)[r] : 0.0);
  }
  free(row);
}

static void rmsnorm(double *out, const double *x, const brisk_weight *w, int64_t n, double eps) {
  double ss = 0;
  for (int64_t i = 0; i < n; i++) ss += x[i] * x[i];
  double inv = 1.0 / sqrt(ss / (double)n + eps);
  for (int64_t i = 0; i < n; i++) out[i] = x[i] * inv * (double)((const float *)w->data)[i];
}

/* Rotates one head at position pos. */
static void rope(double *x, int64_t pos, const brisk_hparams *hp, const float *freq_factors) {
  int64_t n_rot = hp->rope_dim;
  for (int64_t i = 0; i < n_rot / 2; i++) {
    double freq = pow((double)hp->rope_base, -2.0 * (double)i / (double)n_rot);
    if (freq_factors) freq /= freq_factors[i];
    if (hp->rope_scaling == BRISK_HP_ROPE_SCALING_LINEAR) freq /= hp->rope_factor;
    double a = (double)pos * freq, c = cos(a), s = sin(a);
    int64_t i0 = hp->rope_style == BRISK_HP_ROPE_NEOX ? i : 2 * i;
    int64_t i1 = hp->rope_style == BRISK_HP_ROPE_NEOX ? i + n_rot / 2 : 2 * i + 1;
    double x0 = x[i0], x1 = x[i1];
    x[i0] = x0 * c - x1 * s;
    x[i1] = x0 * s + x1 * c;
  }
}

int64_t ref_kv_source(const brisk_model *m, uint32_t layer) {
  /* Written from transformers' Gemma3nTextConfig.kv_sharing_modes, not
   * from brisk's loader: the last n_kv_shared layers reuse the K/V of the
   * last earlier layer of the same type (sliding or full attention). */
  uint32_t n = m->hp.n_layer, first = n - m->hp.n_kv_shared;
  if (m->hp.n_kv_shared == 0 || layer < first) return layer;
  bool sliding = m->layers[layer].sliding_window > 0;
  int64_t last = -1;
  for (uint32_t j = 0; j < first; j++)
    if ((m->layers[j].sliding_window > 0) == sliding) last = j;
  return last;
}

static double silu(double x) { return x / (1.0 + exp(-x)); }

static void ffn(const brisk_weight *g, const brisk_weight *u, const brisk_weight *d,
                const double *x, int64_t n_ff, double *out) {
  double *a = malloc((size_t)n_ff * sizeof(double)), *b = malloc((size_t)n_ff * sizeof(double));
  matvec(g, NULL, x, a);
  matvec(u, NULL, x, b);
  for (int64_t i = 0; i < n_ff; i++) a[i] = silu(a[i]) * b[i];
  matvec(d, NULL, a, out);
  free(a);
  free(b);
}

void ref_eval(ref_model *r, int32_t token, double *logits) {
  const brisk_model *m = r->m;
  const brisk_hparams *hp = &m->hp;
  int64_t d = hp->n_embd, hd = hp->head_dim, nh = hp->n_head, nkv = hp->n_head_kv;
  int64_t qd = nh * hd, kvd = nkv * hd, pos = r->n_past;
  double *x = malloc((size_t)d * sizeof(double)), *h = malloc((size_t)d * sizeof(double));
  double *q = malloc((size_t)qd * sizeof(double)), *att = malloc((size_t)qd * sizeof(double));
  double *o = malloc((size_t)d * sizeof(double)),
         *scores = malloc((size_t)(pos + 1) * sizeof(double));
  float *row = malloc((size_t)d * sizeof(float));
  double *kr = malloc((size_t)hd * sizeof(double));
  /* Streaming: the window moves before this token attends; evicted
   * positions [sink, first) are skipped and close up. */
  int64_t shift = 0;
  if (r->window > 0) {
    if (pos + 1 > r->sink && r->first < r->sink) r->first = r->sink;
    while (pos + 1 - r->first - r->bs >= r->window && r->first + r->bs <= pos) r->first += r->bs;
    if (r->first > r->sink) shift = r->first - r->sink;
  }
  row_f32(&m->token_embd, token, row);
  for (int64_t i = 0; i < d; i++) x[i] = row[i];
  const float *ff = m->rope_freqs.data;
  for (uint32_t l = 0; l < hp->n_layer; l++) {
    const brisk_layer *ly = &m->layers[l];
    int64_t src = ref_kv_source(m, l); /* itself unless it shares */
    double *kc = r->kcache + ((size_t)src * (size_t)r->n_ctx) * (size_t)kvd;
    double *vc = r->vcache + ((size_t)src * (size_t)r->n_ctx) * (size_t)kvd;
    rmsnorm(h, x, &ly->attn_norm, d, hp->rms_eps);
    matvec(&ly->wq, &ly->bq, h, q);
    if (src == (int64_t)l) {
      matvec(&ly->wk, &ly->bk, h, kc + pos * kvd);
      matvec(&ly->wv, &ly->bv, h, vc + pos * kvd);
    }
    for (int64_t hh = 0; hh < nh; hh++) {
      if (ly->q_norm.data) rmsnorm(q + hh * hd, q + hh * hd, &ly->q_norm, hd, hp->rms_eps);
      rope(q + hh * hd, pos - shift, hp, ff);
    }
    for (int64_t hh = 0; hh < nkv && src == (int64_t)l; hh++) {
      double *k = kc + pos * kvd + hh * hd;
      if (ly->k_norm.data) rmsnorm(k, k, &ly->k_norm, hd, hp->rms_eps);
      if (r->window == 0) rope(k, pos, hp, ff); /* streaming: at attention time */
    }
    int64_t first = ly->sliding_window ? pos - ly->sliding_window + 1 : 0;
    if (first < 0) first = 0;
    for (int64_t hh = 0; hh < nh; hh++) {
      int64_t kh = hh / (nh / nkv);
      double mx = -INFINITY, sum = 0;
      for (int64_t t = first; t <= pos; t++) {
        bool gone = r->window > 0 && t >= r->sink && t < r->first;
        const double *k = kc + t * kvd + kh * hd;
        if (r->window > 0 && !gone) { /* rotated by its index within the cache */
          memcpy(kr, k, (size_t)hd * sizeof *kr);
          rope(kr, t < r->sink ? t : t - shift, hp, ff);
          k = kr;
        }
        double s = 0;
        for (int64_t i = 0; !gone && i < hd; i++) s += q[hh * hd + i] * k[i];
        scores[t] = gone ? -INFINITY : s / sqrt((double)hd);
        if (scores[t] > mx) mx = scores[t];
      }
      for (int64_t t = first; t <= pos; t++) sum += (scores[t] = exp(scores[t] - mx));
      for (int64_t i = 0; i < hd; i++) {
        double a = 0;
        for (int64_t t = first; t <= pos; t++)
          if (scores[t] > 0) a += scores[t] / sum * vc[t * kvd + kh * hd + i];
        att[hh * hd + i] = a;
      }
    }
    matvec(&ly->wo, NULL, att, o);
    for (int64_t i = 0; i < d; i++) x[i] += o[i];
    rmsnorm(h, x, &ly->ffn_norm, d, hp->rms_eps);
    if (hp->n_expert == 0) {
      ffn(&ly->ffn_gate, &ly->ffn_up, &ly->ffn_down, h, hp->n_ff, o);
      for (int64_t i = 0; i < d; i++) x[i] += o[i];
    } else {
      int64_t ne = hp->n_expert, k = hp->n_expert_used;
      double *logit = malloc((size_t)ne * sizeof(double));
      int *used = calloc((size_t)ne, sizeof(int));
      matvec(&ly->moe_router, NULL, h, logit);
      double mx = -INFINITY, z = 0;
      for (int64_t e = 0; e < ne; e++) mx = logit[e] > mx ? logit[e] : mx;
      for (int64_t e = 0; e < ne; e++) z += (logit[e] = exp(logit[e] - mx));
      /* top-k by probability (lowest id on ties), weights renormalized */
      int64_t *pick = malloc((size_t)k * sizeof(int64_t));
      double wsum = 0;
      for (int64_t j = 0; j < k; j++) {
        int64_t best = -1;
        for (int64_t e = 0; e < ne; e++)
          if (!used[e] && (best < 0 || logit[e] > logit[best])) best = e;
        used[best] = 1;
        pick[j] = best;
        wsum += logit[best] / z;
      }
      for (int64_t j = 0; j < k; j++) {
        int64_t e = pick[j];
        ffn(&ly->expert_gate[e], &ly->expert_up[e], &ly->expert_down[e], h, hp->n_ff, o);
        double w = logit[e] / z / wsum;
        for (int64_t i = 0; i < d; i++) x[i] += w * o[i];
      }
      free(pick);
      free(used);
      free(logit);
    }
  }
  rmsnorm(h, x, &m->output_norm, d, hp->rms_eps);
  matvec(&m->output, NULL, h, logits);
  r->n_past++;
  free(x);
  free(h);
  free(q);
  free(att);
  free(o);
  free(scores);
  free(row);
  free(kr);
}
