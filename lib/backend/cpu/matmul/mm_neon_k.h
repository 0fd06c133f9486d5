/* The NEON kernels of the K-types (q4_k, q5_k, q6_k) in their base layout,
 * against Q8_K activation super-blocks; part of mm_neon_body.h (compiled
 * once per build, with its NK / dot4 definitions). No include guard.
 *
 * Per super-block and activation row the integer sums are those of
 * mm_scalar.c's term_k45 / term_q6_k, exact in any order: each sub-block's
 * level x activation dot product (dot4 lanes) times its scale, summed in
 * int32 lanes, and the min (q4_k, q5_k) or -32 offset (q6_k) terms from the
 * activation's 16-sums. Then the scalar float steps in the scalar order:
 * s = s + (float)sumi * (d_w * d_x), sm = sm - (float)summ * (dmin_w *
 * d_x), returned as s + sm. Magnitudes: levels at most 63, activations at
 * most 127 in size, so every int32 sum stays far from overflow (q6_k's
 * worst, 256 x 63 x 127 x 128, is below 2^30). */

/* The activation's 16 bsums as two int16 vectors (the struct is packed, so
 * read as bytes). */
NK void q8k_bsums(const brisk_block_q8_k *x, int16x8_t *lo, int16x8_t *hi) {
  const uint8_t *p = (const uint8_t *)x + offsetof(brisk_block_q8_k, bsums);
  *lo = vreinterpretq_s16_u8(vld1q_u8(p));
  *hi = vreinterpretq_s16_u8(vld1q_u8(p + 16));
}

NK const int8_t *q8k_qs(const brisk_block_q8_k *x) {
  return (const int8_t *)((const uint8_t *)x + offsetof(brisk_block_q8_k, qs));
}

/* Bit j of each qh byte as 0x10 (q5_k's fifth bit of sub-block j). */
NK uint8x16_t bit4_of(uint8x16_t qh, int j) {
  return vandq_u8(vtstq_u8(qh, vdupq_n_u8((uint8_t)(1u << j))), vdupq_n_u8(0x10));
}

/* One q4_k / q5_k weight row against R activation rows: each super-block's
 * levels, scales and mins are unpacked once for all R. */
