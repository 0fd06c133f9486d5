/* The I8MM (smmla) kernels of q8_0 and q4_0, base and _R8 layouts, for
 * tiles of two or more activation rows (GEMM, and GEMV with m >= 2); part
 * of mm_neon_body.h in its I8MM build (mm_neon_i8mm.c). No include guard.
 *
 * smmla multiplies a 2x8 int8 matrix by the transpose of another: with two
 * activation rows (a, b) in the first operand and 8 elements of two weight
 * rows (u, v) in the second, the int32 lanes gain a.u, a.v, b.u, b.v. Four
 * such steps give a 32-element block's four sums at once, the same exact
 * integers as the dot4 kernels (and the scalar ones); the float steps that
 * follow are theirs, lane by lane. An odd activation row, an odd weight
 * row and single-row tiles go to the dot4 kernels above. */

NK int8x16_t lo64(int8x16_t a, int8x16_t b) {
  return vreinterpretq_s8_s64(vzip1q_s64(vreinterpretq_s64_s8(a), vreinterpretq_s64_s8(b)));
}
NK int8x16_t hi64(int8x16_t a, int8x16_t b) {
  return vreinterpretq_s8_s64(vzip2q_s64(vreinterpretq_s64_s8(a), vreinterpretq_s64_s8(b)));
}

/* ---- base layout: weight rows c, c + 1 against P pairs of activation
 * rows (0, 1) and (2, 3). */
NK void q32_mmla(const brisk_mm_tile *t, int type, int c, const int P) {
  const bool q4 = type == NK_Q4_0; /* else q8_0: no offset */
  const uint8_t *w0 = t->w + (size_t)c * t->w_stride, *w1 = w0 + t->w_stride;
  float32x4_t s[2] = {vdupq_n_f32(0), vdupq_n_f32(0)}; /* lanes a.u, a.v, b.u, b.v */
  for (int64_t i = 0; i < t->k / 32; i++) {
    int8x16_t lo0, hi0, lo1, hi1;
    uint16_t d0, d1, m;
    base_block(w0, i, type, &lo0, &hi0, &d0, &m);
    base_block(w1, i, type, &lo1, &hi1, &d1, &m);
    const int8x16_t wv[4] = {lo64(lo0, lo1), hi64(lo0, lo1), lo64(hi0, hi1), hi64(hi0, hi1)};
    const float dw0 = brisk_f16_to_f32(d0), dw1 = brisk_f16_to_f32(d1);
    const float dwl[4] = {dw0, dw1, dw0, dw1};
    const float32x4_t dw = vld1q_f32(dwl);
    for (int p = 0; p < P; p++) {
      const brisk_mm_q8 *xa = (const brisk_mm_q8 *)(t->x + (size_t)(2 * p) * t->x_stride) + i;
      const brisk_mm_q8 *xb = (const brisk_mm_q8 *)(t->x + (size_t)(2 * p + 1) * t->x_stride) + i;
      const int oa = q4 ? ls_total(xa) : 0, ob = q4 ? ls_total(xb) : 0;
      const int32_t offl[4] = {-oa, -oa, -ob, -ob};
      int32x4_t acc = vld1q_s32(offl);
      const int8x16_t a0 = vld1q_s8(xa->qs), a1 = vld1q_s8(xa->qs + 16);
      const int8x16_t b0 = vld1q_s8(xb->qs), b1 = vld1q_s8(xb->qs + 16);
      acc = vmmlaq_s32(acc, lo64(a0, b0), wv[0]);
      acc = vmmlaq_s32(acc, hi64(a0, b0), wv[1]);
      acc = vmmlaq_s32(acc, lo64(a1, b1), wv[2]);
      acc = vmmlaq_s32(acc, hi64(a1, b1), wv[3]);
      const float xdl[4] = {xa->d, xa->d, xb->d, xb->d};
      const float32x4_t scale = vmulq_f32(dw, vld1q_f32(xdl)); /* d_w * d_x per lane */
      s[p] = vaddq_f32(s[p], vmulq_f32(vcvtq_f32_s32(acc), scale));
    }
  }
  for (int p = 0; p < P; p++) {
    float *ya = t->y + (size_t)(2 * p) * t->y_stride + (size_t)c, *yb = ya + t->y_stride;
    ya[0] = vgetq_lane_f32(s[p], 0);
    ya[1] = vgetq_lane_f32(s[p], 1);
    yb[0] = vgetq_lane_f32(s[p], 2);
    yb[1] = vgetq_lane_f32(s[p], 3);
  }
}

