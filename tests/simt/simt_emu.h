/* SIMT emulation: the subset of CUDA that the kernel files (kernels/NAME.cu) use, in host C++17, so
 * that every kernel runs (and is tested) on a machine without a GPU. Included
 * through kernels/simt.h when BRISK_SIMT_EMU is defined; never by nvcc.
 *
 * Model (simt_emu.cpp): a launch checks its configuration like CUDA, then runs
 * the blocks one after another on the calling host thread. A block's threads
 * are fibers with their own stacks; a thread runs until it reaches a meeting
 * point, then the next runnable thread runs (a FIFO, so the order is
 * deterministic):
 *  - __syncthreads (and _count/_and/_or): all threads of the block that have
 *    not exited;
 *  - warp operations (__syncwarp, shuffles, votes, __reduce_*_sync): the lanes
 *    named in the mask, which must all call the same operation with the same
 *    mask (and width); lanes are linear thread ids modulo 32.
 * Threads start, and are released from a meeting, in index order, or in
 * reverse order when the environment has BRISK_SIMT_ORDER=reverse: the test
 * suite runs every kernel test both ways, so a kernel whose result depends on
 * the order between meeting points (a missing barrier) fails one of them.
 * Misuse that is undefined on a GPU (a mask without the caller's lane, lanes
 * that exited or do not exist, a shuffle reading a lane outside the mask,
 * mismatched meetings, a deadlock) stops the launch with status 719 and a
 * message (brisk_simt_last_error) instead of hanging. Atomics are plain
 * read-modify-writes: threads switch only at meeting points. Shared memory is
 * allocated per launch at its exact size (so ASan sees overruns) and filled
 * with 0xff bytes (NaN as float) at the start of every block. */
#ifndef BRISK_TESTS_SIMT_EMU_H
#define BRISK_TESTS_SIMT_EMU_H

#ifdef __CUDACC__
#  error "simt_emu.h is the host emulation; nvcc uses CUDA itself"
#endif

#include "kstream.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <tuple>
#include <type_traits>

/* ---- qualifiers ---------------------------------------------------------- */

#define __global__
#define __device__
#define __host__
#define __constant__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __restrict__ __restrict
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)

/* ---- geometry ------------------------------------------------------------ */

struct uint3 {
  unsigned x, y, z;
};
struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
};

/* The current emulated thread's coordinates; the scheduler sets them at every
 * switch. Host-thread-local, so launches on different host threads do not
 * interfere. */
extern __thread uint3 threadIdx;
extern __thread uint3 blockIdx;
extern __thread dim3 blockDim;
extern __thread dim3 gridDim;
constexpr int warpSize = 32;

/* ---- vector and half types ---------------------------------------------- */

#define BRISK_SIMT_VEC2(T, name, al)                                                               \
  struct __attribute__((aligned(al))) name {                                                       \
    T x, y;                                                                                        \
  };                                                                                               \
  static inline name make_##name(T x, T y) { return name{x, y}; }
#define BRISK_SIMT_VEC4(T, name, al)                                                               \
  struct __attribute__((aligned(al))) name {                                                       \
    T x, y, z, w;                                                                                  \
  };                                                                                               \
  static inline name make_##name(T x, T y, T z, T w) { return name{x, y, z, w}; }
BRISK_SIMT_VEC2(float, float2, 8)
BRISK_SIMT_VEC4(float, float4, 16)
BRISK_SIMT_VEC2(double, double2, 16)
BRISK_SIMT_VEC2(int, int2, 8)
BRISK_SIMT_VEC4(int, int4, 16)
BRISK_SIMT_VEC2(unsigned, uint2, 8)
BRISK_SIMT_VEC4(unsigned, uint4, 16)
BRISK_SIMT_VEC2(short, short2, 4)
BRISK_SIMT_VEC2(unsigned short, ushort2, 4)
BRISK_SIMT_VEC4(unsigned short, ushort4, 8)
BRISK_SIMT_VEC4(signed char, char4, 4)
BRISK_SIMT_VEC4(unsigned char, uchar4, 4)
#undef BRISK_SIMT_VEC2
#undef BRISK_SIMT_VEC4

/* Storage types: only the conversion intrinsics below operate on them, which
 * is the portable subset of cuda_fp16.h / cuda_bf16.h. */
