/* The SIMT emulation itself: geometry, barriers, every shuffle kind and width,
 * votes and reductions with partial masks, static and dynamic shared memory,
 * atomics, many blocks, a block of 1024 threads, and launches that must be
 * rejected (bad configurations, misused warp operations, deadlocks) without
 * breaking later launches. Expected values come from a host model written
 * from the CUDA programming guide's definitions. */
#include "simt.h"

#include "core/half.h"

extern "C" {
#include "test_support.h"
}

#include <stdlib.h>
#include <string.h>

#include <thread>
#include <vector>

static unsigned ltid() {
  return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}
static unsigned lblock() { return blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z); }

/* ---- geometry ------------------------------------------------------------ */

static __global__ void k_geometry(unsigned *out /* [blocks][threads][6] */) {
  unsigned n = blockDim.x * blockDim.y * blockDim.z;
  unsigned *o = out + ((size_t)lblock() * n + ltid()) * 6;
  o[0] = threadIdx.x, o[1] = threadIdx.y, o[2] = threadIdx.z;
  o[3] = blockIdx.x, o[4] = blockIdx.y, o[5] = blockIdx.z;
}

static void test_geometry(void **state) {
  (void)state;
  dim3 grid(3, 2, 2), block(8, 4, 3);
  const unsigned nb = 12, nt = 96;
  std::vector<unsigned> out(nb * nt * 6, 0xdead);
  assert_int_equal(BRISK_LAUNCH(k_geometry, grid, block, 0, nullptr, out.data()), 0);
  for (unsigned b = 0; b < nb; b++)
    for (unsigned t = 0; t < nt; t++) {
      const unsigned *o = &out[(b * nt + t) * 6];
      assert_int_equal(o[0], t % 8);
      assert_int_equal(o[1], t / 8 % 4);
      assert_int_equal(o[2], t / 32);
      assert_int_equal(o[3], b % 3);
      assert_int_equal(o[4], b / 3 % 2);
      assert_int_equal(o[5], b / 6);
    }
}

/* ---- barriers ------------------------------------------------------------ */

/* Rounds of write, barrier, read a neighbour's slot, barrier: without a real
 * barrier some thread would read a slot before its owner wrote it. */
static __global__ void k_barrier(int rounds, int *out /* [blocks][threads] */) {
  BRISK_DYN_SHARED(int, s);
  const unsigned n = blockDim.x, t = threadIdx.x;
  int v = (int)(t + 1000 * blockIdx.x);
  for (int r = 1; r <= rounds; r++) {
    s[t] = v;
    __syncthreads();
    v = s[(t + (unsigned)r) % n] + 1;
    __syncthreads();
  }
  out[blockIdx.x * n + t] = v;
}

static void test_barrier(void **state) {
  (void)state;
  for (unsigned n : {1u, 31u, 96u, 1024u}) {
    const int rounds = 5, blocks = 3;
    std::vector<int> out(blocks * n, -1);
    assert_int_equal(BRISK_LAUNCH(k_barrier, dim3(blocks), dim3(n), n * sizeof(int), nullptr,
                                  rounds, out.data()),
                     0);
    for (int b = 0; b < blocks; b++)
      for (unsigned t = 0; t < n; t++) {
        unsigned src = t;
        for (int r = 1; r <= rounds; r++) src = (src + (unsigned)r) % n;
        assert_int_equal(out[b * n + t], (int)(src + 1000 * b) + rounds);
      }
  }
}

/* __syncthreads_count/and/or, and a 1024-thread tree reduction. */
static __global__ void k_block_1024(const int *in, int *out /* [4] */) {
  BRISK_SHARED(int, s, 1024);
  const unsigned t = threadIdx.x;
  s[t] = in[t];
  int c = __syncthreads_count(in[t] % 3 == 0);
  int all = __syncthreads_and(in[t] >= 0);
  int any = __syncthreads_or(in[t] == 777);
  for (unsigned half = 512; half > 0; half >>= 1) {
    if (t < half) s[t] += s[t + half];
    __syncthreads();
  }
  if (t == 0) out[0] = s[0], out[1] = c, out[2] = all, out[3] = any;
}

