/* The NEON kernels of the packed K-types (q4_k_r8, q5_k_r8, q6_k_r8:
 * pack.h) against Q8_K activation super-blocks; part of mm_neon_body.h. No
 * include guard.
 *
 * Every 32-byte vector of a group-block holds 4 bytes of each of the 8 rows:
 * rows 0-3 in one NEON vector and rows 4-7 in the other, so one dot4
 * against 4 broadcast activation bytes gives each row's partial sum in its
 * own lane. Per row and sub-block the sum is then the base kernels' exact
 * integer, times that row's scale (a lane of a scale vector), and the float
 * steps are mm_neon_k.h's, lane by lane: the scalar bits. */

/* Byte `by` (0..3) of every int32 lane, unsigned. */
NK uint32x4_t lane_byte(uint32x4_t v, int by) {
  return vandq_u32(vshlq_u32(v, vdupq_n_s32(-8 * by)), vdupq_n_u32(0xff));
}

/* q4_k_r8 / q5_k_r8: one group of 8 rows against R activation rows. */
NK void k45_r8_group(const brisk_mm_tile *t, bool five, const uint8_t *g0, int c0, const int R) {
  static const int PERM[4] = {0, 2, 1, 3}; /* pack.h: sub-block of byte b */
  const size_t gbs = BRISK_PACK_ROWS * (five ? sizeof(brisk_block_q5_k) : sizeof(brisk_block_q4_k));
  const size_t qs_at = five ? BRISK_R8_Q5_K_QS : BRISK_R8_Q4_K_QS;
  float32x4_t s[BRISK_MM_MAX_X][2], sm[BRISK_MM_MAX_X][2];
  for (int r = 0; r < R; r++) s[r][0] = s[r][1] = sm[r][0] = sm[r][1] = vdupq_n_f32(0);
  for (int64_t i = 0; i < t->k / BRISK_QK_K; i++) {
    const uint8_t *g = g0 + (size_t)i * gbs;
    prefetch_group(t, g);
    /* sc[sb][half], mn[sb][half]: sub-block sb's 6-bit scale and min, one
     * row per lane */
    int32x4_t sc[8][2], mn[8][2];
    for (int h = 0; h < 2; h++) {
      const uint32x4_t slo = vreinterpretq_u32_u8(vld1q_u8(g + BRISK_R8_Q4_K_SCLO + 16 * h));
      const uint32x4_t mlo = vreinterpretq_u32_u8(vld1q_u8(g + BRISK_R8_Q4_K_MNLO + 16 * h));
      const uint32x4_t hi = vreinterpretq_u32_u8(vld1q_u8(g + BRISK_R8_Q4_K_HI + 16 * h));
      const uint32x4_t m4 = vdupq_n_u32(0xf), m3 = vdupq_n_u32(3);
      for (int by = 0; by < 4; by++) {
        const int a = PERM[by], z = PERM[by] + 4;
        const uint32x4_t sl = lane_byte(slo, by), ml = lane_byte(mlo, by), hb = lane_byte(hi, by);
        sc[a][h] =
            vreinterpretq_s32_u32(vorrq_u32(vandq_u32(sl, m4), vshlq_n_u32(vandq_u32(hb, m3), 4)));
        sc[z][h] = vreinterpretq_s32_u32(
            vorrq_u32(vshrq_n_u32(sl, 4), vshlq_n_u32(vandq_u32(vshrq_n_u32(hb, 2), m3), 4)));
        mn[a][h] = vreinterpretq_s32_u32(
            vorrq_u32(vandq_u32(ml, m4), vshlq_n_u32(vandq_u32(vshrq_n_u32(hb, 4), m3), 4)));
        mn[z][h] = vreinterpretq_s32_u32(
            vorrq_u32(vshrq_n_u32(ml, 4), vshlq_n_u32(vshrq_n_u32(hb, 6), 4)));
      }
    }
    const brisk_block_q8_k *x[BRISK_MM_MAX_X];
    int32x4_t acc[BRISK_MM_MAX_X][2];
    for (int r = 0; r < R; r++) {
      x[r] = (const brisk_block_q8_k *)(t->x + (size_t)r * t->x_stride) + i;
      acc[r][0] = acc[r][1] = vdupq_n_s32(0);
    }
    for (int p = 0; p < 4; p++) { /* sub-blocks 2p (low nibbles) and 2p + 1 (high) */
      int32x4_t lo[BRISK_MM_MAX_X][2], hi[BRISK_MM_MAX_X][2];
      for (int r = 0; r < R; r++) lo[r][0] = lo[r][1] = hi[r][0] = hi[r][1] = vdupq_n_s32(0);
      for (int c = 0; c < 8; c++) { /* elements 4c .. 4c + 3 of both sub-blocks */
        const uint8_t *q = g + qs_at + 32 * (size_t)(4 * c + p);
        const uint8x16_t q0 = vld1q_u8(q), q1 = vld1q_u8(q + 16);
        const uint8x16_t m4 = vdupq_n_u8(0x0f);
        uint8x16_t l0 = vandq_u8(q0, m4), l1 = vandq_u8(q1, m4);
        uint8x16_t h0 = vshrq_n_u8(q0, 4), h1 = vshrq_n_u8(q1, 4);
        if (five) { /* bit sb of the qh bytes of chunk c: the fifth bit of sub-block sb */
          const uint8x16_t e0 = vld1q_u8(g + BRISK_R8_Q5_K_QH + 32 * (size_t)c);
          const uint8x16_t e1 = vld1q_u8(g + BRISK_R8_Q5_K_QH + 32 * (size_t)c + 16);
          l0 = vorrq_u8(l0, bit4_of(e0, 2 * p));
          l1 = vorrq_u8(l1, bit4_of(e1, 2 * p));
          h0 = vorrq_u8(h0, bit4_of(e0, 2 * p + 1));
          h1 = vorrq_u8(h1, bit4_of(e1, 2 * p + 1));
        }
        for (int r = 0; r < R; r++) {
          const int8_t *xq = q8k_qs(x[r]);
          const int8x16_t yl = bcast4(xq + 64 * p + 4 * c), yh = bcast4(xq + 64 * p + 32 + 4 * c);
          lo[r][0] = dot4(lo[r][0], vreinterpretq_s8_u8(l0), yl);
          lo[r][1] = dot4(lo[r][1], vreinterpretq_s8_u8(l1), yl);
          hi[r][0] = dot4(hi[r][0], vreinterpretq_s8_u8(h0), yh);
          hi[r][1] = dot4(hi[r][1], vreinterpretq_s8_u8(h1), yh);
        }
      }
      for (int r = 0; r < R; r++)
        for (int h = 0; h < 2; h++) {
          acc[r][h] = vmlaq_s32(acc[r][h], lo[r][h], sc[2 * p][h]);
          acc[r][h] = vmlaq_s32(acc[r][h], hi[r][h], sc[2 * p + 1][h]);
        }
    }
    const float32x4_t dw0 = f16x4(g + BRISK_R8_Q4_K_D), dw1 = f16x4(g + BRISK_R8_Q4_K_D + 8);
    const float32x4_t mw0 = f16x4(g + BRISK_R8_Q4_K_DMIN), mw1 = f16x4(g + BRISK_R8_Q4_K_DMIN + 8);
    for (int r = 0; r < R; r++) {
      int16x8_t bl, bh;
      q8k_bsums(x[r], &bl, &bh);
      int16_t b32[8]; /* the activation's sums of 32 */
      vst1q_s16(b32, vpaddq_s16(bl, bh));
      int32x4_t mm[2] = {vdupq_n_s32(0), vdupq_n_s32(0)};
      for (int sb = 0; sb < 8; sb++)
        for (int h = 0; h < 2; h++) mm[h] = vmlaq_n_s32(mm[h], mn[sb][h], b32[sb]);
      const float xd = x[r]->d;
      s[r][0] = vaddq_f32(s[r][0], vmulq_f32(vcvtq_f32_s32(acc[r][0]), vmulq_n_f32(dw0, xd)));
      s[r][1] = vaddq_f32(s[r][1], vmulq_f32(vcvtq_f32_s32(acc[r][1]), vmulq_n_f32(dw1, xd)));
      sm[r][0] = vsubq_f32(sm[r][0], vmulq_f32(vcvtq_f32_s32(mm[0]), vmulq_n_f32(mw0, xd)));
      sm[r][1] = vsubq_f32(sm[r][1], vmulq_f32(vcvtq_f32_s32(mm[1]), vmulq_n_f32(mw1, xd)));
    }
  }
  for (int r = 0; r < R; r++) {
    float *y = t->y + (size_t)r * t->y_stride + (size_t)c0;
    vst1q_f32(y, vaddq_f32(s[r][0], sm[r][0]));
    vst1q_f32(y + 4, vaddq_f32(s[r][1], sm[r][1]));
  }
}

