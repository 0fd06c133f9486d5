/* The SIMT emulation's scheduler: fibers for the threads of a block, the
 * block barrier, warp meetings and per-block shared memory (simt_emu.h has
 * the model). One launch runs entirely on the calling host thread; all state
 * is host-thread-local.
 *
 * Speed matters (the kernel tests run under ASan in CI): a switch between
 * fibers is a handful of instructions on x86-64 (below), threads switch
 * directly to the next runnable one without passing through the scheduler,
 * and stacks are mapped once per host thread and reused. */
#include "simt_emu.h"

#include "core/half.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#  define SIMT_ASAN 1
#elif defined(__has_feature)
#  if __has_feature(address_sanitizer)
#    define SIMT_ASAN 1
#  endif
#endif
#if defined(__SANITIZE_THREAD__)
#  define SIMT_TSAN 1
#elif defined(__has_feature)
#  if __has_feature(thread_sanitizer)
#    define SIMT_TSAN 1
#  endif
#endif
#ifdef SIMT_ASAN
#  include <sanitizer/asan_interface.h>
#  include <sanitizer/common_interface_defs.h>
#endif
#ifdef SIMT_TSAN
#  include <sanitizer/tsan_interface.h>
#endif

#if !defined(__x86_64__) || defined(BRISK_SIMT_UCONTEXT)
#  include <ucontext.h>
#endif

#if defined(__x86_64__) && !defined(BRISK_SIMT_UCONTEXT)
extern "C" void brisk_simt_switch_x64(void **save, void *to);
#endif

__thread uint3 threadIdx;
__thread uint3 blockIdx;
__thread dim3 blockDim;
__thread dim3 gridDim;

namespace brisk_simt {

float f16_to_f32(unsigned short h) { return brisk_f16_to_f32(h); }
unsigned short f32_to_f16(float f) { return brisk_f32_to_f16(f); }
float bf16_to_f32(unsigned short h) { return brisk_bf16_to_f32(h); }
unsigned short f32_to_bf16(float f) { return brisk_f32_to_bf16(f); }

namespace {

/* ---- context switch ------------------------------------------------------ */

#if defined(__x86_64__) && !defined(BRISK_SIMT_UCONTEXT)
/* switch_x64(save, to): pushes the callee-saved registers and the SSE/x87
 * control words, stores the stack pointer in *save, loads `to` and pops the
 * same frame from there (System V ABI: everything else is caller-saved). */
asm(R"(
  .pushsection .text
  .p2align 4
  .type brisk_simt_switch_x64, @function
brisk_simt_switch_x64:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size brisk_simt_switch_x64, .-brisk_simt_switch_x64
  .popsection
)");

struct context {
  void *sp;
};
/* A fresh frame at the top of a stack: switch_x64 pops it and "returns" into
 * entry, with the stack aligned as at a call. */
void context_init(context *c, char *lo, size_t size, void (*entry)()) {
  uintptr_t top = ((uintptr_t)lo + size) & ~(uintptr_t)15;
  uint64_t *sp = (uint64_t *)top;
  *--sp = 0;                             /* entry's return address: never used */
  *--sp = (uint64_t)entry;               /* popped by ret */
  for (int i = 0; i < 6; i++) *--sp = 0; /* rbp rbx r12-r15 */
  *--sp = 0x037fULL << 32 | 0x1f80ULL;   /* default x87 control word | MXCSR */
  c->sp = sp;
}
inline void context_switch(context *from, context *to) { brisk_simt_switch_x64(&from->sp, to->sp); }
#else
/* Portable fallback: swapcontext (slower: it saves the signal mask). */
struct context {
  ucontext_t uc;
};
void context_init(context *c, char *lo, size_t size, void (*entry)()) {
  getcontext(&c->uc);
  c->uc.uc_stack.ss_sp = lo;
  c->uc.uc_stack.ss_size = size;
  c->uc.uc_link = nullptr;
  makecontext(&c->uc, entry, 0);
}
inline void context_switch(context *from, context *to) { swapcontext(&from->uc, &to->uc); }
#endif

/* Kernels keep small arrays on their stacks; ASan's redzones need more. */
#ifdef SIMT_ASAN
constexpr size_t STACK_BYTES = 512 * 1024;
#else
constexpr size_t STACK_BYTES = 256 * 1024;
#endif

enum thread_state : uint8_t { RUNNABLE, AT_BARRIER, AT_WARP, DONE };

struct fiber {
  context ctx;
  char *stack = nullptr; /* STACK_BYTES, above a guard page */
  void *asan_fake = nullptr;
  bool ready = false; /* parked in fiber_entry (or fresh), safe to resume */
#ifdef SIMT_TSAN
  void *tsan = nullptr;
#endif
  uint3 tid;
  thread_state state;
};

struct warp_state {
  uint32_t arrived; /* lanes waiting in a meeting */
  uint32_t exited;  /* lanes whose thread has finished the block */
  uint8_t kind[32];
  uint32_t mask[32];
  int32_t arg[32], width[32];
  uint64_t value[32], result[32];
};

struct shared_alloc {
  const void *site;
  void *ptr;
  size_t bytes;
};

/* Everything of the launch running on this host thread. */
struct scheduler {
  fiber *f = nullptr;
  unsigned n_fibers = 0; /* stacks mapped so far */
  context main;
  void *main_asan_fake = nullptr;
  const void *main_stack_lo = nullptr;
  size_t main_stack_size = 0;
  bool from_main = false;
#ifdef SIMT_TSAN
  void *main_tsan = nullptr;
#endif