NK void k45_row(const brisk_mm_tile *t, bool five, int c, const int R) {
  const size_t bs = five ? sizeof(brisk_block_q5_k) : sizeof(brisk_block_q4_k);
  const uint8_t *w = t->w + (size_t)c * t->w_stride;
  float s[BRISK_MM_MAX_X] = {0}, sm[BRISK_MM_MAX_X] = {0};
  for (int64_t i = 0; i < t->k / BRISK_QK_K; i++) {
    const uint8_t *b = w + (size_t)i * bs;
    uint16_t d, dmin;
    memcpy(&d, b, 2);
    memcpy(&dmin, b + 2, 2);
    const uint8_t *scales = b + 4;
    const uint8_t *qh = b + 4 + BRISK_K_SCALE_SIZE;
    const uint8_t *qs = five ? qh + BRISK_QK_K / 8 : qh;
    uint8_t sc[8], mn[8];
    for (int j = 0; j < 8; j++) brisk_k4_scale_min(scales, j, &sc[j], &mn[j]);
    const int16x8_t mn16 = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(mn)));
    const uint8x16_t qh0 = five ? vld1q_u8(qh) : vdupq_n_u8(0);
    const uint8x16_t qh1 = five ? vld1q_u8(qh + 16) : vdupq_n_u8(0);
    int32x4_t acc[BRISK_MM_MAX_X];
    for (int r = 0; r < R; r++) acc[r] = vdupq_n_s32(0);
    for (int q = 0; q < 4; q++) { /* 32 qs bytes: sub-block 2q low nibbles, 2q + 1 high */
      const uint8x16_t b0 = vld1q_u8(qs + 32 * q), b1 = vld1q_u8(qs + 32 * q + 16);
      const uint8x16_t m4 = vdupq_n_u8(0x0f);
      uint8x16_t l0 = vandq_u8(b0, m4), l1 = vandq_u8(b1, m4);
      uint8x16_t h0 = vshrq_n_u8(b0, 4), h1 = vshrq_n_u8(b1, 4);
      if (five) {
        l0 = vorrq_u8(l0, bit4_of(qh0, 2 * q));
        l1 = vorrq_u8(l1, bit4_of(qh1, 2 * q));
        h0 = vorrq_u8(h0, bit4_of(qh0, 2 * q + 1));
        h1 = vorrq_u8(h1, bit4_of(qh1, 2 * q + 1));
      }
      for (int r = 0; r < R; r++) {
        const brisk_block_q8_k *x = (const brisk_block_q8_k *)(t->x + (size_t)r * t->x_stride) + i;
        const int8_t *xq = q8k_qs(x) + 64 * q;
        int32x4_t lo = dot4(vdupq_n_s32(0), vreinterpretq_s8_u8(l0), vld1q_s8(xq));
        lo = dot4(lo, vreinterpretq_s8_u8(l1), vld1q_s8(xq + 16));
        int32x4_t hi = dot4(vdupq_n_s32(0), vreinterpretq_s8_u8(h0), vld1q_s8(xq + 32));
        hi = dot4(hi, vreinterpretq_s8_u8(h1), vld1q_s8(xq + 48));
        acc[r] = vmlaq_n_s32(acc[r], lo, sc[2 * q]);
        acc[r] = vmlaq_n_s32(acc[r], hi, sc[2 * q + 1]);
      }
    }
    const float dw = brisk_f16_to_f32(d), mw = brisk_f16_to_f32(dmin);
    for (int r = 0; r < R; r++) {
      const brisk_block_q8_k *x = (const brisk_block_q8_k *)(t->x + (size_t)r * t->x_stride) + i;
      int16x8_t bl, bh;
      q8k_bsums(x, &bl, &bh);
      const int16x8_t b32 = vpaddq_s16(bl, bh); /* sums of 32: |.| <= 4064 */
      const int32x4_t mm =
          vmlal_high_s16(vmull_s16(vget_low_s16(b32), vget_low_s16(mn16)), b32, mn16);
      const int sumi = vaddvq_s32(acc[r]), summ = vaddvq_s32(mm);
      const float xd = x->d;
      s[r] += (float)sumi * (dw * xd);
      sm[r] -= (float)summ * (mw * xd);
    }
  }
  for (int r = 0; r < R; r++) t->y[(size_t)r * t->y_stride + (size_t)c] = s[r] + sm[r];
}

/* One q6_k weight row against R activation rows. Per 128-element half h,
 * ql bytes l and l + 32 and qh byte l (l < 32) hold elements l, l + 32,
 * l + 64 and l + 96 (mm_scalar.c's unpack_q6), so 16 bytes of each give one
 * 16-element sub-block per quarter. */