static void test_block_1024(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("simt_block_1024");
  std::vector<int> in(1024);
  int sum = 0, count = 0, any = 0;
  for (int &v : in) {
    v = (int)(test_rng_u64(&r) % 1000);
    sum += v, count += v % 3 == 0, any |= v == 777;
  }
  int out[4] = {0};
  assert_int_equal(BRISK_LAUNCH(k_block_1024, dim3(1), dim3(1024), 0, nullptr, in.data(), out), 0);
  assert_int_equal(out[0], sum);
  assert_int_equal(out[1], count);
  assert_int_equal(out[2], 1);
  assert_int_equal(out[3], any);
  in[5] = -1, in[9] = 777;
  assert_int_equal(BRISK_LAUNCH(k_block_1024, dim3(1), dim3(1024), 0, nullptr, in.data(), out), 0);
  assert_int_equal(out[2], 0);
  assert_int_equal(out[3], 1);
}

/* ---- shuffles ------------------------------------------------------------ */

/* Host model: segments of `width` lanes; idx reads srcLane modulo width in
 * the caller's segment; up/down read lane -/+ delta unless that leaves the
 * segment (then the caller's own value); xor reads lane ^ m unless that is
 * in a later segment. */
static unsigned model_src(int kind, unsigned lane, int arg, unsigned width) {
  unsigned base = lane / width * width;
  switch (kind) {
  case 0: return base + (unsigned)arg % width;
  case 1: return lane % width >= (unsigned)arg ? lane - (unsigned)arg : lane;
  case 2: return lane % width + (unsigned)arg < width ? lane + (unsigned)arg : lane;
  default: return (lane ^ (unsigned)arg) < base + width ? lane ^ (unsigned)arg : lane;
  }
}

template <typename T>
static __global__ void k_shfl(const T *in, const int *args /* [threads][4] */, int width,
                              T *out /* [threads][4] */) {
  const unsigned t = threadIdx.x;
  const T v = in[t];
  const int *a = args + 4 * t;
  out[4 * t + 0] = __shfl_sync(0xffffffffu, v, a[0], width);
  out[4 * t + 1] = __shfl_up_sync(0xffffffffu, v, (unsigned)a[1], width);
  out[4 * t + 2] = __shfl_down_sync(0xffffffffu, v, (unsigned)a[2], width);
  out[4 * t + 3] = __shfl_xor_sync(0xffffffffu, v, a[3], width);
}

template <typename T> static void check_shfl(test_rng *r, T (*make)(test_rng *)) {
  const unsigned n = 96; /* three warps */
  for (unsigned width = 1; width <= 32; width *= 2) {
    std::vector<T> in(n), out(4 * n);
    std::vector<int> args(4 * n);
    for (unsigned t = 0; t < n; t++) {
      in[t] = make(r);
      /* Per-lane source lanes; deltas and xor masks must agree across the
       * warp for a meaningful exchange but need not: any value is legal. */
      args[4 * t + 0] = (int)(test_rng_u64(r) % 64);
      args[4 * t + 1] = (int)(test_rng_u64(r) % (width + 1));
      args[4 * t + 2] = (int)(test_rng_u64(r) % (width + 1));
      args[4 * t + 3] = (int)(test_rng_u64(r) % 32);
    }
    assert_int_equal(BRISK_LAUNCH(k_shfl<T>, dim3(1), dim3(n), 0, nullptr, in.data(), args.data(),
                                  (int)width, out.data()),
                     0);
    for (unsigned t = 0; t < n; t++)
      for (int k = 0; k < 4; k++) {
        unsigned src = t / 32 * 32 + model_src(k, t % 32, args[4 * t + k], width);
        if (memcmp(&out[4 * t + k], &in[src], sizeof(T)) != 0) {
          fprintf(stderr, "shuffle kind %d width %u thread %u arg %d: wrong source (want %u)\n", k,
                  width, t, args[4 * t + k], src);
          fail();
        }
      }
  }
}

static int make_int(test_rng *r) { return (int)test_rng_u64(r); }
static float make_float(test_rng *r) { return (float)test_rng_normal(r); }
static double make_double(test_rng *r) { return test_rng_normal(r) * 1e100; }
static long long make_ll(test_rng *r) { return (long long)test_rng_u64(r); }

