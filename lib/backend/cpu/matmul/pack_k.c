/* The _R8 layouts of the K-types (pack.h): one super-block of one row
 * written into, or read back from, its group-block. Every field of a row
 * lands in the 4-byte lane of that row in each 32-byte vector, so rows pack
 * independently, and each mapping is a bijection on the block's bytes (the
 * 6-bit scales of q4_k are re-split, never rounded). */
#include "backend/cpu/matmul/pack.h"

#include "core/dtype.h"
#include "quant/blocks.h"

#include <string.h>

/* Byte b of a row's lane holds sub-block (or scale) PERM[b] of a 4: the
 * kernels' madd pairs then meet the activation sums in their natural order
 * (even bytes 0, 1; odd bytes 2, 3). PERM is its own inverse. */
static const int PERM[4] = {0, 2, 1, 3};

/* ---- q4_k / q5_k: see BRISK_R8_Q4_K_* and BRISK_R8_Q5_K_* in pack.h. The
 * fields of one row's super-block, in the base block or on the stack. */
typedef struct k45_fields {
  uint16_t d, dmin;
  uint8_t scales[BRISK_K_SCALE_SIZE];
  uint8_t *qs; /* [128] */
  uint8_t *qh; /* [32], NULL for q4_k */
} k45_fields;

static void pack_k45(uint8_t *gb, int j, const k45_fields *b) {
  const size_t qs_at = b->qh ? BRISK_R8_Q5_K_QS : BRISK_R8_Q4_K_QS;
  uint8_t sc[8], mn[8];
  for (int s = 0; s < 8; s++) brisk_k4_scale_min(b->scales, s, &sc[s], &mn[s]);
  memcpy(gb + BRISK_R8_Q4_K_D + 2 * j, &b->d, 2);
  memcpy(gb + BRISK_R8_Q4_K_DMIN + 2 * j, &b->dmin, 2);
  for (int by = 0; by < 4; by++) {
    const int a = PERM[by], z = PERM[by] + 4; /* sub-blocks in the low / high half */
    gb[BRISK_R8_Q4_K_SCLO + 4 * j + by] = (uint8_t)((sc[a] & 0xf) | (sc[z] & 0xf) << 4);
    gb[BRISK_R8_Q4_K_MNLO + 4 * j + by] = (uint8_t)((mn[a] & 0xf) | (mn[z] & 0xf) << 4);
    gb[BRISK_R8_Q4_K_HI + 4 * j + by] =
        (uint8_t)(sc[a] >> 4 | (sc[z] >> 4) << 2 | (mn[a] >> 4) << 4 | (mn[z] >> 4) << 6);
  }
  for (int c = 0; c < 8; c++) {
    if (b->qh) memcpy(gb + BRISK_R8_Q5_K_QH + 32 * c + 4 * j, b->qh + 4 * c, 4);
    for (int p = 0; p < 4; p++)
      memcpy(gb + qs_at + 32 * (4 * c + p) + 4 * j, b->qs + 32 * p + 4 * c, 4);
  }
}

static void unpack_k45(const uint8_t *gb, int j, k45_fields *b) {
  const size_t qs_at = b->qh ? BRISK_R8_Q5_K_QS : BRISK_R8_Q4_K_QS;
  uint8_t sc[8], mn[8];
  memcpy(&b->d, gb + BRISK_R8_Q4_K_D + 2 * j, 2);
  memcpy(&b->dmin, gb + BRISK_R8_Q4_K_DMIN + 2 * j, 2);
  for (int by = 0; by < 4; by++) {
    const int a = PERM[by], z = PERM[by] + 4;
    const uint8_t slo = gb[BRISK_R8_Q4_K_SCLO + 4 * j + by];
    const uint8_t mlo = gb[BRISK_R8_Q4_K_MNLO + 4 * j + by];
    const uint8_t hi = gb[BRISK_R8_Q4_K_HI + 4 * j + by];
    sc[a] = (uint8_t)((slo & 0xf) | (hi & 3) << 4);
    sc[z] = (uint8_t)((slo >> 4) | ((hi >> 2) & 3) << 4);
    mn[a] = (uint8_t)((mlo & 0xf) | ((hi >> 4) & 3) << 4);
    mn[z] = (uint8_t)((mlo >> 4) | ((hi >> 6) & 3) << 4);
  }
  /* The base packing (brisk_k4_scale_min's inverse): every one of the 96
   * bits is some scale's or min's bit, so the bytes come back exactly. */
  for (int s = 0; s < 4; s++) {
    b->scales[s] = (uint8_t)((sc[s] & 63) | (sc[s + 4] >> 4) << 6);
    b->scales[s + 4] = (uint8_t)((mn[s] & 63) | (mn[s + 4] >> 4) << 6);
    b->scales[s + 8] = (uint8_t)((sc[s + 4] & 0xf) | (mn[s + 4] & 0xf) << 4);
  }
  for (int c = 0; c < 8; c++) {
    if (b->qh) memcpy(b->qh + 4 * c, gb + BRISK_R8_Q5_K_QH + 32 * c + 4 * j, 4);
    for (int p = 0; p < 4; p++)
      memcpy(b->qs + 32 * p + 4 * c, gb + qs_at + 32 * (4 * c + p) + 4 * j, 4);
  }
}

/* ---- q6_k: see BRISK_R8_Q6_K_* in pack.h. */

/* Offset of row j's 4 bytes of part (0..2) of half h, chunk c. */
static size_t q6_at(int c, int h, int part, int j) {
  return BRISK_R8_Q6_K_Q + 96 * (size_t)(2 * c + h) + 32 * (size_t)part + 4 * (size_t)j;
}