/* q6_k_r8: one group of 8 rows against R activation rows. Part p (0..2)
 * of chunk c of half h holds level Lp of group p and 2 bits of L3 at
 * bits 6-7; group s's elements 4c .. 4c + 3 are in sub-block 8h + 2s +
 * c / 4. */
NK void q6k_r8_group(const brisk_mm_tile *t, const uint8_t *g0, int c0, const int R) {
  static const int PERM[4] = {0, 2, 1, 3};
  const size_t gbs = BRISK_PACK_ROWS * sizeof(brisk_block_q6_k);
  float32x4_t s[BRISK_MM_MAX_X][2], sm[BRISK_MM_MAX_X][2];
  for (int r = 0; r < R; r++) s[r][0] = s[r][1] = sm[r][0] = sm[r][1] = vdupq_n_f32(0);
  for (int64_t i = 0; i < t->k / BRISK_QK_K; i++) {
    const uint8_t *g = g0 + (size_t)i * gbs;
    prefetch_group(t, g);
    int32x4_t sc[16][2]; /* [sub-block][half]: int8 scales, one row per lane */
    for (int v = 0; v < 4; v++)
      for (int h = 0; h < 2; h++) {
        const int32x4_t w = vreinterpretq_s32_u8(vld1q_u8(g + BRISK_R8_Q6_K_SC + 32 * v + 16 * h));
        for (int by = 0; by < 4; by++) /* sign-extend byte by of each lane */
          sc[4 * v + PERM[by]][h] = vshrq_n_s32(vshlq_s32(w, vdupq_n_s32(24 - 8 * by)), 24);
      }
    const brisk_block_q8_k *x[BRISK_MM_MAX_X];
    int32x4_t acc[BRISK_MM_MAX_X][2];
    for (int r = 0; r < R; r++) {
      x[r] = (const brisk_block_q8_k *)(t->x + (size_t)r * t->x_stride) + i;
      acc[r][0] = acc[r][1] = vdupq_n_s32(0);
    }
    const uint8x16_t m6 = vdupq_n_u8(0x3f), m3 = vdupq_n_u8(0x03);
    for (int h = 0; h < 2; h++)
      for (int half_c = 0; half_c < 2; half_c++) { /* chunks 0-3 and 4-7: one sub-block each */
        int32x4_t sub[BRISK_MM_MAX_X][4][2];       /* [row][group][half of the 8 rows] */
        for (int r = 0; r < R; r++)
          for (int sg = 0; sg < 4; sg++) sub[r][sg][0] = sub[r][sg][1] = vdupq_n_s32(0);
        for (int c = 4 * half_c; c < 4 * half_c + 4; c++) {
          const uint8_t *q = g + BRISK_R8_Q6_K_Q + 96 * (size_t)(2 * c + h);
          for (int v = 0; v < 2; v++) { /* rows 0-3, 4-7 */
            const uint8x16_t p0 = vld1q_u8(q + 16 * v), p1 = vld1q_u8(q + 32 + 16 * v);
            const uint8x16_t p2 = vld1q_u8(q + 64 + 16 * v);
            int8x16_t lv[4];
            lv[0] = vreinterpretq_s8_u8(vandq_u8(p0, m6));
            lv[1] = vreinterpretq_s8_u8(vandq_u8(p1, m6));
            lv[2] = vreinterpretq_s8_u8(vandq_u8(p2, m6));
            lv[3] = vreinterpretq_s8_u8(
                vorrq_u8(vorrq_u8(vshrq_n_u8(p0, 6), vshlq_n_u8(vshrq_n_u8(p1, 6), 2)),
                         vshlq_n_u8(vandq_u8(vshrq_n_u8(p2, 6), m3), 4)));
            for (int r = 0; r < R; r++) {
              const int8_t *xq = q8k_qs(x[r]) + 128 * h + 4 * c;
              for (int sg = 0; sg < 4; sg++)
                sub[r][sg][v] = dot4(sub[r][sg][v], lv[sg], bcast4(xq + 32 * sg));
            }
          }
        }
        for (int r = 0; r < R; r++)
          for (int sg = 0; sg < 4; sg++)
            for (int v = 0; v < 2; v++)
              acc[r][v] = vmlaq_s32(acc[r][v], sub[r][sg][v], sc[8 * h + 2 * sg + half_c][v]);
      }
    const float32x4_t dw0 = f16x4(g + BRISK_R8_Q6_K_D), dw1 = f16x4(g + BRISK_R8_Q6_K_D + 8);
    for (int r = 0; r < R; r++) {
      int16_t bs[16];
      int16x8_t bl, bh;
      q8k_bsums(x[r], &bl, &bh);
      vst1q_s16(bs, bl);
      vst1q_s16(bs + 8, bh);
      int32x4_t o[2] = {vdupq_n_s32(0), vdupq_n_s32(0)};
      for (int sb = 0; sb < 16; sb++)
        for (int v = 0; v < 2; v++) o[v] = vmlaq_n_s32(o[v], sc[sb][v], bs[sb]);
      const float xd = x[r]->d;
      const float32x4_t dd0 = vmulq_n_f32(dw0, xd), dd1 = vmulq_n_f32(dw1, xd);
      s[r][0] = vaddq_f32(s[r][0], vmulq_f32(vcvtq_f32_s32(acc[r][0]), dd0));
      s[r][1] = vaddq_f32(s[r][1], vmulq_f32(vcvtq_f32_s32(acc[r][1]), dd1));
      sm[r][0] = vsubq_f32(sm[r][0], vmulq_f32(vcvtq_f32_s32(vshlq_n_s32(o[0], 5)), dd0));
      sm[r][1] = vsubq_f32(sm[r][1], vmulq_f32(vcvtq_f32_s32(vshlq_n_s32(o[1], 5)), dd1));
    }
  }
  for (int r = 0; r < R; r++) {
    float *y = t->y + (size_t)r * t->y_stride + (size_t)c0;
    vst1q_f32(y, vaddq_f32(s[r][0], sm[r][0]));
    vst1q_f32(y + 4, vaddq_f32(s[r][1], sm[r][1]));
  }
}