static void test_shuffles(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("simt_shuffles");
  check_shfl<int>(&r, make_int);
  check_shfl<float>(&r, make_float);
  check_shfl<double>(&r, make_double);
  check_shfl<long long>(&r, make_ll);
}

/* ---- partial masks: votes, reductions, shuffles, __syncwarp -------------- */

/* Each warp splits into the lanes of masks[warp] and the rest; both groups
 * run their own meetings, in different orders, at the same time. */
static __global__ void k_partial(const unsigned *masks /* [warps] */, const int *pred,
                                 const unsigned *vals, unsigned *out /* [threads][6] */) {
  const unsigned t = threadIdx.x, lane = t % 32;
  const unsigned all = 0xffffffffu, m0 = masks[t / 32];
  const bool in0 = m0 >> lane & 1;
  const unsigned m = in0 ? m0 : all & ~m0;
  unsigned *o = out + 6 * t;
  /* The next lane of my group, cyclically: inside the mask by construction. */
  unsigned next = lane;
  do next = (next + 1) % 32;
  while (!(m >> next & 1));
  if (in0) {
    o[0] = __ballot_sync(m, pred[t]);
    o[1] = (unsigned)__any_sync(m, pred[t]);
    __syncwarp(m);
    o[2] = (unsigned)__all_sync(m, pred[t]);
    o[3] = __shfl_sync(m, vals[t], (int)next);
    o[4] = __reduce_add_sync(m, vals[t]);
    o[5] = (unsigned)__reduce_max_sync(m, (int)vals[t]);
  } else {
    o[3] = __shfl_sync(m, vals[t], (int)next);
    o[5] = (unsigned)__reduce_max_sync(m, (int)vals[t]);
    o[2] = (unsigned)__all_sync(m, pred[t]);
    o[0] = __ballot_sync(m, pred[t]);
    o[4] = __reduce_add_sync(m, vals[t]);
    o[1] = (unsigned)__any_sync(m, pred[t]);
  }
}

static void test_partial_masks(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("simt_partial_masks");
  const unsigned n = 128;
  for (int iter = 0; iter < 20; iter++) {
    std::vector<unsigned> masks(n / 32), vals(n), out(6 * n);
    std::vector<int> pred(n);
    for (unsigned &m : masks) {
      m = (unsigned)test_rng_u64(&r);
      if (iter == 0) m = 0xffffffffu; /* one group */
      if (iter == 1) m = 1;           /* a lone lane */
      if (m == 0) m = 0x80000000u;
    }
    for (unsigned t = 0; t < n; t++) {
      pred[t] = iter == 2 ? 1 : (int)(test_rng_u64(&r) % 3 == 0) * (int)(t + 1);
      vals[t] = (unsigned)(test_rng_u64(&r) % 100000);
    }
    assert_int_equal(BRISK_LAUNCH(k_partial, dim3(1), dim3(n), 0, nullptr, masks.data(),
                                  pred.data(), vals.data(), out.data()),
                     0);
    for (unsigned t = 0; t < n; t++) {
      unsigned w = t / 32, lane = t % 32;
      unsigned m = masks[w] >> lane & 1 ? masks[w] : ~masks[w];
      unsigned ballot = 0, sum = 0;
      int mx = -1;
      for (unsigned l = 0; l < 32; l++)
        if (m >> l & 1) {
          ballot |= (pred[w * 32 + l] != 0) << l;
          sum += vals[w * 32 + l];
          mx = mx > (int)vals[w * 32 + l] ? mx : (int)vals[w * 32 + l];
        }
      unsigned next = lane;
      do next = (next + 1) % 32;
      while (!(m >> next & 1));
      const unsigned *o = &out[6 * t];
      assert_int_equal(o[0], ballot);
      assert_int_equal(o[1], ballot != 0);
      assert_int_equal(o[2], ballot == m);
      assert_int_equal(o[3], vals[w * 32 + next]);
      assert_int_equal(o[4], sum);
      assert_int_equal((int)o[5], mx);
    }
  }
}

/* ---- shared memory ------------------------------------------------------- */

static __device__ int *helper_shared() {
  BRISK_SHARED(int, h, 256);
  return h;
}

/* Three static arrays (one in a helper, so the same for both calls) and the
 * dynamic one must be distinct, block-wide, and fresh in every block. */