struct __attribute__((aligned(2))) __half {
  unsigned short x;
};
struct __attribute__((aligned(4))) __half2 {
  __half x, y;
};
struct __attribute__((aligned(2))) __nv_bfloat16 {
  unsigned short x;
};
struct __attribute__((aligned(4))) __nv_bfloat162 {
  __nv_bfloat16 x, y;
};

namespace brisk_simt {
/* Bit-exact with lib/core/half.h (round to nearest even, NaN kept quiet). */
float f16_to_f32(unsigned short h);
unsigned short f32_to_f16(float f);
float bf16_to_f32(unsigned short h);
unsigned short f32_to_bf16(float f);
} // namespace brisk_simt

static inline float __half2float(__half h) { return brisk_simt::f16_to_f32(h.x); }
static inline __half __float2half_rn(float f) { return __half{brisk_simt::f32_to_f16(f)}; }
static inline __half __float2half(float f) { return __float2half_rn(f); }
static inline float __bfloat162float(__nv_bfloat16 h) { return brisk_simt::bf16_to_f32(h.x); }
static inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  return __nv_bfloat16{brisk_simt::f32_to_bf16(f)};
}
static inline __nv_bfloat16 __float2bfloat16(float f) { return __float2bfloat16_rn(f); }
static inline unsigned short __half_as_ushort(__half h) { return h.x; }
static inline __half __ushort_as_half(unsigned short u) { return __half{u}; }
static inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.x; }
static inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) { return __nv_bfloat16{u}; }
static inline float2 __half22float2(__half2 h) {
  return float2{__half2float(h.x), __half2float(h.y)};
}
static inline __half2 __floats2half2_rn(float a, float b) {
  return __half2{__float2half_rn(a), __float2half_rn(b)};
}
static inline __half2 __halves2half2(__half a, __half b) { return __half2{a, b}; }
static inline float __low2float(__half2 h) { return __half2float(h.x); }
static inline float __high2float(__half2 h) { return __half2float(h.y); }
static inline __half2 __float2half2_rn(float a) {
  return __half2{__float2half_rn(a), __float2half_rn(a)};
}
static inline float2 __bfloat1622float2(__nv_bfloat162 h) {
  return float2{__bfloat162float(h.x), __bfloat162float(h.y)};
}
static inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) {
  return __nv_bfloat162{__float2bfloat16_rn(a), __float2bfloat16_rn(b)};
}

/* ---- math intrinsics: host libm (the device's fast versions are less
 * accurate; tolerances in tests/cuda cover the device bounds) ------------- */

/* glibc's math.h already declares internal __expf etc.: macros, not functions. */
#define __expf(x) expf(x)
#define __logf(x) logf(x)
#define __log2f(x) log2f(x)
#define __powf(x, y) powf(x, y)
#define __sinf(x) sinf(x)
#define __cosf(x) cosf(x)
#define __tanf(x) tanf(x)
#define __sincosf(x, s, c) sincosf(x, s, c)
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
static inline float __fdividef(float a, float b) { return a / b; }
static inline float __frcp_rn(float x) { return 1.0f / x; }
static inline float __fsqrt_rn(float x) { return sqrtf(x); }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline float __saturatef(float x) { return x > 0.0f ? (x < 1.0f ? x : 1.0f) : 0.0f; }
static inline int __float2int_rn(float x) { return (int)nearbyintf(x); }
static inline int __float2int_rz(float x) { return (int)x; }
static inline float __int2float_rn(int x) { return (float)x; }
static inline float __int_as_float(int x) {
  float f;
  memcpy(&f, &x, 4);
  return f;
}
static inline int __float_as_int(float f) {
  int x;
  memcpy(&x, &f, 4);
  return x;
}
static inline float __uint_as_float(unsigned x) {
  float f;
  memcpy(&f, &x, 4);
  return f;
}
static inline unsigned __float_as_uint(float f) {
  unsigned x;
  memcpy(&x, &f, 4);
  return x;
}
static inline double __longlong_as_double(long long x) {
  double d;
  memcpy(&d, &x, 8);
  return d;
}
static inline long long __double_as_longlong(double d) {
  long long x;
  memcpy(&x, &d, 8);
  return x;
}
static inline int __popc(unsigned x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clz(int x) { return x ? __builtin_clz((unsigned)x) : 32; }
static inline int __clzll(long long x) { return x ? __builtin_clzll((unsigned long long)x) : 64; }
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline int __ffsll(long long x) { return __builtin_ffsll(x); }
static inline unsigned __brev(unsigned x) {
  x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
  x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
  x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4);
  x = ((x >> 8) & 0x00ff00ffu) | ((x & 0x00ff00ffu) << 8);
  return (x >> 16) | (x << 16);
}
static inline unsigned __umulhi(unsigned a, unsigned b) {
  return (unsigned)(((unsigned long long)a * b) >> 32);
}