/* The tile minus its last activation row (n_x odd): that row as a tile of
 * its own. */
NK brisk_mm_tile last_row(const brisk_mm_tile *t, int n_x) {
  brisk_mm_tile u = *t;
  u.x += (size_t)(n_x - 1) * t->x_stride;
  u.y += (size_t)(n_x - 1) * t->y_stride;
  return u;
}

NK void q32_mmla_tile(const brisk_mm_tile *t, int n_w, int n_x, int type) {
  if (n_x < 2) {
    q32_tile(t, n_w, n_x, type);
    return;
  }
  int c = 0;
  for (; c + 2 <= n_w; c += 2) {
    if (n_x >= 4)
      q32_mmla(t, type, c, 2);
    else
      q32_mmla(t, type, c, 1);
  }
  if (n_x & 1) {
    const brisk_mm_tile u = last_row(t, n_x);
    for (int j = 0; j < c; j++) q32_row(&u, type, j, 1);
  }
  if (c < n_w) switch (n_x) { /* an odd weight row, every activation row */
    case 2: q32_row(t, type, c, 2); break;
    case 3: q32_row(t, type, c, 3); break;
    default: q32_row(t, type, c, 4); break;
    }
}

/* ---- _R8 layout: a group of 8 rows against P pairs of activation rows.
 * Chunks 2q and 2q + 1 hold bytes 8q .. 8q + 7 of each row, 4 and 4: zipped
 * as int32 lanes they give rows (0, 1), (2, 3), (4, 5), (6, 7) as 8
 * consecutive bytes each, an smmla operand. */
NK void zip_rows(uint8x16_t a0, uint8x16_t a1, uint8x16_t b0, uint8x16_t b1, int8x16_t v[4]) {
  const uint32x4_t x0 = vreinterpretq_u32_u8(a0), x1 = vreinterpretq_u32_u8(a1);
  const uint32x4_t y0 = vreinterpretq_u32_u8(b0), y1 = vreinterpretq_u32_u8(b1);
  v[0] = vreinterpretq_s8_u32(vzip1q_u32(x0, y0));
  v[1] = vreinterpretq_s8_u32(vzip2q_u32(x0, y0));
  v[2] = vreinterpretq_s8_u32(vzip1q_u32(x1, y1));
  v[3] = vreinterpretq_s8_u32(vzip2q_u32(x1, y1));
}

/* Activation bytes e .. e + 7 of rows a and b as one smmla operand. */
NK int8x16_t x_pair(const brisk_mm_q8 *xa, const brisk_mm_q8 *xb, int e) {
  return vcombine_s8(vld1_s8(xa->qs + e), vld1_s8(xb->qs + e));
}