static __global__ void k_shared(int *out /* [blocks][threads][6] */) {
  BRISK_SHARED(int, a, 256);
  BRISK_SHARED(float, b, 256);
  BRISK_DYN_SHARED(int, d);
  const unsigned t = threadIdx.x, n = blockDim.x, nxt = (t + 1) % n;
  int *o = out + ((size_t)blockIdx.x * n + t) * 6;
  o[5] = a[t]; /* before any write: the fill pattern, in every block */
  __syncthreads();
  int *h = helper_shared();
  a[t] = (int)t;
  b[t] = -(float)t;
  d[t] = 2 * (int)t + (int)blockIdx.x;
  h[t] = 3 * (int)t;
  __syncthreads();
  o[0] = a[nxt];
  o[1] = (int)b[nxt];
  o[2] = d[nxt];
  o[3] = helper_shared()[nxt];
  o[4] = (int)(helper_shared() == h);
}

static void test_shared(void **state) {
  (void)state;
  const unsigned n = 200, blocks = 4;
  std::vector<int> out(blocks * n * 6);
  assert_int_equal(
      BRISK_LAUNCH(k_shared, dim3(blocks), dim3(n), n * sizeof(int), nullptr, out.data()), 0);
  for (unsigned b = 0; b < blocks; b++)
    for (unsigned t = 0; t < n; t++) {
      const int *o = &out[(b * n + t) * 6];
      unsigned nxt = (t + 1) % n;
      assert_int_equal(o[0], (int)nxt);
      assert_int_equal(o[1], -(int)nxt);
      assert_int_equal(o[2], 2 * (int)nxt + (int)b);
      assert_int_equal(o[3], 3 * (int)nxt);
      assert_int_equal(o[4], 1);
      assert_int_equal(o[5], -1); /* 0xffffffff */
    }
}

/* ---- atomics and many blocks --------------------------------------------- */

static __global__ void k_atomics(int *cnt, float *fsum, int *imax, int *imin,
                                 unsigned long long *cas_cnt, unsigned *block_sums) {
  BRISK_SHARED(unsigned, local, 1);
  const unsigned t = threadIdx.x, b = lblock();
  if (t == 0) *local = 0;
  __syncthreads();
  atomicAdd(cnt, 1);
  atomicAdd(fsum, (float)(t % 4)); /* small integers: exact in any order */
  atomicMax(imax, (int)(b * 1000 + t));
  atomicMin(imin, -(int)(b * 1000 + t));
  unsigned long long old = *cas_cnt, seen;
  while ((seen = atomicCAS(cas_cnt, old, old + 1)) != old) old = seen;
  atomicAdd(local, t);
  __syncthreads();
  if (t == 0) block_sums[b] = *local;
}

static void test_atomics_many_blocks(void **state) {
  (void)state;
  const dim3 grid(1000, 3, 2);
  const unsigned threads = 64, nb = 6000;
  int cnt = 0, imax = -1, imin = 1;
  float fsum = 0;
  unsigned long long cas = 0;
  std::vector<unsigned> sums(nb, 0);
  assert_int_equal(BRISK_LAUNCH(k_atomics, grid, dim3(threads), 0, nullptr, &cnt, &fsum, &imax,
                                &imin, &cas, sums.data()),
                   0);
  assert_int_equal(cnt, (int)(nb * threads));
  assert_true(fsum == (float)(nb * (threads / 4) * 6));
  assert_int_equal(imax, (int)((nb - 1) * 1000 + threads - 1));
  assert_int_equal(imin, -(int)((nb - 1) * 1000 + threads - 1));
  assert_int_equal(cas, (unsigned long long)nb * threads);
  for (unsigned b = 0; b < nb; b++) assert_int_equal(sums[b], threads * (threads - 1) / 2);
}

/* ---- conversions and cache-hinted accesses -------------------------------- */

/* The half/bfloat16 intrinsics must round exactly like lib/core/half.h (the
 * CPU backend's conversions), and the hinted loads/stores move values. */