#define BRISK_SIMT_MINMAX(T)                                                                       \
  static inline T min(T a, T b) { return b < a ? b : a; }                                          \
  static inline T max(T a, T b) { return a < b ? b : a; }
BRISK_SIMT_MINMAX(int)
BRISK_SIMT_MINMAX(unsigned)
BRISK_SIMT_MINMAX(long)
BRISK_SIMT_MINMAX(unsigned long)
BRISK_SIMT_MINMAX(long long)
BRISK_SIMT_MINMAX(unsigned long long)
static inline float min(float a, float b) { return fminf(a, b); }
static inline float max(float a, float b) { return fmaxf(a, b); }
static inline double min(double a, double b) { return fmin(a, b); }
static inline double max(double a, double b) { return fmax(a, b); }
#undef BRISK_SIMT_MINMAX

/* Loads and stores with cache hints: plain accesses on the host. */
template <typename T> static inline T __ldg(const T *p) { return *p; }
template <typename T> static inline T __ldcg(const T *p) { return *p; }
template <typename T> static inline T __ldca(const T *p) { return *p; }
template <typename T> static inline T __ldcs(const T *p) { return *p; }
template <typename T> static inline T __ldlu(const T *p) { return *p; }
template <typename T> static inline T __ldcv(const T *p) { return *p; }
template <typename T> static inline void __stcg(T *p, T v) { *p = v; }
template <typename T> static inline void __stcs(T *p, T v) { *p = v; }
template <typename T> static inline void __stwb(T *p, T v) { *p = v; }
template <typename T> static inline void __stwt(T *p, T v) { *p = v; }
static inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_block() { __atomic_signal_fence(__ATOMIC_SEQ_CST); }

/* ---- atomics: no thread switches inside, so a plain update is atomic
 * among emulated threads; the __atomic builtins also keep host threads
 * that share memory correct ------------------------------------------------ */