NK void r8_mmla_group(const brisk_mm_tile *t, int type, const uint8_t *g0, int c0, const int P) {
  const bool q4 = type == NK_Q4_0;
  const size_t qo = 2 * BRISK_PACK_ROWS; /* the chunks, after d[8] */
  const size_t gbs = BRISK_PACK_ROWS * (q4 ? sizeof(brisk_block_q4_0) : sizeof(brisk_block_q8_0));
  float32x4_t s[2 * 2][2]; /* [activation row][rows 0-3, 4-7] */
  for (int r = 0; r < 2 * P; r++) s[r][0] = s[r][1] = vdupq_n_f32(0);
  for (int64_t i = 0; i < t->k / 32; i++) {
    const uint8_t *g = g0 + (size_t)i * gbs;
    prefetch_group(t, g);
    const brisk_mm_q8 *x[4];
    int32x4_t acc[2][4]; /* [pair][row pair]: lanes a.u, a.v, b.u, b.v */
    for (int p = 0; p < P; p++) {
      x[2 * p] = (const brisk_mm_q8 *)(t->x + (size_t)(2 * p) * t->x_stride) + i;
      x[2 * p + 1] = (const brisk_mm_q8 *)(t->x + (size_t)(2 * p + 1) * t->x_stride) + i;
      const int oa = q4 ? ls_total(x[2 * p]) : 0, ob = q4 ? ls_total(x[2 * p + 1]) : 0;
      const int32_t offl[4] = {-oa, -oa, -ob, -ob};
      for (int j = 0; j < 4; j++) acc[p][j] = vld1q_s32(offl);
    }
    for (int q = 0; q < (q4 ? 2 : 4); q++) {
      const uint8_t *ca = g + qo + 64 * (size_t)q, *cb = ca + 32;
      const uint8x16_t a0 = vld1q_u8(ca), a1 = vld1q_u8(ca + 16);
      const uint8x16_t b0 = vld1q_u8(cb), b1 = vld1q_u8(cb + 16);
      int8x16_t lo[4], hi[4];
      if (q4) { /* low nibbles: elements 8q .., high: 16 + 8q .. */
        const uint8x16_t m4 = vdupq_n_u8(0x0f);
        zip_rows(vandq_u8(a0, m4), vandq_u8(a1, m4), vandq_u8(b0, m4), vandq_u8(b1, m4), lo);
        zip_rows(vshrq_n_u8(a0, 4), vshrq_n_u8(a1, 4), vshrq_n_u8(b0, 4), vshrq_n_u8(b1, 4), hi);
      } else {
        zip_rows(a0, a1, b0, b1, lo);
      }
      for (int p = 0; p < P; p++) {
        const int8x16_t xl = x_pair(x[2 * p], x[2 * p + 1], 8 * q);
        for (int j = 0; j < 4; j++) acc[p][j] = vmmlaq_s32(acc[p][j], xl, lo[j]);
        if (q4) {
          const int8x16_t xh = x_pair(x[2 * p], x[2 * p + 1], 16 + 8 * q);
          for (int j = 0; j < 4; j++) acc[p][j] = vmmlaq_s32(acc[p][j], xh, hi[j]);
        }
      }
    }
    const float32x4_t dw0 = f16x4(g), dw1 = f16x4(g + 8);
    for (int p = 0; p < P; p++) {
      const int64x2_t u0 = vreinterpretq_s64_s32(acc[p][0]), u1 = vreinterpretq_s64_s32(acc[p][1]);
      const int64x2_t u2 = vreinterpretq_s64_s32(acc[p][2]), u3 = vreinterpretq_s64_s32(acc[p][3]);
      const int32x4_t pr[2][2] = {
          {vreinterpretq_s32_s64(vzip1q_s64(u0, u1)), vreinterpretq_s32_s64(vzip1q_s64(u2, u3))},
          {vreinterpretq_s32_s64(vzip2q_s64(u0, u1)), vreinterpretq_s32_s64(vzip2q_s64(u2, u3))}};
      for (int h = 0; h < 2; h++) {
        const int r = 2 * p + h;
        s[r][0] = vaddq_f32(s[r][0], vmulq_f32(vcvtq_f32_s32(pr[h][0]), vmulq_n_f32(dw0, x[r]->d)));
        s[r][1] = vaddq_f32(s[r][1], vmulq_f32(vcvtq_f32_s32(pr[h][1]), vmulq_n_f32(dw1, x[r]->d)));
      }
    }
  }
  for (int r = 0; r < 2 * P; r++) {
    float *y = t->y + (size_t)r * t->y_stride + (size_t)c0;
    vst1q_f32(y, s[r][0]);
    vst1q_f32(y + 4, s[r][1]);
  }
}

NK void r8_mmla_tile(const brisk_mm_tile *t, int n_w, int n_x, int type) {
  if (n_x < 2) {
    r8_tile(t, n_w, n_x, type);
    return;
  }
  const size_t gstride = BRISK_PACK_ROWS * t->w_stride;
  const brisk_mm_tile u = last_row(t, n_x);
  for (int c = 0; c < n_w; c += BRISK_PACK_ROWS) {
    const uint8_t *g = t->w + (size_t)(c / BRISK_PACK_ROWS) * gstride;
    if (n_x >= 4)
      r8_mmla_group(t, type, g, c, 2);
    else
      r8_mmla_group(t, type, g, c, 1);
    if (n_x & 1) r8_group(&u, type, g, c, 1);
  }
}

NKF void NK_NAME(tile_q8_0_mmla)(const brisk_mm_tile *t, int n_w, int n_x) {
  q32_mmla_tile(t, n_w, n_x, NK_Q8_0);
}
NKF void NK_NAME(tile_q4_0_mmla)(const brisk_mm_tile *t, int n_w, int n_x) {
  q32_mmla_tile(t, n_w, n_x, NK_Q4_0);
}
NKF void NK_NAME(tile_q8_0_r8_mmla)(const brisk_mm_tile *t, int n_w, int n_x) {
  r8_mmla_tile(t, n_w, n_x, NK_Q8_0);
}
NKF void NK_NAME(tile_q4_0_r8_mmla)(const brisk_mm_tile *t, int n_w, int n_x) {
  r8_mmla_tile(t, n_w, n_x, NK_Q4_0);
}