NK void q6k_row(const brisk_mm_tile *t, int c, const int R) {
  const uint8_t *w = t->w + (size_t)c * t->w_stride;
  float s[BRISK_MM_MAX_X] = {0}, sm[BRISK_MM_MAX_X] = {0};
  for (int64_t i = 0; i < t->k / BRISK_QK_K; i++) {
    const uint8_t *b = w + (size_t)i * sizeof(brisk_block_q6_k);
    const uint8_t *ql = b + offsetof(brisk_block_q6_k, ql);
    const uint8_t *qhb = b + offsetof(brisk_block_q6_k, qh);
    const int8_t *scales = (const int8_t *)(b + offsetof(brisk_block_q6_k, scales));
    uint16_t d;
    memcpy(&d, b + offsetof(brisk_block_q6_k, d), 2);
    const int8x16_t sc = vld1q_s8(scales);
    const int16x8_t sc_lo = vmovl_s8(vget_low_s8(sc)), sc_hi = vmovl_high_s8(sc);
    int32x4_t acc[BRISK_MM_MAX_X];
    for (int r = 0; r < R; r++) acc[r] = vdupq_n_s32(0);
    const uint8x16_t m4 = vdupq_n_u8(0x0f), m3 = vdupq_n_u8(0x03), m30 = vdupq_n_u8(0x30);
    for (int h = 0; h < 2; h++)
      for (int u = 0; u < 2; u++) { /* l = 16u .. 16u + 15 */
        const uint8x16_t L0 = vld1q_u8(ql + 64 * h + 16 * u);
        const uint8x16_t L1 = vld1q_u8(ql + 64 * h + 32 + 16 * u);
        const uint8x16_t H = vld1q_u8(qhb + 32 * h + 16 * u);
        int8x16_t e[4]; /* sub-blocks g = 8h + u + 2p, p = 0..3 */
        e[0] = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(L0, m4), vshlq_n_u8(vandq_u8(H, m3), 4)));
        e[1] = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(L1, m4), vandq_u8(vshlq_n_u8(H, 2), m30)));
        e[2] = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(L0, 4), vandq_u8(H, m30)));
        e[3] = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(L1, 4), vandq_u8(vshrq_n_u8(H, 2), m30)));
        for (int r = 0; r < R; r++) {
          const brisk_block_q8_k *x =
              (const brisk_block_q8_k *)(t->x + (size_t)r * t->x_stride) + i;
          const int8_t *xq = q8k_qs(x);
          for (int p = 0; p < 4; p++) {
            const int g = 8 * h + u + 2 * p;
            acc[r] =
                vmlaq_n_s32(acc[r], dot4(vdupq_n_s32(0), e[p], vld1q_s8(xq + 16 * g)), scales[g]);
          }
        }
      }
    const float dw = brisk_f16_to_f32(d);
    for (int r = 0; r < R; r++) {
      const brisk_block_q8_k *x = (const brisk_block_q8_k *)(t->x + (size_t)r * t->x_stride) + i;
      int16x8_t bl, bh;
      q8k_bsums(x, &bl, &bh);
      int32x4_t o = vmull_s16(vget_low_s16(bl), vget_low_s16(sc_lo));
      o = vmlal_high_s16(o, bl, sc_lo);
      o = vmlal_s16(o, vget_low_s16(bh), vget_low_s16(sc_hi));
      o = vmlal_high_s16(o, bh, sc_hi);
      const int sumi = vaddvq_s32(acc[r]), offs = vaddvq_s32(o);
      const float dd = dw * x->d;
      s[r] += (float)sumi * dd;
      sm[r] -= (float)(32 * offs) * dd;
    }
  }
  for (int r = 0; r < R; r++) t->y[(size_t)r * t->y_stride + (size_t)c] = s[r] + sm[r];
}

/* type: 0 q4_k, 1 q5_k, 2 q6_k. */
NK void k_tile(const brisk_mm_tile *t, int n_w, int n_x, int type) {
  for (int c = 0; c < n_w; c++) {
    if (type == 2) switch (n_x) {
      case 1: q6k_row(t, c, 1); break;
      case 2: q6k_row(t, c, 2); break;
      case 3: q6k_row(t, c, 3); break;
      default: q6k_row(t, c, 4); break;
      }
    else
      switch (n_x) {
      case 1: k45_row(t, type == 1, c, 1); break;
      case 2: k45_row(t, type == 1, c, 2); break;
      case 3: k45_row(t, type == 1, c, 3); break;
      default: k45_row(t, type == 1, c, 4); break;
      }
  }
}

NKF void NK_NAME(tile_q4_k)(const brisk_mm_tile *t, int n_w, int n_x) { k_tile(t, n_w, n_x, 0); }
NKF void NK_NAME(tile_q5_k)(const brisk_mm_tile *t, int n_w, int n_x) { k_tile(t, n_w, n_x, 1); }
NKF void NK_NAME(tile_q6_k)(const brisk_mm_tile *t, int n_w, int n_x) { k_tile(t, n_w, n_x, 2); }