#define BRISK_SIMT_ATOMIC_INT(T)                                                                   \
  static inline T atomicAdd(T *p, T v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }      \
  static inline T atomicSub(T *p, T v) { return __atomic_fetch_sub(p, v, __ATOMIC_RELAXED); }      \
  static inline T atomicAnd(T *p, T v) { return __atomic_fetch_and(p, v, __ATOMIC_RELAXED); }      \
  static inline T atomicOr(T *p, T v) { return __atomic_fetch_or(p, v, __ATOMIC_RELAXED); }        \
  static inline T atomicXor(T *p, T v) { return __atomic_fetch_xor(p, v, __ATOMIC_RELAXED); }      \
  static inline T atomicExch(T *p, T v) { return __atomic_exchange_n(p, v, __ATOMIC_RELAXED); }    \
  static inline T atomicCAS(T *p, T cmp, T v) {                                                    \
    __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);            \
    return cmp;                                                                                    \
  }                                                                                                \
  static inline T atomicMax(T *p, T v) {                                                           \
    T old = __atomic_load_n(p, __ATOMIC_RELAXED);                                                  \
    while (old < v &&                                                                              \
           !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {   \
    }                                                                                              \
    return old;                                                                                    \
  }                                                                                                \
  static inline T atomicMin(T *p, T v) {                                                           \
    T old = __atomic_load_n(p, __ATOMIC_RELAXED);                                                  \
    while (v < old &&                                                                              \
           !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {   \
    }                                                                                              \
    return old;                                                                                    \
  }
BRISK_SIMT_ATOMIC_INT(int)
BRISK_SIMT_ATOMIC_INT(unsigned)
BRISK_SIMT_ATOMIC_INT(long long)
BRISK_SIMT_ATOMIC_INT(unsigned long long)
#undef BRISK_SIMT_ATOMIC_INT

static inline unsigned short atomicCAS(unsigned short *p, unsigned short cmp, unsigned short v) {
  __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
  return cmp;
}

#define BRISK_SIMT_ATOMIC_FLOAT(T)                                                                 \
  static inline T atomicAdd(T *p, T v) {                                                           \
    T old = *p;                                                                                    \
    *p = old + v;                                                                                  \
    return old;                                                                                    \
  }                                                                                                \
  static inline T atomicExch(T *p, T v) {                                                          \
    T old = *p;                                                                                    \
    *p = v;                                                                                        \
    return old;                                                                                    \
  }
BRISK_SIMT_ATOMIC_FLOAT(float)
BRISK_SIMT_ATOMIC_FLOAT(double)
#undef BRISK_SIMT_ATOMIC_FLOAT

/* ---- the runtime (simt_emu.cpp) ------------------------------------------ */

namespace brisk_simt {

enum { OK = 0, ERR_INVALID_VALUE = 1, ERR_INVALID_CONFIG = 9, ERR_LAUNCH_FAILURE = 719 };

/* Limits checked at launch, as on sm_90. */
constexpr unsigned MAX_THREADS = 1024, MAX_BLOCK_Z = 64;
constexpr size_t MAX_SHARED = 227 * 1024, MAX_STATIC_SHARED = 48 * 1024;

enum warp_kind {
  WARP_SYNC,
  WARP_SHFL_IDX,
  WARP_SHFL_UP,
  WARP_SHFL_DOWN,
  WARP_SHFL_XOR,
  WARP_BALLOT,
  WARP_ANY,
  WARP_ALL,
  WARP_REDUCE_ADD,
  WARP_REDUCE_MIN,
  WARP_REDUCE_MAX,
  WARP_REDUCE_AND,
  WARP_REDUCE_OR,
  WARP_REDUCE_XOR,
};
enum barrier_kind { BAR_SYNC, BAR_COUNT, BAR_AND, BAR_OR };

/* One lane's part in a warp meeting; returns the lane's result. `value` is
 * the operand's raw bits (shuffles) or a predicate / integer (votes,
 * reductions); `arg` the source lane, delta or xor mask; `is_signed` selects
 * signed order for min/max reductions. */
uint64_t warp_op(warp_kind kind, unsigned mask, uint64_t value, int arg, int width,
                 bool is_signed = false);
int barrier(barrier_kind kind, int pred);

/* Shared memory of the current block: one allocation per declaration site
 * (the address of `site`), and the launch's dynamic shared memory. */
void *shared_static(const void *site, size_t bytes, size_t align);
void *shared_dynamic();

/* Runs body(ctx) as every thread of every block; returns a status. */
int run(dim3 grid, dim3 block, size_t smem, void (*body)(void *), void *ctx);

/* Stream capture (simt_graph.h): while this host thread captures, a launch
 * becomes a graph node that owns its parameters (freed by release). */
bool capturing();
int capture_kernel(const void *kernel, dim3 grid, dim3 block, size_t smem, void (*body)(void *),
                   void *params, void (*release)(void *));

template <typename... P, typename... A>
int launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem, brisk_kstream stream,
           A... args) {
  (void)stream;
  /* The parameters are converted once, like CUDA's parameter buffer; each
   * thread then gets its own copies (kernel parameters are by value). */
  struct call {
    void (*kernel)(P...);
    std::tuple<typename std::decay<P>::type...> params;
  } c{kernel, {args...}};
  if (capturing())
    return capture_kernel(
        reinterpret_cast<const void *>(kernel), grid, block, smem,
        [](void *p) { std::apply(static_cast<call *>(p)->kernel, static_cast<call *>(p)->params); },
        new call(c), [](void *p) { delete static_cast<call *>(p); });
  return run(
      grid, block, smem,
      [](void *p) { std::apply(static_cast<call *>(p)->kernel, static_cast<call *>(p)->params); },
      &c);
}

template <typename T> static inline uint64_t to_bits(T v) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value,
                "warp shuffles move values of at most 8 bytes");
  uint64_t u = 0;
  memcpy(&u, &v, sizeof v);
  return u;
}
template <typename T> static inline T from_bits(uint64_t u) {
  T v;
  memcpy(&v, &u, sizeof v);
  return v;
}

} // namespace brisk_simt

extern "C" {
/* The message of the last failed launch on this host thread ("" if none). */
const char *brisk_simt_last_error(void);
}