/* type: 0 q4_k, 1 q5_k, 2 q6_k. */
NK void r8_k_tile(const brisk_mm_tile *t, int n_w, int n_x, int type) {
  const size_t gstride = BRISK_PACK_ROWS * t->w_stride;
  for (int c = 0; c < n_w; c += BRISK_PACK_ROWS) {
    const uint8_t *g = t->w + (size_t)(c / BRISK_PACK_ROWS) * gstride;
    if (type == 2) switch (n_x) {
      case 1: q6k_r8_group(t, g, c, 1); break;
      case 2: q6k_r8_group(t, g, c, 2); break;
      case 3: q6k_r8_group(t, g, c, 3); break;
      default: q6k_r8_group(t, g, c, 4); break;
      }
    else
      switch (n_x) {
      case 1: k45_r8_group(t, type == 1, g, c, 1); break;
      case 2: k45_r8_group(t, type == 1, g, c, 2); break;
      case 3: k45_r8_group(t, type == 1, g, c, 3); break;
      default: k45_r8_group(t, type == 1, g, c, 4); break;
      }
  }
}

NKF void NK_NAME(tile_q4_k_r8)(const brisk_mm_tile *t, int n_w, int n_x) {
  r8_k_tile(t, n_w, n_x, 0);
}
NKF void NK_NAME(tile_q5_k_r8)(const brisk_mm_tile *t, int n_w, int n_x) {
  r8_k_tile(t, n_w, n_x, 1);
}
NKF void NK_NAME(tile_q6_k_r8)(const brisk_mm_tile *t, int n_w, int n_x) {
  r8_k_tile(t, n_w, n_x, 2);
}