static __global__ void k_convert(const float *in, unsigned short *h, unsigned short *bf,
                                 float *back, int n) {
  for (int i = (int)threadIdx.x; i < n; i += (int)blockDim.x) {
    const float v = __ldcs(in + i);
    const __half hv = __float2half_rn(v);
    const __nv_bfloat16 bv = __float2bfloat16_rn(__ldg(in + i));
    __stcs(h + i, __half_as_ushort(hv));
    __stwt(bf + i, __bfloat16_as_ushort(bv));
    const __half2 pair = __halves2half2(hv, __ushort_as_half(__half_as_ushort(hv)));
    back[2 * i] = i % 2 ? __high2float(pair) : __low2float(pair);
    back[2 * i + 1] = __bfloat162float(bv);
  }
}

static void test_conversions(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("simt_conversions");
  const int n = 4096;
  std::vector<float> in(n), back(2 * n);
  std::vector<unsigned short> h(n), bf(n);
  for (int i = 0; i < n; i++) {
    /* Magnitudes from subnormal to overflow for f16, and specials. */
    in[i] = (float)(test_rng_normal(&r) * ldexp(1.0, (int)(test_rng_u64(&r) % 60) - 30));
  }
  in[0] = INFINITY, in[1] = -INFINITY, in[2] = NAN, in[3] = 65520.0f, in[4] = 65519.0f;
  in[5] = 0x1p-25f, in[6] = 0x1.8p-25f, in[7] = -0.0f;
  assert_int_equal(BRISK_LAUNCH(k_convert, dim3(1), dim3(128), 0, nullptr, in.data(), h.data(),
                                bf.data(), back.data(), n),
                   0);
  for (int i = 0; i < n; i++) {
    assert_int_equal(h[i], brisk_f32_to_f16(in[i]));
    assert_int_equal(bf[i], brisk_f32_to_bf16(in[i]));
    float want_h = brisk_f16_to_f32(h[i]), want_b = brisk_bf16_to_f32(bf[i]);
    assert_true(memcmp(&back[2 * i], &want_h, 4) == 0 || (isnan(back[2 * i]) && isnan(want_h)));
    assert_true(memcmp(&back[2 * i + 1], &want_b, 4) == 0);
  }
}

/* ---- launches that must fail cleanly ------------------------------------- */

static __global__ void k_flag(int *flag) { *flag = 1; }

static void test_invalid_launch(void **state) {
  (void)state;
  const struct {
    dim3 grid, block;
    size_t smem;
  } bad[] = {
      {dim3(1), dim3(1025), 0},
      {dim3(1), dim3(1024, 2), 0},
      {dim3(1), dim3(1, 1, 65), 0},
      {dim3(0), dim3(32), 0},
      {dim3(1, 65536), dim3(32), 0},
      {dim3(1), dim3(0), 0},
      {dim3(1), dim3(32), 227 * 1024 + 1},
  };
  for (const auto &c : bad) {
    int flag = 0;
    int st = BRISK_LAUNCH(k_flag, c.grid, c.block, c.smem, nullptr, &flag);
    assert_int_not_equal(st, 0);
    assert_int_equal(flag, 0);
    assert_true(strlen(brisk_simt_last_error()) > 0);
  }
  int flag = 0;
  assert_int_equal(BRISK_LAUNCH(k_flag, dim3(1), dim3(1024), 227 * 1024, nullptr, &flag), 0);
  assert_int_equal(flag, 1);
  assert_string_equal(brisk_simt_last_error(), "");
}

/* Each case is undefined on a GPU (a hang or garbage); the emulation stops
 * the launch with a message. */
static __global__ void k_misuse(int which, int *out) {
  const unsigned t = threadIdx.x, lane = t % 32;
  switch (which) {
  case 0: /* a lane outside its own mask */ __syncwarp(lane == 3 ? 0x1u : 0xffffffffu); break;
  case 1: /* lane 0 exits before the others' meeting */
    if (lane == 0) return;
    out[t] = __shfl_sync(0xffffffffu, (int)t, 1);
    break;
  case 2: /* different operations meet */
    out[t] = lane < 16 ? (int)__ballot_sync(0xffffffffu, 1) : __any_sync(0xffffffffu, 1);
    break;
  case 3: /* reading a lane outside the mask */
    if (lane < 16) out[t] = __shfl_down_sync(0x0000ffffu, (int)t, 8);
    break;
  case 4: /* deadlock: thread 0 at the barrier, the rest of its warp in a shuffle */
    if (t == 0)
      __syncthreads();
    else
      out[t] = __shfl_sync(0xffffffffu, (int)t, 0);
    break;
  case 5: /* a full mask in a warp of 8 threads */
    out[t] = __shfl_xor_sync(0xffffffffu, (int)t, 1);
    break;
  default: /* width not a power of two */ out[t] = __shfl_sync(0xffffffffu, (int)t, 0, 12); break;
  }
}