/* ---- warp and block intrinsics ------------------------------------------- */

static inline void __syncthreads() { brisk_simt::barrier(brisk_simt::BAR_SYNC, 1); }
static inline int __syncthreads_count(int p) {
  return brisk_simt::barrier(brisk_simt::BAR_COUNT, p);
}
static inline int __syncthreads_and(int p) { return brisk_simt::barrier(brisk_simt::BAR_AND, p); }
static inline int __syncthreads_or(int p) { return brisk_simt::barrier(brisk_simt::BAR_OR, p); }
static inline void __syncwarp(unsigned mask = 0xffffffffu) {
  brisk_simt::warp_op(brisk_simt::WARP_SYNC, mask, 0, 0, 32);
}

template <typename T> static inline T __shfl_sync(unsigned mask, T v, int lane, int width = 32) {
  return brisk_simt::from_bits<T>(
      brisk_simt::warp_op(brisk_simt::WARP_SHFL_IDX, mask, brisk_simt::to_bits(v), lane, width));
}
template <typename T>
static inline T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  return brisk_simt::from_bits<T>(brisk_simt::warp_op(brisk_simt::WARP_SHFL_UP, mask,
                                                      brisk_simt::to_bits(v), (int)delta, width));
}
template <typename T>
static inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  return brisk_simt::from_bits<T>(brisk_simt::warp_op(brisk_simt::WARP_SHFL_DOWN, mask,
                                                      brisk_simt::to_bits(v), (int)delta, width));
}
template <typename T>
static inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  return brisk_simt::from_bits<T>(brisk_simt::warp_op(brisk_simt::WARP_SHFL_XOR, mask,
                                                      brisk_simt::to_bits(v), lane_mask, width));
}
static inline unsigned __ballot_sync(unsigned mask, int pred) {
  return (unsigned)brisk_simt::warp_op(brisk_simt::WARP_BALLOT, mask, pred != 0, 0, 32);
}
static inline int __any_sync(unsigned mask, int pred) {
  return (int)brisk_simt::warp_op(brisk_simt::WARP_ANY, mask, pred != 0, 0, 32);
}
static inline int __all_sync(unsigned mask, int pred) {
  return (int)brisk_simt::warp_op(brisk_simt::WARP_ALL, mask, pred != 0, 0, 32);
}
static inline unsigned __reduce_add_sync(unsigned mask, unsigned v) {
  return (unsigned)brisk_simt::warp_op(brisk_simt::WARP_REDUCE_ADD, mask, v, 0, 32);
}
static inline unsigned __reduce_min_sync(unsigned mask, unsigned v) {
  return (unsigned)brisk_simt::warp_op(brisk_simt::WARP_REDUCE_MIN, mask, v, 0, 32);
}
static inline unsigned __reduce_max_sync(unsigned mask, unsigned v) {
  return (unsigned)brisk_simt::warp_op(brisk_simt::WARP_REDUCE_MAX, mask, v, 0, 32);
}
static inline int __reduce_add_sync(unsigned mask, int v) {
  return (int)brisk_simt::warp_op(brisk_simt::WARP_REDUCE_ADD, mask, (uint64_t)(uint32_t)v, 0, 32);
}
static inline int __reduce_min_sync(unsigned mask, int v) {
  return (int)brisk_simt::warp_op(brisk_simt::WARP_REDUCE_MIN, mask, (uint64_t)(uint32_t)v, 0, 32,
                                  true);
}
static inline int __reduce_max_sync(unsigned mask, int v) {
  return (int)brisk_simt::warp_op(brisk_simt::WARP_REDUCE_MAX, mask, (uint64_t)(uint32_t)v, 0, 32,
                                  true);
}
static inline unsigned __reduce_and_sync(unsigned mask, unsigned v) {
  return (unsigned)brisk_simt::warp_op(brisk_simt::WARP_REDUCE_AND, mask, v, 0, 32);
}
static inline unsigned __reduce_or_sync(unsigned mask, unsigned v) {
  return (unsigned)brisk_simt::warp_op(brisk_simt::WARP_REDUCE_OR, mask, v, 0, 32);
}
static inline unsigned __reduce_xor_sync(unsigned mask, unsigned v) {
  return (unsigned)brisk_simt::warp_op(brisk_simt::WARP_REDUCE_XOR, mask, v, 0, 32);
}

#endif