/* Level (0..63) of element l (0..31) of group s (0..3) of half h. */
static uint8_t q6_level(const brisk_block_q6_k *b, int h, int s, int l) {
  const uint8_t lo = (uint8_t)((b->ql[64 * h + 32 * (s % 2) + l] >> (4 * (s / 2))) & 0xf);
  return (uint8_t)(lo | ((b->qh[32 * h + l] >> (2 * s)) & 3) << 4);
}

static void pack_q6_k(uint8_t *gb, int j, const brisk_block_q6_k *b) {
  memcpy(gb + BRISK_R8_Q6_K_D + 2 * j, &b->d, 2);
  for (int v = 0; v < 4; v++)
    for (int by = 0; by < 4; by++)
      gb[BRISK_R8_Q6_K_SC + 32 * v + 4 * j + by] = (uint8_t)b->scales[4 * v + PERM[by]];
  for (int c = 0; c < 8; c++)
    for (int h = 0; h < 2; h++)
      for (int e = 0; e < 4; e++) {
        const int l = 4 * c + e;
        const uint8_t l3 = q6_level(b, h, 3, l);
        for (int part = 0; part < 3; part++)
          gb[q6_at(c, h, part, j) + (size_t)e] =
              (uint8_t)(q6_level(b, h, part, l) | ((l3 >> (2 * part)) & 3) << 6);
      }
}

static void unpack_q6_k(const uint8_t *gb, int j, brisk_block_q6_k *b) {
  memcpy(&b->d, gb + BRISK_R8_Q6_K_D + 2 * j, 2);
  for (int v = 0; v < 4; v++)
    for (int by = 0; by < 4; by++)
      b->scales[4 * v + PERM[by]] = (int8_t)gb[BRISK_R8_Q6_K_SC + 32 * v + 4 * j + by];
  for (int c = 0; c < 8; c++)
    for (int h = 0; h < 2; h++)
      for (int e = 0; e < 4; e++) {
        const int l = 4 * c + e;
        uint8_t lv[4]; /* [group s] */
        lv[3] = 0;
        for (int part = 0; part < 3; part++) {
          const uint8_t x = gb[q6_at(c, h, part, j) + (size_t)e];
          lv[part] = x & 0x3f;
          lv[3] |= (uint8_t)((x >> 6) << (2 * part));
        }
        b->ql[64 * h + l] = (uint8_t)((lv[0] & 0xf) | (lv[2] & 0xf) << 4);
        b->ql[64 * h + 32 + l] = (uint8_t)((lv[1] & 0xf) | (lv[3] & 0xf) << 4);
        b->qh[32 * h + l] =
            (uint8_t)(lv[0] >> 4 | (lv[1] >> 4) << 2 | (lv[2] >> 4) << 4 | (lv[3] >> 4) << 6);
      }
}

bool brisk_cpu_pack_k_known(uint32_t type) {
  return type == (BRISK_DTYPE_Q4_K | BRISK_DTYPE_PACKED_R8) ||
         type == (BRISK_DTYPE_Q5_K | BRISK_DTYPE_PACKED_R8) ||
         type == (BRISK_DTYPE_Q6_K | BRISK_DTYPE_PACKED_R8);
}

void brisk_cpu_pack_k_block(uint32_t packed_type, uint8_t *gb, int j, const uint8_t *src) {
  const uint32_t base = brisk_dtype_base(packed_type);
  if (base == BRISK_DTYPE_Q6_K) {
    brisk_block_q6_k b;
    memcpy(&b, src, sizeof b);
    pack_q6_k(gb, j, &b);
    return;
  }
  brisk_block_q5_k b5;
  brisk_block_q4_k b4;
  k45_fields f;
  if (base == BRISK_DTYPE_Q5_K) {
    memcpy(&b5, src, sizeof b5);
    f = (k45_fields){.d = b5.d, .dmin = b5.dmin, .qs = b5.qs, .qh = b5.qh};
    memcpy(f.scales, b5.scales, sizeof f.scales);
  } else {
    memcpy(&b4, src, sizeof b4);
    f = (k45_fields){.d = b4.d, .dmin = b4.dmin, .qs = b4.qs, .qh = NULL};
    memcpy(f.scales, b4.scales, sizeof f.scales);
  }
  pack_k45(gb, j, &f);
}

void brisk_cpu_unpack_k_block(uint32_t packed_type, const uint8_t *gb, int j, uint8_t *dst) {
  const uint32_t base = brisk_dtype_base(packed_type);
  if (base == BRISK_DTYPE_Q6_K) {
    brisk_block_q6_k b;
    unpack_q6_k(gb, j, &b);
    memcpy(dst, &b, sizeof b);
  } else if (base == BRISK_DTYPE_Q5_K) {
    brisk_block_q5_k b;
    k45_fields f = {.qs = b.qs, .qh = b.qh};
    unpack_k45(gb, j, &f);
    b.d = f.d, b.dmin = f.dmin;
    memcpy(b.scales, f.scales, sizeof b.scales);
    memcpy(dst, &b, sizeof b);
  } else {
    brisk_block_q4_k b;
    k45_fields f = {.qs = b.qs, .qh = NULL};
    unpack_k45(gb, j, &f);
    b.d = f.d, b.dmin = f.dmin;
    memcpy(b.scales, f.scales, sizeof b.scales);
    memcpy(dst, &b, sizeof b);
  }
}