static void test_misuse(void **state) {
  (void)state;
  std::vector<int> out(64);
  for (int which = 0; which <= 6; which++) {
    unsigned n = which == 5 ? 40 : 64;
    int st = BRISK_LAUNCH(k_misuse, dim3(2), dim3(n), 0, nullptr, which, out.data());
    if (st == 0) fprintf(stderr, "misuse case %d was not caught\n", which);
    assert_int_equal(st, brisk_simt::ERR_LAUNCH_FAILURE);
    assert_true(strlen(brisk_simt_last_error()) > 0);
    fprintf(stderr, "caught misuse %d: %s\n", which, brisk_simt_last_error());
    /* The emulation still works afterwards. */
    std::vector<int> ok(4 * 1024);
    assert_int_equal(
        BRISK_LAUNCH(k_barrier, dim3(4), dim3(1024), 1024 * sizeof(int), nullptr, 3, ok.data()), 0);
    assert_int_equal(ok[0], 6 + 3);
  }
}

/* A missing barrier: warp 1 reads what warp 0 wrote with only a warp-level
 * sync between. Index order happens to run warp 0 first; reverse order
 * exposes the race (the read sees the 0xff fill). */
static __global__ void k_missing_barrier(int *out) {
  BRISK_SHARED(int, s, 64);
  const unsigned t = threadIdx.x;
  s[t] = (int)t;
  __syncwarp();
  if (t >= 32) out[t - 32] = s[t - 32];
}

static void test_order_exposes_races(void **state) {
  (void)state;
  const char *saved = getenv("BRISK_SIMT_ORDER");
  std::vector<int> fwd(32), rev(32);
  setenv("BRISK_SIMT_ORDER", "forward", 1);
  assert_int_equal(BRISK_LAUNCH(k_missing_barrier, dim3(1), dim3(64), 0, nullptr, fwd.data()), 0);
  setenv("BRISK_SIMT_ORDER", "reverse", 1);
  assert_int_equal(BRISK_LAUNCH(k_missing_barrier, dim3(1), dim3(64), 0, nullptr, rev.data()), 0);
  if (saved)
    setenv("BRISK_SIMT_ORDER", saved, 1);
  else
    unsetenv("BRISK_SIMT_ORDER");
  for (int t = 0; t < 32; t++) assert_int_equal(fwd[t], t);
  /* Thread 32 completes warp 1's meeting and reads before warp 0 has run. */
  assert_int_equal(rev[0], -1);
}

/* Launch state is per host thread: two threads launching at once each get
 * their own results. */
static void test_host_threads(void **state) {
  (void)state;
  bool ok[2] = {false, false};
  auto worker = [](int id, bool *result) {
    bool good = true;
    for (int rep = 0; rep < 20 && good; rep++) {
      const unsigned n = 64 + 32 * (unsigned)id;
      std::vector<int> out(2 * n, -1);
      good =
          BRISK_LAUNCH(k_barrier, dim3(2), dim3(n), n * sizeof(int), nullptr, 2, out.data()) == 0;
      for (unsigned t = 0; good && t < n; t++) good = out[t] == (int)((t + 3) % n) + 2;
    }
    *result = good;
  };
  std::thread a(worker, 0, &ok[0]), b(worker, 1, &ok[1]);
  a.join();
  b.join();
  assert_true(ok[0] && ok[1]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_geometry),
      cmocka_unit_test(test_barrier),
      cmocka_unit_test(test_block_1024),
      cmocka_unit_test(test_shuffles),
      cmocka_unit_test(test_partial_masks),
      cmocka_unit_test(test_shared),
      cmocka_unit_test(test_atomics_many_blocks),
      cmocka_unit_test(test_invalid_launch),
      cmocka_unit_test(test_misuse),
      cmocka_unit_test(test_host_threads),
      cmocka_unit_test(test_order_exposes_races),
      cmocka_unit_test(test_conversions),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