  /* The current launch. */
  void (*body)(void *) = nullptr;
  void *ctx = nullptr;
  unsigned n = 0, live = 0, cur = 0;
  int queue[MAX_THREADS];
  unsigned q_head = 0, q_len = 0;
  unsigned bar_arrived = 0;
  int bar_kind = 0, bar_acc = 0, bar_result = 0;
  warp_state warps[MAX_THREADS / 32];
  shared_alloc shared[64];
  unsigned n_shared = 0;
  size_t static_bytes = 0, dyn_bytes = 0;
  void *dyn = nullptr;
  bool failed = false;
  bool reverse = false;      /* BRISK_SIMT_ORDER=reverse: threads run last to first */
  bool stacks_dirty = false; /* fibers abandoned mid-frame (ASan shadow) */

  ~scheduler() {
    for (unsigned i = 0; i < n_fibers; i++) {
#ifdef SIMT_ASAN
      __asan_unpoison_memory_region(f[i].stack, STACK_BYTES);
#endif
      munmap(f[i].stack - page(), STACK_BYTES + page());
#ifdef SIMT_TSAN
      __tsan_destroy_fiber(f[i].tsan);
#endif
    }
    free(f);
  }
  static size_t page() { return (size_t)sysconf(_SC_PAGESIZE); }
};

thread_local scheduler tls_sched_storage;
/* The scheduler of the launch running on this thread: a plain pointer, so
 * the hot paths skip the thread_local object's initialization guard. */
__thread scheduler *tls_sched;
thread_local char tls_error[512];

void set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void set_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(tls_error, sizeof tls_error, fmt, ap);
  va_end(ap);
}

bool ensure_fibers(scheduler *s, unsigned n) {
  if (n <= s->n_fibers) return true;
  if (!s->f) {
    s->f = static_cast<fiber *>(calloc(MAX_THREADS, sizeof(fiber)));
    if (!s->f) return false;
  }
  const size_t pg = scheduler::page();
  for (unsigned i = s->n_fibers; i < n; i++) {
    void *m = mmap(nullptr, STACK_BYTES + pg, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) return false;
    mprotect(m, pg, PROT_NONE); /* an overflow faults instead of corrupting a neighbour */
    s->f[i].stack = static_cast<char *>(m) + pg;
#ifdef SIMT_ASAN
    /* The range may have held another thread's fiber stacks, whose frames
     * left poisoned shadow behind when they were unmapped. */
    __asan_unpoison_memory_region(s->f[i].stack, STACK_BYTES);
#endif
#ifdef SIMT_TSAN
    s->f[i].tsan = __tsan_create_fiber(0);
#endif
    s->n_fibers = i + 1;
  }
  return true;
}

/* ---- switching ----------------------------------------------------------- */

/* Called on a fiber's or main's stack right after it (re)gains control. */
inline void after_switch(scheduler *s, void *fake) {
#ifdef SIMT_ASAN
  const void *lo;
  size_t size;
  __sanitizer_finish_switch_fiber(fake, &lo, &size);
  if (s->from_main) {
    s->main_stack_lo = lo;
    s->main_stack_size = size;
  }
#else
  (void)fake;
#endif
  s->from_main = false;
}

/* From fiber `me` (nullptr: main) to fiber `to` (nullptr: main). */
void switch_to(scheduler *s, fiber *me, fiber *to) {
  if (to) {
    threadIdx = to->tid;
    s->cur = (unsigned)(to - s->f);
  }
  s->from_main = !me;
#ifdef SIMT_ASAN
  void **fake = me ? &me->asan_fake : &s->main_asan_fake;
  if (to)
    __sanitizer_start_switch_fiber(fake, to->stack, STACK_BYTES);
  else
    __sanitizer_start_switch_fiber(fake, s->main_stack_lo, s->main_stack_size);
#endif
#ifdef SIMT_TSAN
  __tsan_switch_to_fiber(to ? to->tsan : s->main_tsan, 0);
#endif
  context_switch(me ? &me->ctx : &s->main, to ? &to->ctx : &s->main);
  after_switch(s, me ? me->asan_fake : s->main_asan_fake);
}

void push(scheduler *s, unsigned t) {
  s->queue[(s->q_head + s->q_len) % MAX_THREADS] = (int)t;
  s->q_len++;
}

/* The current thread has blocked (or finished its block): runs the next
 * runnable one, or returns to main when none is left (block done, or a
 * deadlock). */
void run_next(scheduler *s) {
  fiber *me = &s->f[s->cur];
  fiber *to = nullptr;
  if (s->q_len) {
    to = &s->f[s->queue[s->q_head]];
    s->q_head = (s->q_head + 1) % MAX_THREADS;
    s->q_len--;
  }
  if (to == me) return; /* cannot happen (a blocked thread is not queued) */
  switch_to(s, me, to);
}

/* Stops the launch: records the message and returns to main for good. */
[[noreturn]] void fail(scheduler *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
[[noreturn]] void fail(scheduler *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int k = snprintf(tls_error, sizeof tls_error, "block (%u,%u,%u) thread (%u,%u,%u): ", blockIdx.x,
                   blockIdx.y, blockIdx.z, threadIdx.x, threadIdx.y, threadIdx.z);
  if (k > 0 && (size_t)k < sizeof tls_error)
    vsnprintf(tls_error + k, sizeof tls_error - (size_t)k, fmt, ap);
  va_end(ap);
  s->failed = true;
  s->stacks_dirty = true;
  switch_to(s, &s->f[s->cur], nullptr);
  abort(); /* main never resumes a failed launch's fibers */
}

void release_barrier(scheduler *s) {
  s->bar_result = s->bar_acc;
  s->bar_arrived = 0;
  for (unsigned k = 0; k < s->n; k++) {
    const unsigned i = s->reverse ? s->n - 1 - k : k;
    if (s->f[i].state == AT_BARRIER) {
      s->f[i].state = RUNNABLE;
      if (i != s->cur) push(s, i);
    }
  }
}

/* A fiber runs the kernel once per block: after the body it parks here and
 * the next block (or launch) resumes it, so stacks are set up only once and
 * ASan's view of them stays consistent. */
[[noreturn]] void fiber_entry() {
  scheduler *s = tls_sched;
  after_switch(s, nullptr);
  for (;;) {
    s->body(s->ctx);
    fiber *me = &s->f[s->cur];
    me->state = DONE;
    s->warps[s->cur / 32].exited |= 1u << (s->cur % 32);
    s->live--;
    /* Exited threads no longer count at the barrier. */
    if (s->bar_arrived && s->bar_arrived == s->live) release_barrier(s);
    run_next(s);
  }
}

unsigned linear_tid() {
  return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}

const char *warp_name(int kind) {
  static const char *const names[] = {"__syncwarp",        "__shfl_sync",       "__shfl_up_sync",
                                      "__shfl_down_sync",  "__shfl_xor_sync",   "__ballot_sync",
                                      "__any_sync",        "__all_sync",        "__reduce_add_sync",
                                      "__reduce_min_sync", "__reduce_max_sync", "__reduce_and_sync",
                                      "__reduce_or_sync",  "__reduce_xor_sync"};
  return names[kind];
}

/* The meeting of `mask` in warp w is complete: computes every lane's result
 * (PTX shfl.sync semantics: a segment of `width` lanes; up/down/xor outside
 * the segment's upper end read the lane's own value). */
void complete_warp(scheduler *s, warp_state *w, unsigned mask, int kind, bool is_signed) {
  uint64_t acc = 0;
  switch (kind) {
  case WARP_BALLOT:
  case WARP_ANY:
  case WARP_ALL: {
    uint32_t bits = 0;
    for (unsigned l = 0; l < 32; l++)
      if ((mask >> l & 1) && w->value[l]) bits |= 1u << l;
    acc = kind == WARP_BALLOT ? bits : kind == WARP_ANY ? bits != 0 : bits == mask;
    break;
  }
  case WARP_REDUCE_ADD:
  case WARP_REDUCE_MIN:
  case WARP_REDUCE_MAX:
  case WARP_REDUCE_AND:
  case WARP_REDUCE_OR:
  case WARP_REDUCE_XOR: {
    bool first = true;
    uint32_t r = 0;
    for (unsigned l = 0; l < 32; l++) {
      if (!(mask >> l & 1)) continue;
      uint32_t v = (uint32_t)w->value[l];
      if (first) {
        r = v;
        first = false;
        continue;
      }
      switch (kind) {
      case WARP_REDUCE_ADD: r += v; break;
      case WARP_REDUCE_AND: r &= v; break;
      case WARP_REDUCE_OR: r |= v; break;
      case WARP_REDUCE_XOR: r ^= v; break;
      case WARP_REDUCE_MIN:
        if (is_signed ? (int32_t)v < (int32_t)r : v < r) r = v;
        break;
      default:
        if (is_signed ? (int32_t)v > (int32_t)r : v > r) r = v;
        break;
      }
    }
    acc = r;
    break;
  }
  default: break;
  }
  for (unsigned l = 0; l < 32; l++) {
    if (!(mask >> l & 1)) continue;
    uint64_t r = acc;
    if (kind >= WARP_SHFL_IDX && kind <= WARP_SHFL_XOR) {
      const int width = w->width[l], arg = w->arg[l];
      const int lo = (int)l & ~(width - 1), hi = lo + width - 1;
      int src;
      switch (kind) {
      case WARP_SHFL_IDX: src = lo + (arg & (width - 1)); break;
      case WARP_SHFL_UP: src = (int)l - arg < lo ? (int)l : (int)l - arg; break;
      case WARP_SHFL_DOWN: src = (int)l + arg > hi ? (int)l : (int)l + arg; break;
      default: src = ((int)l ^ (arg & 31)) > hi ? (int)l : (int)l ^ (arg & 31); break;
      }
      if (!(mask >> src & 1))
        fail(s, "%s in warp %u: lane %u reads lane %d, which is not in mask 0x%08x",
             warp_name(kind), (unsigned)(w - s->warps), l, src, mask);
      r = w->value[src];
    }
    w->result[l] = r;
  }
}

} // namespace

uint64_t warp_op(warp_kind kind, unsigned mask, uint64_t value, int arg, int width,
                 bool is_signed) {
  scheduler *s = tls_sched;
  const unsigned t = linear_tid(), lane = t % 32, wi = t / 32;
  warp_state *w = &s->warps[wi];
  const uint32_t bit = 1u << lane;
  if (!(mask & bit))
    fail(s, "%s: mask 0x%08x lacks the caller's lane %u", warp_name(kind), mask, lane);
  if (width < 1 || width > 32 || (width & (width - 1)))
    fail(s, "%s: width %d is not a power of two in [1, 32]", warp_name(kind), width);
  const unsigned first = wi * 32, lanes = s->n - first < 32 ? s->n - first : 32;
  const uint32_t exists = lanes == 32 ? 0xffffffffu : (1u << lanes) - 1;
  if (mask & ~exists)
    fail(s, "%s: mask 0x%08x names lanes that do not exist (the block has %u threads)",
         warp_name(kind), mask, s->n);
  if (mask & w->exited) {
    fail(s, "%s: mask 0x%08x names lane %d, which has exited", warp_name(kind), mask,
         __builtin_ctz(mask & w->exited));
  }
  /* Every waiting lane of the mask was checked against the lowest one when
   * it arrived, so checking against that one suffices (the meeting is
   * verified once more when complete). */
  if (const uint32_t waiting = w->arrived & mask) {
    const unsigned l = (unsigned)__builtin_ctz(waiting);
    if (w->kind[l] != kind || w->mask[l] != mask || w->width[l] != width)
      fail(s, "%s (mask 0x%08x, width %d) meets lane %u in %s (mask 0x%08x, width %d)",
           warp_name(kind), mask, width, l, warp_name(w->kind[l]), w->mask[l], w->width[l]);
  }
  w->kind[lane] = (uint8_t)kind;
  w->mask[lane] = mask;
  w->arg[lane] = arg;
  w->width[lane] = width;
  w->value[lane] = value;
  w->arrived |= bit;
  if ((w->arrived & mask) == mask) {
    /* Last to arrive: compute everyone's result, wake the others, go on. */
    for (unsigned l = 0; l < 32; l++)
      if ((mask >> l & 1) && (w->kind[l] != kind || w->mask[l] != mask || w->width[l] != width))
        fail(s, "%s (mask 0x%08x, width %d) meets lane %u in %s (mask 0x%08x, width %d)",
             warp_name(kind), mask, width, l, warp_name(w->kind[l]), w->mask[l], w->width[l]);
    complete_warp(s, w, mask, kind, is_signed);
    w->arrived &= ~mask;
    for (unsigned k = 0; k < 32; k++) {
      const unsigned l = s->reverse ? 31 - k : k;
      if ((mask >> l & 1) && l != lane) {
        s->f[first + l].state = RUNNABLE;
        push(s, first + l);
      }
    }
    return w->result[lane];
  }
  s->f[t].state = AT_WARP;
  run_next(s);
  return w->result[lane];
}

int barrier(barrier_kind kind, int pred) {
  scheduler *s = tls_sched;
  if (s->bar_arrived == 0) {
    s->bar_kind = kind;
    s->bar_acc = kind == BAR_AND ? 1 : 0;
  } else if (s->bar_kind != kind) {
    fail(s, "__syncthreads variants differ at one barrier");
  }
  if (kind == BAR_COUNT) s->bar_acc += pred != 0;
  if (kind == BAR_AND) s->bar_acc &= pred != 0;
  if (kind == BAR_OR) s->bar_acc |= pred != 0;
  s->bar_arrived++;
  fiber *me = &s->f[s->cur];
  me->state = AT_BARRIER;
  if (s->bar_arrived == s->live) {
    release_barrier(s);
    return s->bar_result;
  }
  run_next(s);
  return s->bar_result;
}

void *shared_static(const void *site, size_t bytes, size_t align) {
  scheduler *s = tls_sched;
  for (unsigned i = 0; i < s->n_shared; i++)
    if (s->shared[i].site == site) return s->shared[i].ptr;
  if (s->n_shared == sizeof s->shared / sizeof *s->shared)
    fail(s, "more than %zu static shared arrays", sizeof s->shared / sizeof *s->shared);
  if (bytes == 0) bytes = 1;
  if (s->static_bytes + bytes > MAX_STATIC_SHARED)
    fail(s, "static shared memory %zu + %zu bytes exceeds %zu", s->static_bytes, bytes,
         MAX_STATIC_SHARED);
  if (s->static_bytes + bytes + s->dyn_bytes > MAX_SHARED)
    fail(s, "shared memory (%zu static + %zu dynamic) exceeds %zu", s->static_bytes + bytes,
         s->dyn_bytes, MAX_SHARED);
  void *p = nullptr;
  if (posix_memalign(&p, align < 16 ? 16 : align, bytes) != 0) fail(s, "out of host memory");
  memset(p, 0xff, bytes);
  s->shared[s->n_shared++] = shared_alloc{site, p, bytes};
  s->static_bytes += bytes;
  return p;
}

void *shared_dynamic() { return tls_sched->dyn; }

int run(dim3 grid, dim3 block, size_t smem, void (*body)(void *), void *ctx) {
  scheduler *s = tls_sched = &tls_sched_storage;
  tls_error[0] = 0;
  const uint64_t threads = (uint64_t)block.x * block.y * block.z;
  if (!grid.x || !grid.y || !grid.z || grid.x > 0x7fffffffu || grid.y > 65535 || grid.z > 65535 ||
      !threads || threads > MAX_THREADS || block.x > MAX_THREADS || block.y > MAX_THREADS ||
      block.z > MAX_BLOCK_Z) {
    set_error("invalid launch configuration: grid (%u,%u,%u), block (%u,%u,%u)", grid.x, grid.y,
              grid.z, block.x, block.y, block.z);
    return ERR_INVALID_CONFIG;
  }
  if (smem > MAX_SHARED) {
    set_error("%zu bytes of dynamic shared memory exceed %zu", smem, MAX_SHARED);
    return ERR_INVALID_VALUE;
  }
  if (s->body) {
    set_error("a kernel launched another kernel (not supported by the emulation)");
    return ERR_LAUNCH_FAILURE;
  }
  const unsigned n = (unsigned)threads;
  if (!ensure_fibers(s, n)) {
    set_error("cannot map %u fiber stacks: %s", n, strerror(errno));
    return ERR_LAUNCH_FAILURE;
  }
#ifdef SIMT_TSAN
  s->main_tsan = __tsan_get_current_fiber();
#endif
#ifdef SIMT_ASAN
  if (s->stacks_dirty) /* frames of an abandoned launch left poisoned shadow */
    for (unsigned i = 0; i < s->n_fibers; i++)
      __asan_unpoison_memory_region(s->f[i].stack, STACK_BYTES);
#endif
  if (s->stacks_dirty) /* an abandoned launch's fibers stopped mid-kernel */
    for (unsigned i = 0; i < s->n_fibers; i++) s->f[i].ready = false;
  s->stacks_dirty = false;
  {
    /* Read once per launch: tests flip it between runs of a suite. */
    const char *order = getenv("BRISK_SIMT_ORDER");
    s->reverse = order && strcmp(order, "reverse") == 0;
  }
  s->body = body;
  s->ctx = ctx;
  s->n = n;
  s->failed = false;
  s->n_shared = 0;
  s->static_bytes = 0;
  s->dyn_bytes = smem;
  s->dyn = nullptr;
  if (smem && posix_memalign(&s->dyn, 64, smem) != 0) {
    s->body = nullptr;
    set_error("out of host memory for %zu bytes of shared memory", smem);
    return ERR_LAUNCH_FAILURE;
  }
  memset(s->warps, 0, sizeof s->warps);
  blockDim = block;
  gridDim = grid;
  for (unsigned i = 0; i < n; i++)
    s->f[i].tid = uint3{i % block.x, i / block.x % block.y, i / (block.x * block.y)};

  for (unsigned bz = 0; bz < grid.z && !s->failed; bz++)
    for (unsigned by = 0; by < grid.y && !s->failed; by++)
      for (unsigned bx = 0; bx < grid.x && !s->failed; bx++) {
        blockIdx = uint3{bx, by, bz};
        for (unsigned i = 0; i < s->n_shared; i++)
          memset(s->shared[i].ptr, 0xff, s->shared[i].bytes);
        if (smem) memset(s->dyn, 0xff, smem);
        for (unsigned i = 0; i < n; i++) {
          if (!s->f[i].ready) {
            context_init(&s->f[i].ctx, s->f[i].stack, STACK_BYTES, fiber_entry);
            s->f[i].asan_fake = nullptr;
            s->f[i].ready = true;
          }
          s->f[i].state = RUNNABLE;
          s->queue[i] = (int)(s->reverse ? n - 1 - i : i);
        }
        for (unsigned i = 0; i < (n + 31) / 32; i++) s->warps[i].exited = 0;
        s->q_head = 1;
        s->q_len = n - 1;
        s->live = n;
        s->bar_arrived = 0;
        switch_to(s, nullptr, &s->f[s->queue[0]]);
        if (!s->failed && s->live) {
          /* Nothing runnable but threads left: name what they wait for. */
          unsigned at_bar = 0, at_warp = 0, wi = 0;
          for (unsigned i = 0; i < n; i++) {
            if (s->f[i].state == AT_BARRIER) at_bar++;
            if (s->f[i].state == AT_WARP && !at_warp++) wi = i / 32;
          }
          set_error(
              "block (%u,%u,%u): deadlock: %u threads wait at __syncthreads, %u in warp "
              "meetings (warp %u: lanes 0x%08x wait, e.g. in %s with mask 0x%08x)",
              bx, by, bz, at_bar, at_warp, wi, s->warps[wi].arrived,
              at_warp ? warp_name(s->warps[wi].kind[__builtin_ctz(s->warps[wi].arrived | 1u << 31)])
                      : "-",
              at_warp ? s->warps[wi].mask[__builtin_ctz(s->warps[wi].arrived | 1u << 31)] : 0u);
          s->failed = true;
          s->stacks_dirty = true;
        }
      }
  for (unsigned i = 0; i < s->n_shared; i++) free(s->shared[i].ptr);
  free(s->dyn);
  s->n_shared = 0;
  s->dyn = nullptr;
  s->body = nullptr;
  return s->failed ? ERR_LAUNCH_FAILURE : OK;
}

} // namespace brisk_simt

extern "C" const char *brisk_simt_last_error(void) { return brisk_simt::tls_error; }
