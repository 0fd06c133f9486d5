/*
 * brisk.h — the public interface of brisk, an embeddable LLM inference library.
 *
 * This header is the whole contract. It is self-contained C11 and also valid
 * C++; it includes only <stddef.h> and <stdint.h>.
 *
 * Conventions that hold for every function below unless its own comment says
 * otherwise:
 *
 *  - Fallible calls return brisk_status. BRISK_OK (0) means success; any other
 *    value is an error, and brisk_last_error() then returns a message that
 *    names what went wrong. No call aborts the process on bad input.
 *  - On error, output parameters are left untouched unless documented, and
 *    nothing the call allocated is leaked.
 *  - Parameter structs begin with `uint32_t struct_size`, are filled by their
 *    brisk_*_params_init() function, and are always passed by pointer. Fields
 *    are only ever appended, and every call applies one rule to struct_size:
 *    a smaller value (a caller built against an older header) is accepted,
 *    the fields it does not cover taking their defaults; a larger one (a
 *    newer header) is accepted when all bytes past the fields this library
 *    knows are zero, and refused with BRISK_E_INVALID_ARGUMENT otherwise (the
 *    caller asks for something this version cannot do). Structs the library
 *    fills (stats, infos) carry the caller's struct_size in the same way: only
 *    the first struct_size bytes are written, and struct_size is set to the
 *    number of bytes written (less than the caller's when the library is
 *    older). A struct_size below 4, above 4096 or ending inside a field is
 *    BRISK_E_INVALID_ARGUMENT.
 *  - brisk_*_free(NULL) is a harmless no-op.
 *  - Strings passed in are NUL-terminated UTF-8 and are copied if kept.
 *    Strings returned are owned by the library; their lifetime is stated.
 *  - Thread safety: functions without a handle argument may be called from any
 *    thread at any time, except the global hook setters, which must be called
 *    before any other brisk function is in use. Calls on one handle must not
 *    run concurrently unless the function's comment says so.
 *
 * Stability: everything outside the BRISK_EXPERIMENTAL section is stable
 * within an ABI major version (BRISK_ABI_VERSION): signatures never change,
 * enum values are never renumbered, and removal waits for a new major
 * version after a release of BRISK_DEPRECATED. Declarations inside the
 * experimental section may change in any release; they are visible only when
 * the including file defines BRISK_EXPERIMENTAL before including this header.
 */
#ifndef BRISK_H
#define BRISK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Export and deprecation markers                                           */
/* ------------------------------------------------------------------------ */

#if defined(_WIN32)
#  if defined(BRISK_BUILDING)
#    define BRISK_API __declspec(dllexport)
#  else
#    define BRISK_API
#  endif
#elif defined(__GNUC__) || defined(__clang__)
#  define BRISK_API __attribute__((visibility("default")))
#else
#  define BRISK_API
#endif

#if defined(__cplusplus) && __cplusplus >= 201402L
#  define BRISK_DEPRECATED(msg) [[deprecated(msg)]]
#elif defined(__GNUC__) || defined(__clang__)
#  define BRISK_DEPRECATED(msg) __attribute__((deprecated(msg)))
#elif defined(_MSC_VER)
#  define BRISK_DEPRECATED(msg) __declspec(deprecated(msg))
#else
#  define BRISK_DEPRECATED(msg)
#endif

/* ------------------------------------------------------------------------ */
/* Version                                                                  */
/* ------------------------------------------------------------------------ */

#define BRISK_VERSION_MAJOR 0
#define BRISK_VERSION_MINOR 1
#define BRISK_VERSION_PATCH 0
/* MAJOR * 10000 + MINOR * 100 + PATCH, for compile-time comparisons. */
#define BRISK_VERSION_NUMBER                                                                       \
  (BRISK_VERSION_MAJOR * 10000 + BRISK_VERSION_MINOR * 100 + BRISK_VERSION_PATCH)
/* The ABI major version; also the shared library's SONAME suffix. */
#define BRISK_ABI_VERSION 0

/*
 * Returns the library's version as "MAJOR.MINOR.PATCH", a static string.
 * Compare with BRISK_VERSION_NUMBER to detect a header/library mismatch.
 */
BRISK_API const char *brisk_version_string(void);

/* Returns the library's BRISK_VERSION_NUMBER as it was built. */
BRISK_API int brisk_version_number(void);

/* Returns the library's BRISK_ABI_VERSION as it was built. */
BRISK_API int brisk_abi_version(void);

/*
 * Returns a static, human-readable one-line description of what this build
 * and this machine provide, e.g. "cpu: avx2 fma f16c; threads: 8; cuda plugin: not built".
 * Valid for the life of the process.
 */
BRISK_API const char *brisk_system_info(void);

/* ------------------------------------------------------------------------ */
/* Status codes and errors                                                  */
/* ------------------------------------------------------------------------ */

typedef enum brisk_status {
  BRISK_OK = 0,
  /* An argument is NULL, out of range, or inconsistent with another. */
  BRISK_E_INVALID_ARGUMENT = 1,
  /* An allocation failed; the library state is as before the call. */
  BRISK_E_OUT_OF_MEMORY = 2,
  /* The operating system refused a file operation (open, read, mmap). */
  BRISK_E_IO = 3,
  /* A file or buffer is malformed: truncated, inconsistent, out of bounds. */
  BRISK_E_FORMAT = 4,
  /* Well-formed input that this build does not support (e.g. an unknown
   * architecture or tensor type); the message names it. */
  BRISK_E_UNSUPPORTED = 5,
  /* A host callback asked the call to stop; everything was rolled back. */
  BRISK_E_CANCELLED = 6,
  /* An output buffer is too small; the needed size is reported. */
  BRISK_E_BUFFER_TOO_SMALL = 7,
  /* A lookup (key, name, id) found nothing. */
  BRISK_E_NOT_FOUND = 8,
  /* The call is not allowed in the current state (e.g. a hook changed while
   * handles exist). */
  BRISK_E_INVALID_STATE = 9,
  /* An internal invariant failed; please report it. */
  BRISK_E_INTERNAL = 10,
  /* The KV cache has no room for the request; nothing was changed. Free or
   * truncate sequences, or create the context with a larger pool. */
  BRISK_E_KV_FULL = 11,
  /* The device asked for cannot be used: its plugin (libbrisk-cuda.so), its
   * driver or the device itself is missing; the message says which. */
  BRISK_E_NO_DEVICE = 12
} brisk_status;

/*
 * Returns a static English name for a status, e.g. "out of memory".
 * Unknown values return "unknown status". Never returns NULL.
 */
BRISK_API const char *brisk_status_string(brisk_status status);

/*
 * Returns the message of the most recent failed brisk call on the calling
 * thread, or "" if none failed yet. The string is thread-local and stays
 * valid until the next brisk call on the same thread. Successful calls do not
 * clear it. Never returns NULL.
 */
BRISK_API const char *brisk_last_error(void);

/* ------------------------------------------------------------------------ */
/* Logging                                                                  */
/* ------------------------------------------------------------------------ */

typedef enum brisk_log_level {
  BRISK_LOG_DEBUG = 0,
  BRISK_LOG_INFO = 1,
  BRISK_LOG_WARN = 2,
  BRISK_LOG_ERROR = 3,
  BRISK_LOG_NONE = 4
} brisk_log_level;

/*
 * A log sink. `message` is one line of UTF-8 without a trailing newline,
 * valid only during the call. It may be called from any thread that runs
 * brisk code, concurrently; it must not call back into brisk.
 */
typedef void (*brisk_log_fn)(brisk_log_level level, const char *message, void *user_data);

/*
 * Routes the library's log messages at or above `min_level` to `fn`.
 * With fn == NULL messages go to stderr. By default the library is silent
 * (as after brisk_set_log_callback(NULL, NULL, BRISK_LOG_NONE)): it never
 * writes to stdout or stderr unless asked to here; the brisk program asks
 * for stderr at BRISK_LOG_WARN. BRISK_LOG_NONE silences everything. Safe to call at any time from
 * any thread; a message being delivered concurrently may still reach the old sink. Returns
 * BRISK_E_INVALID_ARGUMENT for an unknown level.
 */
BRISK_API brisk_status brisk_set_log_callback(brisk_log_fn fn, void *user_data,
                                              brisk_log_level min_level);

/* ------------------------------------------------------------------------ */
/* Allocator hook                                                           */
/* ------------------------------------------------------------------------ */

/*
 * Every allocation the library makes goes through these functions, with two
 * exceptions: read-only file mappings (mmap'ed, not allocated), and the
 * temporary JSON parse trees of Hugging Face folders (config.json,
 * tokenizer.json), which the json-c library allocates with malloc (both
 * still count against the memory limits, see brisk_set_memory_limit).
 * They must be thread-safe. `malloc` and `realloc` return NULL on failure;
 * the library then returns BRISK_E_OUT_OF_MEMORY from the public call.
 */
typedef struct brisk_allocator {
  uint32_t struct_size; /* sizeof(brisk_allocator) */
  void *(*malloc_fn)(size_t size, void *user_data);
  void *(*realloc_fn)(void *ptr, size_t size, void *user_data);
  void (*free_fn)(void *ptr, void *user_data);
  void *user_data;
} brisk_allocator;

/*
 * Installs `allocator` (copied) for all later allocations, or restores the C
 * library's malloc/realloc/free when `allocator` is NULL. Must be called
 * while the library holds no memory (before the first handle is created or
 * after the last one is freed): otherwise returns BRISK_E_INVALID_STATE and
 * changes nothing. BRISK_E_INVALID_ARGUMENT if a function pointer is NULL
 * (also one beyond a smaller struct_size) or struct_size is bad.
 */
BRISK_API brisk_status brisk_set_allocator(const brisk_allocator *allocator);

/* ------------------------------------------------------------------------ */
/* Parallel-for hook                                                        */
/* ------------------------------------------------------------------------ */

/* One unit of parallel work: process task number `index`. */
typedef void (*brisk_task_fn)(void *task_ctx, size_t index);

/*
 * A host's parallel loop: call task(task_ctx, i) exactly once for every i in
 * [0, n_tasks), on any threads, and return only when all calls have returned.
 * Tasks are independent; brisk sizes n_tasks from the host's `concurrency`.
 */
typedef void (*brisk_parallel_for_fn)(void *host_user_data, size_t n_tasks, brisk_task_fn task,
                                      void *task_ctx);

/*
 * Makes the library run its parallel loops on the host's job system instead
 * of its own thread pool; `concurrency` (>= 1) is how many tasks the host can
 * run at once. fn == NULL restores brisk's own pool. Must be called while no
 * other brisk call is running. BRISK_E_INVALID_ARGUMENT if fn is set and
 * concurrency < 1.
 */
BRISK_API brisk_status brisk_set_parallel_for(brisk_parallel_for_fn fn, void *host_user_data,
                                              int concurrency);

/* ------------------------------------------------------------------------ */
/* Memory accounting                                                        */
/* ------------------------------------------------------------------------ */

/*
 * Bytes currently allocated by the library through the allocator hook
 * (including alignment padding), across all handles and threads.
 */
BRISK_API uint64_t brisk_memory_allocated(void);

/* ------------------------------------------------------------------------ */
/* Model                                                                    */
/* ------------------------------------------------------------------------ */

/*
 * A loaded model: hyper-parameters, weights and vocabulary. Immutable after
 * load: one brisk_model may be shared by any number of threads, contexts and
 * engines, and every getter below may be called concurrently. It must outlive
 * everything created from it.
 */
typedef struct brisk_model brisk_model;

/*
 * Load progress: called with a fraction in [0, 1] that never decreases, on
 * the loading thread. Return nonzero to continue, 0 to cancel the load
 * (brisk_model_load then returns BRISK_E_CANCELLED with everything freed).
 */
typedef int (*brisk_progress_fn)(float fraction, void *user_data);

typedef struct brisk_model_params {
  uint32_t struct_size;       /* sizeof(brisk_model_params) */
  brisk_progress_fn progress; /* NULL: no progress reports */
  void *progress_user_data;
  /* Nonzero (default): map the file and use weights in place. Zero: read
   * every weight into memory at load (GGUF: the whole file; Hugging Face
   * folders: each tensor copied), so nothing reads the file after
   * brisk_model_load returns.
   * The hazard of mapping: the weights stay backed by the file, so if the
   * file is truncated or rewritten in place while the model is loaded (for
   * example `cp new.gguf model.gguf` over a model in use), the next decode
   * reads pages that no longer exist and the operating system kills the
   * whole process with SIGBUS; this holds with repack on too, since the
   * embedding, norms and unpacked matrices stay mapped. Replace files by
   * renaming a new one over the old path (the mapping keeps the old
   * inode), or load with use_mmap = 0 when files may change underneath: it
   * costs the file's size in memory and a read at load. */
  int use_mmap;
  /* Nonzero: load only the vocabulary (and metadata), no weights: for
   * tokenizing with vocabulary-only files. Default 0. */
  int vocab_only;
  /* Nonzero (default): weight matrices of a type that the CPU kernels read
   * faster in another layout (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K and
   * Q6_K on x86-64 with AVX2) are regrouped at load, in place: one pass over
   * those weights, and their pages of a mapped file become the process's own
   * memory (the file is never written) instead of shared page cache. When
   * those weights would take more than 3/4 of the memory available at load,
   * they are used as stored (an INFO log line says so). Results are bit for
   * bit the same either way. Zero: every weight is used exactly as stored. */
  int repack;
  /* Where the weights live and the model runs: NULL or "cpu" (default), or
   * "cuda:N" ("cuda" is "cuda:0"), see brisk_device_count. A device that
   * cannot be used fails the load with BRISK_E_NO_DEVICE. */
  const char *device;
  /* With a GPU device: how many of the model's layers (the first ones) live
   * on it; the rest, and the output projection unless every layer is on the
   * GPU, run on the CPU, so a model larger than the GPU's memory still
   * runs. -1 (default): all. Token embeddings always stay in host memory.
   * Ignored for the CPU. */
  int32_t n_gpu_layers;
  /* The most host memory (bytes) the model may hold: what the load
   * allocates (weights read into memory included) plus the pages of a mapped
   * file that repacking rewrites; 0 (default): no limit but the
   * process-wide one (brisk_set_memory_limit). A load that would pass it
   * fails with BRISK_E_OUT_OF_MEMORY, nothing left allocated; repacking that
   * would pass it is skipped (the weights are used as stored). Mapped
   * weights used in place are page cache and do not count. */
  uint64_t memory_limit;
  /* Tensor parallelism in this process (docs/parallelism.md): 0 or 1
   * (default) runs whole; 2, 4 or 8 cuts the model at load into that many
   * rank shards, and every context on it runs them as threads of this
   * process with the threads split between them. Logits are bit for bit
   * those of tp_size 1. With a CUDA device "cuda:K" the ranks are GPUs,
   * cuda:K..cuda:K+tp_size-1, each holding its shard in its own memory,
   * their sums over NCCL (one process; logits bit for bit those of
   * tp_size 1 on a GPU, and within the CUDA backend's tolerance of the
   * CPU's); every layer must be on the GPUs (n_gpu_layers -1), too few
   * devices is BRISK_E_NO_DEVICE. A model that cannot be cut fails the
   * load with BRISK_E_UNSUPPORTED saying why. */
  int32_t tp_size;
  /* Pipeline parallelism in this process (docs/parallelism.md): 0 or 1
   * (default) runs whole; 2..16 cuts the layers into that many stages of
   * consecutive layers, each run by its own rank thread (with tp_size
   * ranks of its own each: a tp_size x pp_size grid), the activations
   * passed between stages and a batch's tokens cut into micro-batches so
   * that stages overlap. Logits are bit for bit those of pp_size 1. At most
   * the model's layer count; CPU device only (BRISK_E_UNSUPPORTED
   * otherwise). */
  int32_t pp_size;
} brisk_model_params;

/* Fills *params with defaults (including struct_size). NULL is ignored. */
BRISK_API void brisk_model_params_init(brisk_model_params *params);

/* ------------------------------------------------------------------------ */
/* Devices                                                                  */
/* ------------------------------------------------------------------------ */

typedef enum brisk_device_kind { BRISK_DEVICE_CPU = 0, BRISK_DEVICE_CUDA = 1 } brisk_device_kind;

/* What brisk_device_info reports about one device. */
typedef struct brisk_device_props {
  uint32_t struct_size; /* sizeof(brisk_device_props), set by the caller */
  brisk_device_kind kind;
  int32_t index;         /* N of "cuda:N"; 0 for the CPU */
  int32_t compute_major; /* CUDA compute capability (9.0 for an H100); 0 for the CPU */
  int32_t compute_minor;
  uint64_t total_memory; /* bytes: the GPU's memory, or the host's physical memory */
  uint64_t free_memory;  /* bytes free now (for the CPU: available to this process) */
  char id[32];           /* the name brisk_model_params.device takes: "cpu", "cuda:0" */
  char name[128];        /* the processor's or GPU's model name */
} brisk_device_props;

/*
 * Number of devices brisk can run on: the CPU (always device 0) and then
 * every CUDA device, when the CUDA plugin (libbrisk-cuda.so) and a driver
 * are present. Looking for the plugin happens once, on the first call that
 * needs it (this one, brisk_device_info, or a load naming a CUDA device);
 * a machine without one just has 1 device. Thread-safe.
 */
BRISK_API int32_t brisk_device_count(void);

/*
 * Fills *props for device i (0 <= i < brisk_device_count()), up to
 * props->struct_size bytes (the struct_size rule above). BRISK_E_INVALID_ARGUMENT
 * for a NULL props, a bad struct_size, or i out of range.
 * Thread-safe.
 */
BRISK_API brisk_status brisk_device_info(int32_t i, brisk_device_props *props);

/*
 * Checks that a device name ("cpu", "cuda", "cuda:N") can be used, without
 * loading anything on it: BRISK_OK, BRISK_E_INVALID_ARGUMENT for a malformed
 * name, or BRISK_E_NO_DEVICE with a message saying what is missing (the
 * plugin and where it was looked for, the driver, or the device). Thread-safe.
 */
BRISK_API brisk_status brisk_device_check(const char *device);

/*
 * Where to look first for brisk's plugins (the CUDA device plugin
 * libbrisk-cuda.so, the MPI plugin libbrisk-mpi.so): a directory, copied;
 * NULL restores the default search. Without it (and without the
 * BRISK_PLUGIN_DIR environment variable, which comes next) a plugin is
 * looked for next to the library or program that holds brisk (dladdr) and
 * in its ../lib, then in the install's library directory. Takes effect only
 * before the first device lookup, model load or brisk_mpi_world:
 * afterwards BRISK_E_INVALID_STATE. Thread-safe.
 */
BRISK_API brisk_status brisk_set_plugin_dir(const char *dir);

/*
 * Loads a model from `path`: a GGUF file (v2 or v3), or a Hugging Face model
 * folder (config.json plus model.safetensors or a sharded
 * model.safetensors.index.json). The file is validated completely before
 * use (structure, shapes, types, alignment, and every hyper-parameter and
 * RoPE value the forward pass uses), so a model that loads also decodes;
 * every failure is a status with a message naming the cause:
 *   BRISK_E_INVALID_ARGUMENT  path or out is NULL, or params->struct_size bad
 *   BRISK_E_IO                the file cannot be opened or read
 *   BRISK_E_FORMAT            the file is malformed or a tensor has a wrong shape
 *   BRISK_E_UNSUPPORTED       unknown architecture or tensor type (named)
 *   BRISK_E_CANCELLED         the progress callback returned 0
 *   BRISK_E_OUT_OF_MEMORY
 * `params` may be NULL for defaults. On success *out owns the model; free it
 * with brisk_model_free. On failure *out is untouched.
 */
BRISK_API brisk_status brisk_model_load(const char *path, const brisk_model_params *params,
                                        brisk_model **out);

/*
 * Loads a GGUF image from the caller's memory: a model packed in an app
 * bundle, an asset already in memory, a decrypted buffer. The bytes are
 * borrowed, not copied: they must stay valid and unchanged until
 * brisk_model_free, and are never written (weights that the CPU would
 * regroup are used as stored). Validation, progress, cancellation and
 * errors are those of brisk_model_load; BRISK_E_INVALID_ARGUMENT for NULL
 * data or out, or size 0. Data 64-byte aligned is best: tensor data then
 * keeps the file's alignment.
 */
BRISK_API brisk_status brisk_model_load_from_memory(const void *data, size_t size,
                                                    const brisk_model_params *params,
                                                    brisk_model **out);

/*
 * Reads `size` bytes at `offset` of the image into buf; returns the bytes
 * read (1..size: short reads are continued), 0 at an unexpected end, or a
 * negative value on error. Called from the loading thread only.
 */
typedef int64_t (*brisk_read_fn)(void *user_data, uint64_t offset, void *buf, size_t size);

/* A GGUF image behind a callback: a platform storage handle, an archive
 * entry, an encrypted pack. */
typedef struct brisk_model_reader {
  uint32_t struct_size; /* sizeof(brisk_model_reader) */
  uint64_t size;        /* bytes of the image */
  brisk_read_fn read;
  void *user_data;
} brisk_model_reader;

/*
 * Loads a GGUF image through a reader: the image is read once, in chunks
 * (the first half of the progress reports, which can cancel), into memory
 * the model owns; the reader is not used after the call returns. A reader
 * that fails or ends early is BRISK_E_IO naming the offset; otherwise as
 * brisk_model_load.
 */
BRISK_API brisk_status brisk_model_load_from_reader(const brisk_model_reader *reader,
                                                    const brisk_model_params *params,
                                                    brisk_model **out);

/* Frees the model and unmaps its file. NULL is a no-op. */
BRISK_API void brisk_model_free(brisk_model *model);

/*
 * The architecture name ("llama", "mistral", "qwen2", "qwen3", "mixtral"),
 * a static string; "" for NULL.
 */
BRISK_API const char *brisk_model_architecture(const brisk_model *model);

/* Hyper-parameters; each returns 0 for a NULL model.
 * n_vocab is the number of token ids: logits have n_vocab entries, and
 * prompts and samplers use ids in [0, n_vocab). For a model with a
 * vocabulary, every such id is a token of it: a file whose vocabulary has
 * more tokens than its embedding has rows fails to load (BRISK_E_FORMAT),
 * and one with fewer (an embedding padded to a round size) uses only the
 * rows of its tokens, so n_vocab is then the vocabulary's size. */
BRISK_API int32_t brisk_model_n_vocab(const brisk_model *model);
BRISK_API int32_t brisk_model_n_ctx_train(const brisk_model *model);
BRISK_API int32_t brisk_model_n_embd(const brisk_model *model);
BRISK_API int32_t brisk_model_n_layer(const brisk_model *model);
BRISK_API int32_t brisk_model_n_head(const brisk_model *model);
BRISK_API int32_t brisk_model_n_head_kv(const brisk_model *model);
/* Number of weight elements (tied embeddings counted once). */
BRISK_API uint64_t brisk_model_n_params(const brisk_model *model);
/* Bytes of weight data as stored (quantized sizes for quantized types). */
BRISK_API uint64_t brisk_model_weight_bytes(const brisk_model *model);

/*
 * Metadata lookup by key: for GGUF files, any key of the file
 * ("general.name", "llama.context_length", ...); for Hugging Face folders,
 * a key of config.json, with dots for nesting ("rope_scaling.factor").
 * Writes the value as text (numbers in decimal, booleans "true"/"false",
 * strings as they are, arrays as "[array of N TYPE]") NUL-terminated into
 * buf. *needed (if not NULL) receives the length without the NUL.
 * Returns BRISK_E_NOT_FOUND if absent, BRISK_E_BUFFER_TOO_SMALL if the
 * text plus NUL does not fit in `capacity` (buf then holds a truncated,
 * NUL-terminated prefix when capacity > 0), BRISK_E_INVALID_ARGUMENT for
 * NULL model or key, or buf NULL with capacity > 0.
 */
BRISK_API brisk_status brisk_model_meta(const brisk_model *model, const char *key, char *buf,
                                        size_t capacity, size_t *needed);

/*
 * The chat template text stored with the model (GGUF
 * "tokenizer.chat_template", or tokenizer_config.json's "chat_template"),
 * or NULL if it has none. Valid as long as the model.
 */
BRISK_API const char *brisk_model_chat_template(const brisk_model *model);

/* One tensor of the model file, as stored. */
typedef struct brisk_tensor_info {
  uint32_t struct_size; /* set by the caller: sizeof(brisk_tensor_info) */
  const char *name;     /* valid as long as the model */
  const char *type;     /* "f32", "f16", "bf16", "q8_0", "q4_k", ...; static */
  uint32_t n_dims;      /* 1..4 */
  uint64_t dims[4];     /* elements per dimension, fastest first; unused are 1 */
  uint64_t n_bytes;
} brisk_tensor_info;

/* Number of tensors in the model's file(s); 0 for NULL. */
BRISK_API int64_t brisk_model_n_tensors(const brisk_model *model);

/*
 * Describes tensor `index` (0 <= index < brisk_model_n_tensors) into *info,
 * whose struct_size the caller sets. BRISK_E_INVALID_ARGUMENT for a NULL
 * argument, an index out of range or a bad struct_size.
 */
BRISK_API brisk_status brisk_model_tensor(const brisk_model *model, int64_t index,
                                          brisk_tensor_info *info);

/* ------------------------------------------------------------------------ */
/* Vocabulary: text <-> tokens                                              */
/* ------------------------------------------------------------------------ */

/*
 * Every function here is a read-only use of an immutable model and may run
 * concurrently from many threads. A model loaded from a file without a
 * supported tokenizer has no vocabulary: these calls then return
 * BRISK_E_UNSUPPORTED with the reason (token ids can still be decoded).
 */

/* Flags of brisk_tokenize. */
#define BRISK_TOKENIZE_ADD_SPECIAL 1u   /* add BOS / EOS as the model's vocabulary says */
#define BRISK_TOKENIZE_PARSE_SPECIAL 2u /* match control tokens ("<|im_start|>") in the text */

/*
 * Converts text[0, len) (bytes; invalid UTF-8 is kept as byte tokens, so
 * nothing is lost) into token ids. Writes min(n, capacity) ids and sets
 * *n_tokens to n, the full count; returns BRISK_E_BUFFER_TOO_SMALL when
 * capacity < n (call again with a buffer of *n_tokens). `text` may be NULL
 * when len is 0; `tokens` may be NULL when capacity is 0.
 * BRISK_E_UNSUPPORTED (with *n_tokens untouched) when text would be lost
 * or blown up: a character no token covers in a vocabulary with neither an
 * unknown token nor byte tokens, or a tokenizer.json whose normalizers
 * would grow a piece of text past 4 times its length + 1024 bytes.
 */
BRISK_API brisk_status brisk_tokenize(const brisk_model *model, const char *text, size_t len,
                                      int32_t *tokens, size_t capacity, uint32_t flags,
                                      size_t *n_tokens);

/* Flags of brisk_token_to_piece, brisk_detokenize and the detokenizer. */
#define BRISK_DETOKENIZE_REMOVE_SPECIAL 1u  /* drop the BOS / EOS tokenize adds */
#define BRISK_DETOKENIZE_RENDER_SPECIAL 2u  /* write control tokens as their text */
#define BRISK_DETOKENIZE_CLEAN_SPACES 4u    /* undo " ," spacing where the model asks */
#define BRISK_DETOKENIZE_REPLACE_INVALID 8u /* invalid UTF-8 becomes U+FFFD */

/*
 * The bytes one token stands for (no NUL added). Control tokens give ""
 * unless BRISK_DETOKENIZE_RENDER_SPECIAL. Writes min(n, capacity) bytes,
 * *n_bytes = n; BRISK_E_BUFFER_TOO_SMALL when short;
 * BRISK_E_INVALID_ARGUMENT for a token outside [0, n_vocab).
 */
BRISK_API brisk_status brisk_token_to_piece(const brisk_model *model, int32_t token, uint32_t flags,
                                            char *buf, size_t capacity, size_t *n_bytes);

/*
 * Text of a token sequence (no NUL added), such that
 * detokenize(tokenize(x)) == x for the models' lossless tokenizers. Writes
 * min(n, capacity) bytes, *n_bytes = n; BRISK_E_BUFFER_TOO_SMALL when short.
 */
BRISK_API brisk_status brisk_detokenize(const brisk_model *model, const int32_t *tokens,
                                        size_t n_tokens, uint32_t flags, char *buf, size_t capacity,
                                        size_t *n_bytes);

/*
 * Streaming detokenizer for token-by-token output: each push releases only
 * complete UTF-8 characters, holding back a character whose bytes are split
 * across tokens. One per generation; not thread-safe; must not outlive the
 * model.
 */
typedef struct brisk_detokenizer brisk_detokenizer;
BRISK_API brisk_status brisk_detokenizer_create(const brisk_model *model, uint32_t flags,
                                                brisk_detokenizer **out);
BRISK_API void brisk_detokenizer_free(brisk_detokenizer *detok); /* NULL is a no-op */
/* *text (not NUL-terminated, possibly empty) stays valid until the next call
 * on this detokenizer. */
BRISK_API brisk_status brisk_detokenizer_push(brisk_detokenizer *detok, int32_t token,
                                              const char **text, size_t *len);
/* Releases whatever is held back and starts over. */
BRISK_API brisk_status brisk_detokenizer_flush(brisk_detokenizer *detok, const char **text,
                                               size_t *len);

typedef enum brisk_special_token {
  BRISK_TOKEN_BOS = 0,
  BRISK_TOKEN_EOS = 1,
  BRISK_TOKEN_UNK = 2,
  BRISK_TOKEN_PAD = 3,
  BRISK_TOKEN_EOT = 4, /* end of turn */
  BRISK_TOKEN_EOM = 5  /* end of message */
} brisk_special_token;

/* The id of a special token, or -1 if the vocabulary has none. */
BRISK_API int32_t brisk_model_special_token(const brisk_model *model, brisk_special_token which);

/* Nonzero if generation should stop at this token (EOS, EOT, EOM, ...). */
BRISK_API int brisk_token_is_eog(const brisk_model *model, int32_t token);

/* Token attributes, bit flags. */
#define BRISK_TOKEN_ATTR_NORMAL (1u << 0)
#define BRISK_TOKEN_ATTR_UNKNOWN (1u << 1)
#define BRISK_TOKEN_ATTR_CONTROL (1u << 2)
#define BRISK_TOKEN_ATTR_USER_DEFINED (1u << 3)
#define BRISK_TOKEN_ATTR_BYTE (1u << 4)
#define BRISK_TOKEN_ATTR_UNUSED (1u << 5)

/* BRISK_TOKEN_ATTR_* bits of a token; 0 for an id out of range. */
BRISK_API uint32_t brisk_token_attr(const brisk_model *model, int32_t token);

/* "spm", "bpe", or "" when the model has no vocabulary. */
BRISK_API const char *brisk_model_tokenizer(const brisk_model *model);

/* ------------------------------------------------------------------------ */
/* Chat templates                                                           */
/* ------------------------------------------------------------------------ */

/*
 * brisk never runs a template engine on text from a model file. The model's
 * template (brisk_model_chat_template) is recognized as one of the common
 * families by distinctive fragments, and that family's format is written by
 * the library's own code, as the family's reference template renders it,
 * with two documented differences: the reference's leading BOS text is left
 * out (tokenize the result with BRISK_TOKENIZE_ADD_SPECIAL |
 * BRISK_TOKENIZE_PARSE_SPECIAL, which adds BOS as the vocabulary says), and
 * no model-specific default system prompt is inserted (pass a system message
 * for that). Families (names as returned and accepted):
 *   "chatml"            <|im_start|>role\ncontent<|im_end|>\n (Qwen, SmolLM, ...)
 *   "llama2"            [INST] <<SYS>>\n...\n<</SYS>>\n\n... [/INST] (Llama 2 chat)
 *   "llama3"            <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|>
 *   "mistral-v1"        " [INST] ... [/INST]" (Mistral 7B v0.1/v0.2, Mixtral 8x7B)
 *   "mistral-v3"        "[INST] ...[/INST]" (Mistral 7B v0.3, Mixtral 8x22B)
 *   "mistral-v3-tekken" "[INST]...[/INST]" (Mistral Nemo)
 *   "mistral-v7"        [SYSTEM_PROMPT] ...[/SYSTEM_PROMPT][INST] ...[/INST] (Large 2411)
 *   "mistral-v7-tekken" the same without the spaces (Mistral Small 3)
 *   "gemma"             <start_of_turn>user|model\n...<end_of_turn>\n (Gemma 1-3)
 *   "phi3"              <|role|>\ncontent<|end|>\n (Phi-3, Phi-3.5)
 * Families whose reference accepts a system message only as the first
 * message (llama2, mistral-v1/v3/v3-tekken, gemma) fold it into a user turn
 * as the reference does. Contents are copied byte for byte, except where the
 * reference trims them (llama2, llama3, gemma, mistral-v3 assistant turns),
 * which strips ASCII whitespace at both ends.
 */

/* One message of a conversation. role is "system", "user" or "assistant";
 * both strings are NUL-terminated UTF-8 owned by the caller. */
typedef struct brisk_chat_message {
  const char *role;
  const char *content;
} brisk_chat_message;

/*
 * Formats a conversation as the prompt text the model was trained on.
 * template_name selects a family by name (see above); NULL detects it from
 * the model's template text. add_assistant_prefix nonzero appends the
 * opening of an assistant turn (the generation prompt) for families that
 * have one (llama2 and the mistral families end a user turn with [/INST],
 * which already is it). Writes the text NUL-terminated into buf and its
 * length without the NUL into *len (if len is not NULL).
 *   BRISK_E_BUFFER_TOO_SMALL  length + 1 > capacity: *len is the needed
 *                             length (without the NUL); buf holds a
 *                             truncated, NUL-terminated prefix if capacity > 0
 *   BRISK_E_UNSUPPORTED       template_name is not a known family, the model
 *                             has no chat template, or its template is not
 *                             recognized (the message says so; pass a
 *                             template name to choose the format)
 *   BRISK_E_INVALID_ARGUMENT  messages NULL with n_messages > 0, buf NULL with
 *                             capacity > 0, model and template_name both
 *                             NULL, a role other than system/user/assistant
 *                             or a NULL content (the message names the
 *                             message index and role), or a system message
 *                             after the first in a family that allows one
 *                             only first
 * model may be NULL when template_name is given. Allocates nothing. Reads
 * the model only: may run concurrently with any other read of the model.
 */
BRISK_API brisk_status brisk_chat_apply(const brisk_model *model, const char *template_name,
                                        const brisk_chat_message *messages, size_t n_messages,
                                        int add_assistant_prefix, char *buf, size_t capacity,
                                        size_t *len);

/*
 * The family name ("chatml", ...) recognized in the model's chat template, a
 * static string; NULL if model is NULL, has no template or its template is
 * not recognized. Safe to call concurrently.
 */
BRISK_API const char *brisk_chat_template_name(const brisk_model *model);

/*
 * The names of the built-in families: writes min(count, capacity) static
 * strings to names (which may be NULL when capacity is 0) and returns the
 * count. Any thread, any time.
 */
BRISK_API size_t brisk_chat_builtin_templates(const char **names, size_t capacity);

/* ------------------------------------------------------------------------ */
/* Context: KV cache and forward passes                                     */
/* ------------------------------------------------------------------------ */

/*
 * A context runs a model: it owns a paged KV cache (a pool of fixed-size
 * blocks shared by up to n_seq_max sequences), activation buffers for
 * batches of up to max_batch_tokens tokens, and a thread pool. Calls on one
 * context must not run concurrently; distinct contexts (even on one model)
 * are independent.
 */
typedef struct brisk_context brisk_context;

/*
 * Element type of the KV cache. The quantized types store each token's
 * head of K or V as 8-bit values with one F16 scale per 64 values (the
 * group's largest |x| maps to the format's largest value), each group
 * rotated by an orthonormal Walsh-Hadamard transform first so that outlier
 * channels do not set the scale of the rest (docs/kv.md): head_dim + 2
 * bytes per 64 values, 1.94x the tokens of F16 in the same memory at
 * head_dim 64 (brisk_kv_stats.bytes_per_token). Logits of a teacher-forced
 * sequence against an F32 cache (tests/forward/test_kv_types.c), per-row
 * relative L2 error, mean / worst row:
 *                                   F16              Q8_0             FP8_E4M3
 *   tiny-f16 (random, 200 ids)      2.9e-4 / 3.7e-4  9.5e-3 / 1.1e-2  3.1e-2 / 4.0e-2
 *   tiny-q8_0 (random)              1.1e-2 / 1.3e-2  1.4e-2 / 1.8e-2  2.9e-2 / 4.2e-2
 *   tiny-q4_0 (random)              1.1e-2 / 1.4e-2  1.4e-2 / 1.8e-2  3.1e-2 / 4.3e-2
 *   stories260K (head_dim 8)        1.8e-3 / 6.5e-3  3.5e-2 / 1.9e-1  1.7e-1 / 1.1e+0
 *     (over other random prompts the Q8_0 worst row reaches 5.3e-1)
 *   SmolLM2-135M Q4_1 (256 tokens   2.4e-2 / 1.8e-1  2.6e-2 / 1.6e-1  4.0e-2 / 2.1e-1
 *     of English text)
 * (largest |logit difference| on SmolLM2: 1.52 / 1.75 / 1.99, logits up to
 * 39.9; Q8_0 measured with the INT8 query below; the random models' K/V
 * have no outliers, so there the rotation costs rather than helps). With
 * quantized weights
 * the activations are quantized too, so even
 * F16 moves their roundings: there INT8 costs little beyond F16, FP8 about
 * twice; on small heads (head_dim 8) 8 bits per value show. Greedy next
 * token on 2048 teacher-forced positions of English text (the GPL v3),
 * agreement with the F16 cache (tests/forward/test_kv_agreement.c): on
 * SmolLM2 Q4_1, Q8_0 95.26%, FP8 92.24%, against 95.41% for an exact F32
 * cache (the activation roundings again); on an F16-weight copy of it,
 * which isolates the cache, Q8_0 98.73%, FP8 95.46%, F32 99.95%: INT8 is
 * short of 99% there, every flip at a near-tie. On the CPU a Q8_0 cache
 * is read by INT8 dot products with the query quantized to INT8 per 32
 * values (0.15 points of that agreement; the CUDA backend keeps a float
 * query).
 */
typedef enum brisk_kv_type {
  BRISK_KV_F16 = 0, /* default: half the memory, error ~1e-3 relative */
  BRISK_KV_F32 = 1,
  BRISK_KV_Q8_0 = 2,    /* INT8, x = scale * q, q in [-127, 127] */
  BRISK_KV_FP8_E4M3 = 3 /* FP8 E4M3 (the GPUs' FP8), x = scale * e4m3(q) */
} brisk_kv_type;

/* Checked between layers of every decode; nonzero aborts the decode with
 * BRISK_E_CANCELLED (the context is left as before the call). */
typedef int (*brisk_abort_fn)(void *user_data);

typedef struct brisk_context_params {
  uint32_t struct_size; /* sizeof(brisk_context_params) */
  /* Threads for parallel loops, the calling thread included; 0 = one per
   * processor. Ignored when a host parallel_for hook is installed. */
  int32_t n_threads;
  /* KV pool size in tokens (rounded up to whole blocks). 0: derived from
   * kv_bytes if set, else min(n_ctx_train, 4096). */
  int32_t kv_tokens;
  /* KV pool size as a memory budget in bytes (used when kv_tokens is 0). */
  uint64_t kv_bytes;
  int32_t block_size;            /* tokens per KV block; default 16 */
  brisk_kv_type kv_type;         /* default BRISK_KV_F16 */
  int32_t max_batch_tokens;      /* largest batch brisk_decode takes; default 512 */
  int32_t n_seq_max;             /* sequence ids are 0 .. n_seq_max-1; default 64 */
  brisk_abort_fn abort_callback; /* NULL: never abort */
  void *abort_user_data;
  /* Nonzero (default): keep full KV blocks after their sequence lets go of
   * them, for brisk_seq_match_prefix; they are evicted, least recently
   * released first, when new tokens need the room. 0: blocks are freed when
   * released and brisk_seq_match_prefix never reuses anything. */
  int32_t prefix_cache;
  /* The most host memory (bytes) the context may hold: the KV pool, buffers
   * and everything its calls allocate; 0 (default): no limit but the
   * process-wide one. A call that would pass it fails with
   * BRISK_E_OUT_OF_MEMORY and leaves the context as it was. */
  uint64_t memory_limit;
  /* The prefix cache's host tier, in bytes of host memory; 0 (default):
   * off. A full block the prefix cache keeps is, when new tokens evict it
   * from the KV pool, first copied to host memory (brisk's allocator, so
   * within memory_limit), and brisk_seq_match_prefix moves it back into
   * the pool when a prefix needs it, instead of it being recomputed (the
   * logits are bitwise the same). The tier keeps one copy per block of a
   * prefix, however many sequences computed it, none of those the pool
   * holds, and drops the least recently used to stay within this budget,
   * which counts the copies and the tier's index
   * (brisk_kv_stats.host_tier_bytes). A copy that cannot be made (no
   * memory, a device error) just drops that block: no call fails because
   * of the tier. Ignored with prefix_cache 0; a tensor- or
   * pipeline-parallel model refuses it (BRISK_E_UNSUPPORTED). */
  uint64_t prefix_host_bytes;
} brisk_context_params;

/* Fills *params with defaults (including struct_size). NULL is ignored. */
BRISK_API void brisk_context_params_init(brisk_context_params *params);

/*
 * Creates a context for `model` (which must outlive it). `params` may be
 * NULL for defaults. BRISK_E_INVALID_ARGUMENT for bad sizes (named in the
 * message), BRISK_E_OUT_OF_MEMORY if the KV pool or buffers cannot be
 * allocated. On failure *out is untouched and nothing is leaked.
 */
BRISK_API brisk_status brisk_context_create(const brisk_model *model,
                                            const brisk_context_params *params,
                                            brisk_context **out);

/* Frees the context, its KV cache and threads. NULL is a no-op. */
BRISK_API void brisk_context_free(brisk_context *ctx);

/* The model the context runs; NULL for NULL. */
BRISK_API const brisk_model *brisk_context_model(const brisk_context *ctx);

/* KV cache occupancy, for monitoring and admission decisions. */
typedef struct brisk_kv_stats {
  uint32_t struct_size; /* set by the caller: sizeof(brisk_kv_stats) */
  int32_t block_size;   /* tokens per block */
  int32_t n_blocks;     /* blocks in the pool */
  /* Blocks available to new tokens: those no sequence holds, including the
   * prefix cache's (n_cached_blocks), which are evicted on demand. */
  int32_t n_free_blocks;
  uint64_t bytes_per_block; /* all layers, K and V */
  uint64_t kv_bytes;        /* the whole pool */
  uint64_t other_bytes;     /* activation buffers and workspace */
  /* Of n_free_blocks, those the prefix cache keeps for reuse (full blocks
   * no sequence holds). Filled only when struct_size covers it. */
  int32_t n_cached_blocks;
  /* bytes_per_block / block_size: K and V of one token over all layers,
   * which is what the cache type changes. Filled only when struct_size
   * covers it. */
  uint64_t bytes_per_token;
  /* The prefix cache's host tier (brisk_context_params.prefix_host_bytes;
   * all 0 when it is off): host bytes it holds (block copies and index),
   * of those the index (entries' hashes, links and token ids, and its hash
   * table), blocks it holds; since creation, blocks brought back into the
   * pool by brisk_seq_match_prefix, lookups of a block neither the pool nor
   * the tier had (at most one per match), and blocks it dropped to stay
   * within its budget. Filled only when struct_size covers them. */
  uint64_t host_tier_bytes;
  uint64_t host_tier_index_bytes;
  uint64_t n_host_tier_blocks;
  uint64_t n_host_tier_hits;
  uint64_t n_host_tier_misses;
  uint64_t n_host_tier_evictions;
} brisk_kv_stats;

/* Fills *stats (whose struct_size the caller sets; a struct_size from an
 * older header without the later fields is accepted and only its fields are
 * written). BRISK_E_INVALID_ARGUMENT for NULL arguments or a bad size. */
BRISK_API brisk_status brisk_context_kv_stats(const brisk_context *ctx, brisk_kv_stats *stats);

/*
 * A batch of tokens for brisk_decode: each entry is (token, position,
 * sequence id, whether to compute its logits). Created with a capacity;
 * reused across steps with brisk_batch_clear. Owned by the caller.
 */
typedef struct brisk_batch brisk_batch;

/* capacity >= 1. BRISK_E_INVALID_ARGUMENT, BRISK_E_OUT_OF_MEMORY. */
BRISK_API brisk_status brisk_batch_create(int32_t capacity, brisk_batch **out);
/* NULL is a no-op. */
BRISK_API void brisk_batch_free(brisk_batch *batch);
/* Empties the batch, keeping its capacity. */
BRISK_API void brisk_batch_clear(brisk_batch *batch);
/* Entries in the batch; 0 for NULL. */
BRISK_API int32_t brisk_batch_size(const brisk_batch *batch);

/*
 * Appends one token. Values are checked by brisk_decode, not here, except
 * capacity: BRISK_E_BUFFER_TOO_SMALL when the batch is full.
 */
BRISK_API brisk_status brisk_batch_add(brisk_batch *batch, int32_t token, int32_t pos,
                                       int32_t seq_id, int want_logits);

/*
 * Runs the model on a batch: any mix of sequences, each continuing where it
 * stands (a sequence of length L takes positions L, L+1, ... in batch
 * order), so prompt chunks and single decode tokens can share one batch.
 * Writes every token's K/V into the cache and computes logits for the
 * entries that asked. Errors leave the context exactly as before the call:
 *   BRISK_E_INVALID_ARGUMENT  empty or oversized batch, token id outside
 *                             [0, n_vocab), sequence id outside
 *                             [0, n_seq_max), a position that does not
 *                             continue its sequence (the message names the
 *                             entry)
 *   BRISK_E_KV_FULL           the KV pool has too few free blocks
 *   BRISK_E_CANCELLED         the abort callback stopped it
 * Logits of a sequence do not depend on which other sequences share the
 * batch, nor on the thread count: the result is bitwise the same as
 * decoding it alone. (The KV block size does enter: attention sums keys
 * block by block, so contexts with different block sizes agree only to
 * rounding.)
 */
BRISK_API brisk_status brisk_decode(brisk_context *ctx, const brisk_batch *batch);

/*
 * The logits (n_vocab floats) of entry i of the last successful
 * brisk_decode, or NULL if that entry did not ask for logits, i is out of
 * range, or no decode succeeded yet. Valid until the next brisk_decode or
 * brisk_context_free.
 */
BRISK_API const float *brisk_get_logits(const brisk_context *ctx, int32_t i);

/* Tokens held by sequence seq_id (0 for an empty or invalid id): the
 * position its next token takes. (A sequence with a window,
 * brisk_seq_set_window, holds fewer.) */
BRISK_API int32_t brisk_seq_len(const brisk_context *ctx, int32_t seq_id);

/*
 * Keeps positions [0, len) of the sequence and releases the rest (len may
 * equal the current length). BRISK_E_INVALID_ARGUMENT for a bad id or a len
 * outside [0, current length].
 */
BRISK_API brisk_status brisk_seq_truncate(brisk_context *ctx, int32_t seq_id, int32_t len);

/* Releases the whole sequence (its id becomes empty). */
BRISK_API brisk_status brisk_seq_free(brisk_context *ctx, int32_t seq_id);

/*
 * Makes sequence dst (which must be empty) a copy of src in O(blocks): the
 * KV blocks are shared and copied only when one of the two writes into a
 * shared, partly filled block. Writing to either never changes the other.
 */
BRISK_API brisk_status brisk_seq_fork(brisk_context *ctx, int32_t src_seq_id, int32_t dst_seq_id);

/*
 * Prefix cache: makes empty sequence seq_id start with the longest prefix of
 * tokens[0 .. n) whose K/V this context still has, without computing it.
 * The cache works in whole KV blocks: once brisk_decode fills a block (its
 * block_size positions), the block is known by the tokens it holds and all
 * tokens before it, and is kept when its sequences truncate or free it,
 * until new tokens need the room (least recently released first; those
 * count as free in brisk_kv_stats). At most n - 1 tokens are reused, so the
 * caller always has a token left to decode for logits: *reused (a multiple
 * of block_size, possibly 0) tokens are attached, and the caller continues
 * with brisk_decode of tokens[*reused ..] from position *reused. Its logits
 * are then bitwise those of decoding all n tokens in this context. Attached
 * blocks are shared (with other sequences and the cache) and never written:
 * a later write into one, after brisk_seq_truncate, copies it first. With
 * a host tier (params.prefix_host_bytes), blocks the pool evicted but the
 * tier kept are moved back into free or cached blocks of the pool (O(their
 * bytes)) and shared from then on; if the pool has no block left for one,
 * the match ends there. With params.prefix_cache 0, *reused is always 0.
 * BRISK_E_INVALID_ARGUMENT: NULL ctx or reused, n < 0, NULL tokens with
 * n > 0, a token outside [0, n_vocab), a bad sequence id, or a sequence
 * that is not empty. BRISK_E_OUT_OF_MEMORY. On error the sequence stays
 * empty and *reused is 0 (when reused is set). O(n) time.
 */
BRISK_API brisk_status brisk_seq_match_prefix(brisk_context *ctx, int32_t seq_id,
                                              const int32_t *tokens, int32_t n, int32_t *reused);

/* ------------------------------------------------------------------------ */
/* Sampling                                                                 */
/* ------------------------------------------------------------------------ */

/*
 * A sampler picks the next token from one row of logits. It applies, in this
 * order:
 *   1. logit bias: logit[token] += bias for each listed pair;
 *   2. penalties over the last penalty_last_n accepted tokens, for each
 *      distinct token there with count c: a positive logit is divided by
 *      repeat_penalty and a negative one multiplied by it, then
 *      c * frequency_penalty and (c > 0) * presence_penalty are subtracted;
 *   3. temperature: 0 picks the largest logit (ties go to the lowest id),
 *      ignores steps 4-7 and draws no random number; otherwise
 *      p is proportional to exp(logit / temperature);
 *   4. top-k: keeps the k most likely tokens (ties by lower id);
 *   5. top-p (nucleus): keeps the smallest set of most likely tokens whose
 *      probability sums to at least top_p (at least one token);
 *   6. min-p: keeps the tokens with p >= min_p * (largest p);
 *   7. typical-p: locally typical sampling (Meister et al. 2022, as in
 *      Hugging Face's TypicalLogitsWarper): orders tokens by
 *      |-log p - entropy| and keeps the smallest prefix with mass >= typical_p;
 *   8. a draw from what is left, renormalized.
 * Steps 5-7 see the distribution left by the steps before, renormalized.
 * The draw uses brisk's own generator (xoshiro256** seeded through
 * splitmix64), one 64-bit number per non-greedy sample: the same seed,
 * parameters, logits and accepted tokens give the same tokens on every
 * platform (up to the last bit of exp() in the platform's C library).
 *
 * A sampler belongs to one generation: it holds the penalty window and the
 * random state. Calls on one sampler must not run concurrently; distinct
 * samplers are independent.
 */
typedef struct brisk_sampler brisk_sampler;

/* One logit-bias entry: `bias` is added to the logit of `token`. */
typedef struct brisk_logit_bias {
  int32_t token;
  float bias; /* finite, or -INFINITY to forbid the token */
} brisk_logit_bias;

typedef struct brisk_sampler_params {
  uint32_t struct_size; /* sizeof(brisk_sampler_params) */
  uint64_t seed;        /* any value; default 0 */
  /* Every field below is checked by brisk_sampler_create; a value outside
   * its range is rejected, never clamped. The defaults turn every step off
   * but the draw: tokens come from the model's own distribution. */
  float temperature;       /* >= 0; 0 = greedy; default 1 */
  int32_t top_k;           /* >= 0; 0 (or >= n_vocab) = off; default 0 */
  float top_p;             /* (0, 1]; 1 = off; default 1 */
  float min_p;             /* [0, 1]; 0 = off; default 0 */
  float typical_p;         /* (0, 1]; 1 = off; default 1 */
  int32_t penalty_last_n;  /* >= 0 accepted tokens in the window; default 64 */
  float repeat_penalty;    /* > 0, finite; 1 = off; default 1 */
  float frequency_penalty; /* finite; 0 = off; default 0 */
  float presence_penalty;  /* finite; 0 = off; default 0 */
  /* Logit bias: n_logit_bias pairs (tokens in [0, n_vocab); a token listed
   * twice gets both biases), copied by brisk_sampler_create. */
  size_t n_logit_bias;
  const brisk_logit_bias *logit_bias; /* may be NULL when n_logit_bias is 0 */
  /* Top log-probabilities to report per sample, [0, n_vocab]; 0 = off
   * (saves a pass over the vocabulary). See brisk_sampler_last_logprobs. */
  int32_t n_logprobs;
} brisk_sampler_params;

/* Fills *params with defaults (including struct_size). NULL is ignored. */
BRISK_API void brisk_sampler_params_init(brisk_sampler_params *params);

/*
 * Creates a sampler for the vocabulary of `model` (which must outlive it).
 * `params` may be NULL for defaults. BRISK_E_INVALID_ARGUMENT for a NULL
 * model or out, a model without logits (n_vocab 0), a bad struct_size, or a
 * field out of range (the message names the field and its value),
 * BRISK_E_OUT_OF_MEMORY. On failure *out is untouched.
 */
BRISK_API brisk_status brisk_sampler_create(const brisk_model *model,
                                            const brisk_sampler_params *params,
                                            brisk_sampler **out);

/* Frees the sampler. NULL is a no-op. */
BRISK_API void brisk_sampler_free(brisk_sampler *sampler);

/*
 * Samples a token from brisk_get_logits(ctx, i) into *token. `ctx` must run
 * the sampler's model (the sampler reads n_vocab logits). Sampling does not
 * accept the token: call brisk_sampler_accept with the token actually used,
 * so that the penalties see it. BRISK_E_INVALID_ARGUMENT for a NULL
 * argument, an entry i without logits, a NaN or +inf logit, or when bias and
 * penalties leave no token with a finite logit. On error *token, the random
 * state and the last log-probabilities are unchanged.
 */
BRISK_API brisk_status brisk_sampler_sample(brisk_sampler *sampler, const brisk_context *ctx,
                                            int32_t i, int32_t *token);

/*
 * The same from a caller's row of logits (e.g. computed elsewhere, or over
 * FFI). `logits` is read only during the call and not modified; n_vocab
 * must equal the sampler's vocabulary size (BRISK_E_INVALID_ARGUMENT
 * otherwise). Logits may be -INFINITY (never sampled).
 */
BRISK_API brisk_status brisk_sampler_sample_logits(brisk_sampler *sampler, const float *logits,
                                                   int32_t n_vocab, int32_t *token);

/*
 * Appends a token to the penalty window (dropping the oldest once it holds
 * penalty_last_n). Typically the sampled token, and also the prompt tokens
 * if they should be penalized. BRISK_E_INVALID_ARGUMENT for a NULL sampler
 * or a token outside [0, n_vocab).
 */
BRISK_API brisk_status brisk_sampler_accept(brisk_sampler *sampler, int32_t token);

/*
 * Starts over: empties the penalty window, reseeds the generator with the
 * params' seed and forgets the last log-probabilities. NULL is a no-op.
 */
BRISK_API void brisk_sampler_reset(brisk_sampler *sampler);

/*
 * Log-probabilities of the last successful sample: entry 0 is the sampled
 * token, entries 1..n_logprobs the most likely tokens in decreasing order
 * (ties by lower id; the sampled token may appear again there). They are the
 * log-softmax of the logits after bias and penalties, at temperature 1 and
 * before any truncation: the model's view, independent of how the token was
 * picked (-INFINITY for forbidden tokens). Writes min(n, capacity) pairs
 * (n = n_logprobs + 1) and sets *n to n; BRISK_E_BUFFER_TOO_SMALL when
 * capacity < n. BRISK_E_INVALID_STATE if n_logprobs is 0 or nothing was
 * sampled since create or reset; BRISK_E_INVALID_ARGUMENT for a NULL sampler
 * or n, or NULL arrays with capacity > 0.
 */
BRISK_API brisk_status brisk_sampler_last_logprobs(const brisk_sampler *sampler, int32_t *tokens,
                                                   float *logprobs, size_t capacity, size_t *n);

/*
 * Stop conditions for one generation, and its text: feed every generated
 * token to brisk_stopper_push; it returns the text to show (complete UTF-8
 * only) and whether generation must stop. Stop strings are matched across
 * token boundaries and never shown: text that could be the start of a stop
 * string is held back until it is known not to be one. Not thread-safe;
 * must not outlive the model.
 */
typedef struct brisk_stopper brisk_stopper;

typedef enum brisk_stop_reason {
  BRISK_STOP_NONE = 0,      /* keep going */
  BRISK_STOP_EOG = 1,       /* an end-of-generation token (EOS, EOT, ...) */
  BRISK_STOP_TOKEN = 2,     /* one of the extra stop tokens */
  BRISK_STOP_STRING = 3,    /* the text reached a stop string */
  BRISK_STOP_MAX_TOKENS = 4 /* max_tokens tokens were pushed */
} brisk_stop_reason;

typedef struct brisk_stopper_params {
  uint32_t struct_size;       /* sizeof(brisk_stopper_params) */
  int32_t max_tokens;         /* > 0; 0 = no limit (default) */
  int stop_at_eog;            /* nonzero (default): stop at EOG tokens */
  const int32_t *stop_tokens; /* n_stop_tokens ids in [0, n_vocab), copied */
  size_t n_stop_tokens;
  const char *const *stop_strings; /* n_stop_strings non-empty strings, copied */
  size_t n_stop_strings;
  uint32_t detokenize_flags; /* BRISK_DETOKENIZE_RENDER_SPECIAL / _REPLACE_INVALID */
} brisk_stopper_params;

/* Fills *params with defaults (including struct_size). NULL is ignored. */
BRISK_API void brisk_stopper_params_init(brisk_stopper_params *params);

/* BRISK_E_INVALID_ARGUMENT for a bad field (named), BRISK_E_UNSUPPORTED for
 * a model without vocabulary, BRISK_E_OUT_OF_MEMORY. */
BRISK_API brisk_status brisk_stopper_create(const brisk_model *model,
                                            const brisk_stopper_params *params,
                                            brisk_stopper **out);
BRISK_API void brisk_stopper_free(brisk_stopper *stopper); /* NULL is a no-op */

/*
 * Feeds the next generated token. *text / *len receive the text that can be
 * shown now (valid until the next call on this stopper; possibly empty);
 * *reason says whether to stop. A token that ends generation (EOG, stop
 * token) contributes no text; on BRISK_STOP_STRING the text before the stop
 * string is released and the rest dropped; on BRISK_STOP_MAX_TOKENS the last
 * token's text and anything held back is released. After a stop, further
 * pushes return BRISK_E_INVALID_STATE until brisk_stopper_reset.
 */
BRISK_API brisk_status brisk_stopper_push(brisk_stopper *stopper, int32_t token, const char **text,
                                          size_t *len, brisk_stop_reason *reason);

/* Releases text held back (at the end of a generation that did not stop on
 * a stop string) into *text / *len. */
BRISK_API brisk_status brisk_stopper_flush(brisk_stopper *stopper, const char **text, size_t *len);

/* Starts a new generation with the same conditions. */
BRISK_API void brisk_stopper_reset(brisk_stopper *stopper);

/* ------------------------------------------------------------------------ */
/* Speculative decoding                                                     */
/* ------------------------------------------------------------------------ */

/*
 * Speculative decoding makes one sequence's generation faster without
 * changing what it generates. Each round, a drafter proposes up to k next
 * tokens cheaply; the target model scores the sequence's pending token and
 * the k drafted ones in ONE brisk_decode chunk (k + 1 tokens); the target's
 * sampler then keeps the longest prefix of the draft it agrees with and
 * adds one token of its own, so a round produces 1 .. k + 1 tokens for the
 * price of one target pass (plus the drafting).
 *
 * Drafters:
 *   BRISK_SPEC_PROMPT_LOOKUP  the last n tokens of the sequence (n from
 *       ngram_max down to ngram_min) are looked up in the sequence itself
 *       (prompt and output so far); the tokens that followed their most
 *       recent earlier occurrence are the draft. Costs no model; pays off
 *       when the output copies from the prompt (editing, quoting, code).
 *   BRISK_SPEC_DRAFT_MODEL    a second, smaller or more coarsely quantized
 *       model with the same vocabulary runs in its own context (created
 *       and owned by the brisk_spec), fed the same tokens, and drafts k
 *       tokens one by one from its own sampler distribution q: the target
 *       sampler's temperature / top-k / top-p / min-p / typical-p / logit
 *       bias without penalties (greedy when the target sampler is greedy).
 *
 * Exactness: drafted token x_i is accepted with probability
 * min(1, p(x_i) / q(x_i)), where p is the target sampler's final
 * distribution at that position (after bias, penalties and truncation, with
 * the tokens before it accepted) and q the drafter's (a point mass for
 * prompt lookup); at the first rejection the round's last token is drawn
 * from normalize(max(0, p - q)), and if all k are accepted a bonus token is
 * drawn from p. Each produced token is therefore distributed exactly as
 * the target sampler would have produced it token by token. At temperature
 * 0 this is "accept while the target's argmax agrees", and the output is
 * token-for-token the non-speculative greedy output. For prompt lookup
 * the round goes further: it draws every token with the sampler's own draw
 * (one random number per non-greedy token, as brisk_sampler_sample does),
 * so the output equals non-speculative sampling with the same seed.
 * (For a draft model the random numbers are used differently, so a seed
 * gives a different, equally distributed, output.)
 *
 * A brisk_spec belongs to one target context and must not be used
 * concurrently with any other call on that context; it must not outlive
 * the target context or the draft model. Distinct brisk_spec objects on
 * distinct contexts are independent.
 */
typedef struct brisk_spec brisk_spec;

typedef enum brisk_spec_drafter {
  BRISK_SPEC_PROMPT_LOOKUP = 0,
  BRISK_SPEC_DRAFT_MODEL = 1
} brisk_spec_drafter;

typedef struct brisk_spec_params {
  uint32_t struct_size;       /* sizeof(brisk_spec_params) */
  brisk_spec_drafter drafter; /* default BRISK_SPEC_PROMPT_LOOKUP */
  /* k, the most tokens drafted per round: [1, 64]; default 8. A round also
   * drafts fewer when the output buffer or the target context's
   * max_batch_tokens leaves less room. */
  int32_t n_draft;
  /* Nonzero: each sequence's k adapts within [n_draft_min, n_draft]: +1
   * after a round that accepted every drafted token, and down to the
   * accepted count + 1 after a rejection. Default 0 (k fixed). */
  int adaptive;
  int32_t n_draft_min; /* [1, n_draft]; default 1 */
  /* Prompt lookup: n-gram sizes tried from ngram_max down to ngram_min,
   * 1 <= ngram_min <= ngram_max <= 16; defaults 2 and 3 (a single-token
   * match drafts too often in text that does not copy). */
  int32_t ngram_min;
  int32_t ngram_max;
  /* Draft model (BRISK_SPEC_DRAFT_MODEL): must have the target's
   * vocabulary (same size, and every token the same text) and outlive the
   * brisk_spec. Ignored for prompt lookup. */
  const brisk_model *draft_model;
  /* Parameters of the draft context; NULL (default): the target context's
   * (n_seq_max must be at least the target's, so sequence ids map 1:1). */
  const brisk_context_params *draft_context_params;
} brisk_spec_params;

/* Fills *params with defaults (including struct_size). NULL is ignored. */
BRISK_API void brisk_spec_params_init(brisk_spec_params *params);

/*
 * Creates a speculative decoder for sequences of `target` (which must
 * outlive it). `params` may be NULL for defaults (prompt lookup).
 *   BRISK_E_INVALID_ARGUMENT  target or out NULL, a bad struct_size or a
 *                             field out of range (named), no draft_model
 *                             for BRISK_SPEC_DRAFT_MODEL, or a draft model
 *                             whose vocabulary differs from the target's
 *                             (the message names the sizes, or the first
 *                             differing token id and both texts)
 *   BRISK_E_OUT_OF_MEMORY     and the draft context's own errors
 * On failure *out is untouched and nothing is leaked.
 */
BRISK_API brisk_status brisk_spec_create(brisk_context *target, const brisk_spec_params *params,
                                         brisk_spec **out);

/* Frees the decoder and its draft context. NULL is a no-op. */
BRISK_API void brisk_spec_free(brisk_spec *spec);

/*
 * Runs one speculative round for sequence seq_id of the target context.
 * tokens[0, n_tokens) is the whole sequence so far (prompt and output):
 * the target context must hold the first n_tokens - 1 of them
 * (brisk_seq_len == n_tokens - 1) and the last is the pending token, not
 * decoded yet (typically the token just sampled). The round writes the
 * 1 .. k + 1 tokens it produces to out[0, *n_out), leaves the target
 * sequence holding tokens plus all produced tokens but the last (which is
 * the next round's pending token: append out to tokens and call again),
 * and accepts each produced token into `sampler` (brisk_sampler_accept:
 * do not accept them again). KV written for rejected draft tokens is
 * released (brisk_seq_truncate), in the target and the draft context. A
 * round never produces more than `capacity` tokens: pass the tokens still
 * wanted to stop exactly at a length. The produced tokens may include an
 * end-of-generation token followed by more: stop at the first one.
 *   BRISK_E_INVALID_ARGUMENT  a NULL pointer, n_tokens 0, capacity 0,
 *                             seq_id outside the context's range, a
 *                             target sequence length other than
 *                             n_tokens - 1, a sampler for another
 *                             vocabulary size, a token outside the
 *                             vocabulary, or logits the sampler rejects
 *   BRISK_E_KV_FULL           not even the pending token fits in the pool
 *   BRISK_E_CANCELLED, BRISK_E_OUT_OF_MEMORY
 * When the draft does not fit in the KV pool the round falls back to
 * drafting nothing (one ordinary decode step). On error the target
 * sequence, the sampler (window and random state) and *n_out are as before
 * the call. `sampler` is the sequence's own, used as brisk_sampler_sample
 * uses it; the draft model's sampler is internal. A round does not record
 * log-probabilities for each token it produces: after it,
 * brisk_sampler_last_logprobs describes some token of the round, not
 * necessarily the last (use plain decoding where every token's
 * log-probabilities are needed).
 */
BRISK_API brisk_status brisk_spec_round(brisk_spec *spec, int32_t seq_id, brisk_sampler *sampler,
                                        const int32_t *tokens, size_t n_tokens, int32_t *out,
                                        size_t capacity, size_t *n_out);

/*
 * Optional: hands the drafter the tokens the target sequence holds
 * (tokens[0, n_tokens), e.g. the prompt but its last token, right after
 * decoding them), so that a draft model processes them now rather than in
 * the first round: prompt processing can then be scheduled or timed apart
 * from generation. Does nothing for prompt lookup. A later round keeps
 * what was fed as far as its tokens agree.
 *   BRISK_E_INVALID_ARGUMENT  NULL spec, tokens NULL with n_tokens > 0,
 *                             a bad seq_id or a token outside the vocabulary
 *   BRISK_E_KV_FULL           the draft context has no room (nothing kept:
 *                             rounds then draft from scratch)
 *   BRISK_E_CANCELLED, BRISK_E_OUT_OF_MEMORY
 */
BRISK_API brisk_status brisk_spec_prefill(brisk_spec *spec, int32_t seq_id, const int32_t *tokens,
                                          size_t n_tokens);

/*
 * Forgets what the drafter holds for seq_id (the draft context's KV and
 * the adaptive k). Optional: a round notices by itself when a sequence's
 * tokens no longer continue what the draft context holds, and re-feeds
 * them; call this to release the draft's memory when a sequence ends.
 * BRISK_E_INVALID_ARGUMENT for a NULL spec or a bad seq_id.
 */
BRISK_API brisk_status brisk_spec_seq_reset(brisk_spec *spec, int32_t seq_id);

/* Counters since brisk_spec_create, over all sequences. */
typedef struct brisk_spec_stats {
  uint32_t struct_size;     /* set by the caller: sizeof(brisk_spec_stats) */
  uint64_t n_rounds;        /* brisk_spec_round calls that succeeded */
  uint64_t n_drafted;       /* draft tokens scored by the target */
  uint64_t n_accepted;      /* draft tokens accepted */
  uint64_t n_produced;      /* tokens written to out (accepted + one per round) */
  uint64_t n_draft_decodes; /* brisk_decode calls on the draft context */
} brisk_spec_stats;

/* Fills *stats (whose struct_size the caller sets). BRISK_E_INVALID_ARGUMENT
 * for NULL pointers or a bad struct_size. */
BRISK_API brisk_status brisk_spec_get_stats(const brisk_spec *spec, brisk_spec_stats *stats);

/* ------------------------------------------------------------------------ */
/* Engine: continuous batching, ticked by the host                          */
/* ------------------------------------------------------------------------ */

/*
 * An engine serves many generation requests on one model with one paged KV
 * pool. The host submits requests, calls brisk_engine_step() from its own
 * loop (each call is one bounded scheduler iteration: one forward pass over
 * a batch that mixes every running request's next token with chunks of
 * admitted prompts) and reads the produced tokens with brisk_engine_poll().
 * The engine starts no thread beyond its context's thread pool.
 *
 * Scheduling: waiting requests are admitted in order of priority (higher
 * first), then submission (first come, first served), while sequence slots
 * and free KV blocks allow, keeping reserve_blocks blocks of growth free for
 * each running request. When the pool runs out during generation the
 * lowest-ranked running request (lowest priority, then newest) is preempted:
 * its KV is freed and it goes back to the waiting queue, to be recomputed
 * from its prompt plus the tokens it already produced, or, with
 * BRISK_PREEMPT_SWAP, its KV is first copied to host memory and restored
 * when it is admitted again. A request is never failed for lack of KV; its
 * output is the same as without preemption.
 *
 * Output: a request's tokens are token-for-token those of a brisk_decode
 * loop that prefills its prompt, then samples and decodes one token at a
 * time with a sampler made from the same params (logits of a sequence do not
 * depend on its batch). With n completions, that loop forks the prefilled
 * sequence n - 1 times (brisk_seq_fork) and completion i samples with seed
 * + i from the same prompt logits. Each completion is scheduled, and
 * preempted and recomputed, on its own; a completion that finds no free
 * sequence when the prompt is done prefills the prompt itself later (the
 * same tokens, without sharing).
 *
 * Thread safety: brisk_engine_submit and brisk_engine_cancel may be called
 * from any threads, concurrently with each other and with one thread running
 * the other engine calls. All other calls on an engine (step, poll, stats,
 * request_stats, get_metrics, reset_metrics, free) must not run
 * concurrently with each other.
 */
typedef struct brisk_engine brisk_engine;

/* What preemption does with the victim's KV. */
typedef enum brisk_preempt_mode {
  /* Free it; on re-admission the prompt and the tokens generated so far are
   * fed again (costs compute, needs no memory). */
  BRISK_PREEMPT_RECOMPUTE = 0,
  /* Copy it to host memory (brisk's allocator, within swap_bytes), free the
   * blocks, and copy it back into new blocks on re-admission: the request
   * continues where it stopped. When the host tier is full or a copy fails
   * the request falls back to recompute; it never fails. */
  BRISK_PREEMPT_SWAP = 1
} brisk_preempt_mode;

typedef struct brisk_engine_params {
  uint32_t struct_size; /* sizeof(brisk_engine_params) */
  /* Threads of the engine's context; 0 = one per processor. */
  int32_t n_threads;
  /* KV pool as in brisk_context_params: tokens (0: from kv_bytes, else
   * min(n_ctx_train, 4096)), a byte budget, tokens per block, element type. */
  int32_t kv_tokens;
  uint64_t kv_bytes;
  int32_t block_size;    /* default 16 */
  brisk_kv_type kv_type; /* default BRISK_KV_F16 */
  /* Token budget of one step (the largest batch); default 512. */
  int32_t max_batch_tokens;
  /* Requests generating at once (KV sequences); default 64. */
  int32_t max_running;
  /* Most prompt tokens one request prefills in one step; 0 (default) = up
   * to the step's budget. Smaller chunks bound each step's duration. */
  int32_t prefill_chunk;
  /* Service-level objective for goodput in brisk_engine_metrics: a request
   * meets it when its TTFT and its TPOT are at most these (milliseconds,
   * >= 0, finite); 0 (default) = no bound on that one. */
  double slo_ttft_ms;
  double slo_tpot_ms;
  /* The machine's memory bandwidth (GB/s, 1e9 bytes) and peak arithmetic
   * rate (GFLOP/s) for MBU and MFU in brisk_engine_metrics (e.g. measured
   * by `brisk bench`); 0 (default) = unknown, and that ratio reads 0. */
  double mem_bandwidth_gbs;
  double peak_gflops;
  /* Preemption: BRISK_PREEMPT_RECOMPUTE (default) or BRISK_PREEMPT_SWAP. */
  brisk_preempt_mode preempt_mode;
  /* Host memory for swapped-out KV, in bytes (swap mode only): a victim
   * whose copy would exceed it is recomputed instead. 0 (default) = the KV
   * pool's size; UINT64_MAX = no limit. */
  uint64_t swap_bytes;
  /* Target wall time of one step in microseconds; 0 (default) = none, only
   * max_batch_tokens bounds a step. The engine fits each step's time as
   * fixed + per-token costs (tokens that produce logits, other prompt
   * tokens, attended keys) from the steps it has run, and fills a step
   * only with what the fit predicts to fit: running requests' next tokens
   * first (by rank), then prompt chunks. A step always takes at least one
   * token, so the budget cannot stall the engine; the first few steps,
   * before the fit has data, take at most 16 tokens. For hosts that step
   * once per frame, e.g. 16000 for 60 frames a second. */
  int64_t step_time_budget_us;
  /* Nonzero (default): the context's prefix cache (see
   * brisk_seq_match_prefix). A request admitted (or re-admitted after
   * preemption) reuses the longest cached prefix of its tokens and computes
   * only the rest; outputs are the same as without the cache. */
  int32_t prefix_cache;
  /* Admission keeps this many KV blocks of future growth free for each
   * running request (capped at what its max_tokens can still use), on top
   * of the blocks its tokens need now; default 1, 0 = count only present
   * tokens. Larger values preempt (and recompute) less when the pool is
   * oversubscribed but run fewer requests at once; a value covering
   * max_tokens never preempts. */
  int32_t reserve_blocks;
  /* A draft model for speculative decoding (brisk_request_params.
   * spec_draft_model); NULL (default) = none. It must outlive the engine
   * and speak the target's vocabulary (checked here: a mismatch is
   * BRISK_E_INVALID_ARGUMENT naming the first differing token). The engine
   * gives it its own context with the target context's parameters (the same
   * KV pool size, max_running sequences and batch size), which doubles the
   * KV memory, plus a [64][n_vocab] table of doubles. */
  const brisk_model *draft_model;
  /* The most host memory (bytes) the engine may hold, its context (and a
   * draft model's context) included: 0 (default): no limit but the
   * process-wide one. A submit that would pass it fails with
   * BRISK_E_OUT_OF_MEMORY; so does a step whose batch cannot get memory,
   * with the engine as before the step (step again once there is room),
   * while an allocation for one request's own state that fails finishes
   * that request with BRISK_FINISH_ERROR. */
  uint64_t memory_limit;
  /* The prefix cache's host tier (brisk_context_params.prefix_host_bytes),
   * in bytes; 0 (default): off. Requests whose cached prefixes the pool
   * evicted copy them back from host memory at admission instead of
   * recomputing them (counted as prefix hits); outputs are the same. */
  uint64_t prefix_host_bytes;
} brisk_engine_params;

/* Fills *params with defaults (including struct_size). NULL is ignored. */
BRISK_API void brisk_engine_params_init(brisk_engine_params *params);

/*
 * Creates an engine for `model` (which must outlive it) with its own context
 * (none for an encoder model: its engine serves embedding requests only and
 * takes no draft_model). `params` may be NULL for defaults.
 * BRISK_E_INVALID_ARGUMENT for a NULL model or out, a bad struct_size, a
 * field out of range (named), a draft_model whose vocabulary differs (the
 * first differing token named) or one given with an encoder model,
 * BRISK_E_OUT_OF_MEMORY. On failure *out is untouched.
 */
BRISK_API brisk_status brisk_engine_create(const brisk_model *model,
                                           const brisk_engine_params *params, brisk_engine **out);

/* Frees the engine, its context and every request and event it holds
 * (unfinished requests are dropped). NULL is a no-op. */
BRISK_API void brisk_engine_free(brisk_engine *engine);

typedef struct brisk_request_params {
  uint32_t struct_size; /* sizeof(brisk_request_params) */
  /* The prompt: n_prompt_tokens ids (copied), or, when prompt_tokens is NULL,
   * prompt_text tokenized with BRISK_TOKENIZE_ADD_SPECIAL. At least one
   * token. */
  const int32_t *prompt_tokens;
  size_t n_prompt_tokens;
  const char *prompt_text;
  /* Sampling (copied); NULL: brisk_sampler_params_init's defaults. */
  const brisk_sampler_params *sampler;
  /* Most tokens to generate, >= 1; default 128. The prompt plus max_tokens
   * must fit in the KV pool. */
  int32_t max_tokens;
  /* Nonzero (default): finish after a token for which brisk_token_is_eog. */
  int stop_at_eog;
  /* Higher is admitted first and preempted last; default 0. */
  int32_t priority;
  /* Returned in this request's events, never dereferenced. */
  void *user_data;
  /* Stop strings: n_stop non-empty NUL-terminated strings (copied). The
   * request finishes with BRISK_FINISH_STOP once its text contains one;
   * the text before it is delivered, the stop string and anything after it
   * are not. Text that may still become a stop string is held back until
   * it cannot (it is delivered at the end if the request stops otherwise).
   * Needs a model with a vocabulary (else BRISK_E_UNSUPPORTED). */
  const char *const *stop;
  size_t n_stop;
  /* Log-probabilities: 0 (default) = off; 1..BRISK_MAX_LOGPROBS = each
   * token event carries the sampled token's log-probability and this many
   * most likely alternatives (see brisk_engine_event). */
  int32_t logprobs;
  /* Completions of the same prompt, 1 (default) .. the engine's
   * max_running. The prompt is prefilled once and its KV shared
   * copy-on-write (brisk_seq_fork) by the completions; completion i samples
   * with the sampler params' seed + i (so completion 0 is what n = 1
   * gives). Events carry the completion's index; each completion ends with
   * its own finished event. */
  int32_t n;
  /* Speculative decoding by prompt lookup (see brisk_spec): each decoding
   * step, a completion looks up the last n tokens of its own tokens
   * (prompt and output so far; n from spec_ngram_max down to
   * spec_ngram_min) and schedules the up to spec_n_draft tokens that
   * followed their most recent earlier occurrence after its pending token,
   * as one chunk; it keeps the drafts its sampler agrees with, one by one,
   * plus one token of its own. Tokens, events, stop strings and logprobs
   * are exactly those without speculation (the same seed gives the same
   * output); only the number of steps changes. Drafts are cut to the
   * step's token budget, the KV room the other running requests do not
   * need this step, and the tokens max_tokens still allows.
   * spec_n_draft: 0 (default) = off, else [1, 64]. Callers built before
   * these fields (a smaller struct_size) get it off. */
  int32_t spec_n_draft;
  int32_t spec_ngram_min; /* 1 <= min <= max <= 16; defaults 2 and 3 */
  int32_t spec_ngram_max;
  /* Nonzero: each completion's draft length adapts within [1, spec_n_draft]
   * (as brisk_spec_params.adaptive): +1 after a step that accepted every
   * drafted token, down to the accepted count + 1 after a rejection.
   * Default 0 (always up to spec_n_draft). */
  int spec_adaptive;
  /* Nonzero: draft with the engine's draft_model instead of prompt lookup
   * (needs spec_n_draft >= 1 and an engine with a draft model, else
   * BRISK_E_INVALID_ARGUMENT). Each decoding step, the draft model's copy
   * of the completion (kept in the engine's draft context, re-fed only
   * where it differs) drafts up to spec_n_draft tokens one decode at a
   * time, drawn from its distribution q under a sampler shaped like the
   * request's (temperature, top-k/p, min-p, typical-p, logit bias; no
   * penalties); the target scores them in one chunk and keeps them by the
   * rejection rule (accept x with probability min(1, p(x)/q(x)), at the
   * first rejection draw from normalize(max(0, p - q)), after a full
   * accept a bonus token from p), as brisk_spec_round does. Greedy output
   * is exactly the non-speculative output; sampled output has exactly the
   * target's distribution, but not the same tokens for a seed as without
   * speculation (and drafts draw from one generator shared by the
   * engine's requests). Drafting runs request by request inside
   * brisk_engine_step, k draft decodes each (plus re-feeding a prompt or
   * preempted sequence on its first draft), before the target's batch. A
   * completion's memory grows by spec_n_draft * n_vocab doubles. Default 0. */
  int spec_draft_model;
  /* Experimental: attention sinks + a sliding window (StreamingLLM) for the
   * request's KV sequence, as brisk_seq_set_window(n_sinks, window) on a
   * context: the sequence keeps its first n_sinks tokens (rounded up to
   * whole KV blocks) and at least its last `window`, older blocks going
   * back to the pool as it grows, so a request can generate far past the
   * pool in bounded memory; its logits are those of a context-level
   * sequence with that window fed the same chunks. window 0 (default):
   * off. The engine feeds such a request's prompt in chunks of at most
   * `window` tokens, never attaches a cached prefix to it nor publishes its
   * blocks to the prefix cache, promises it at most its window's blocks at
   * admission, and preempts it by recompute (never swap); a recomputed one
   * continues from a cache rebuilt in chunks, so its output after a
   * preemption may differ from an uninterrupted run's. Refused with
   * BRISK_E_INVALID_ARGUMENT: n_sinks < 0, window < 0, n_sinks > 0 with
   * window 0, sinks (in whole blocks) above max_batch_tokens, n > 1 or
   * spec_n_draft > 0 with a window; BRISK_E_UNSUPPORTED: a tensor- or
   * pipeline-parallel model or one with latent attention. */
  int32_t n_sinks;
  int32_t window;
} brisk_request_params;

/* Most alternatives brisk_request_params.logprobs can ask for. */
#define BRISK_MAX_LOGPROBS 20
/* Most stop strings one request may have, and the longest one in bytes. */
#define BRISK_MAX_STOP_STRINGS 16
#define BRISK_MAX_STOP_BYTES 1024

/* Fills *params with defaults (including struct_size). NULL is ignored. */
BRISK_API void brisk_request_params_init(brisk_request_params *params);

/*
 * Queues a request; *id (nonzero, unique within the engine) names it in
 * events and calls. Tokenizes, checks and copies everything here, so errors
 * come back now: BRISK_E_INVALID_ARGUMENT (NULL engine, params or id, bad
 * struct_size, empty prompt, a token outside [0, n_vocab), max_tokens < 1,
 * prompt + max_tokens larger than the KV pool, bad sampler params, n outside
 * [1, max_running], logprobs outside [0, BRISK_MAX_LOGPROBS], a NULL stop
 * array with n_stop > 0, an empty stop string, more than
 * BRISK_MAX_STOP_STRINGS of them or one longer than BRISK_MAX_STOP_BYTES),
 * BRISK_E_UNSUPPORTED (text or stop strings without a vocabulary, a
 * prompt_text brisk_tokenize refuses, or an engine on an encoder model,
 * which serves only brisk_engine_submit_embed), BRISK_E_OUT_OF_MEMORY.
 * Safe to call from any thread while another steps; the request is seen by
 * the next step that starts after it returns.
 */
BRISK_API brisk_status brisk_engine_submit(brisk_engine *engine, const brisk_request_params *params,
                                           uint64_t *id);

/*
 * Asks to stop request `id`. The next step frees its KV blocks and queues
 * a finished event with BRISK_FINISH_CANCELLED for each of its completions
 * that had not finished yet.
 * Cancelling a finished request is a harmless no-op. BRISK_E_NOT_FOUND if
 * no request ever had this id, BRISK_E_OUT_OF_MEMORY. Safe to call from any
 * thread while another steps.
 */
BRISK_API brisk_status brisk_engine_cancel(brisk_engine *engine, uint64_t id);

/* What one step did. */
typedef struct brisk_engine_step_info {
  uint32_t struct_size;     /* set by the caller: sizeof(brisk_engine_step_info) */
  int32_t n_tokens;         /* tokens in the step's batch (0: nothing to do) */
  int32_t n_decode_tokens;  /* of which entries that produced a new token */
  int32_t n_prefill_tokens; /* the others: prompt (or recomputed) tokens */
  int32_t n_running;        /* requests holding KV after the step */
  int32_t n_waiting;        /* requests waiting for admission after the step */
  int32_t n_finished;       /* requests that finished in this step */
  int32_t n_preempted;      /* requests preempted in this step */
  uint64_t duration_ns;     /* wall time of the step */
  int32_t n_swapped_out;    /* preempted requests whose KV went to host memory */
  int32_t n_swapped_in;     /* admitted requests whose KV came back from it */
  /* The cost model's prediction of this step's batch (see
   * step_time_budget_us), in ns; 0 until it has data, or with no batch. */
  uint64_t predicted_ns;
} brisk_engine_step_info;

/*
 * Runs one scheduler iteration: takes in new submissions and cancellations,
 * admits, builds one batch within max_batch_tokens, runs it, samples,
 * queues events and frees finished requests' blocks. Returns BRISK_OK also
 * when there was nothing to do. `info` may be NULL; otherwise its
 * struct_size must be set. A failing request never stalls the others: when
 * the forward pass fails for any reason but BRISK_E_OUT_OF_MEMORY, the step
 * runs each scheduled request's share alone, and the ones that still fail
 * finish with BRISK_FINISH_ERROR (the cause in brisk_request_stats.error
 * and a BRISK_LOG_WARN line naming the request) while the others go on
 * with exactly the tokens they would have had without them (logits do not
 * depend on the batch). A request whose sampling, text or logprobs fail
 * finishes the same way. BRISK_E_OUT_OF_MEMORY from the forward pass is
 * returned with every request kept as it was, so the step can be retried.
 */
BRISK_API brisk_status brisk_engine_step(brisk_engine *engine, brisk_engine_step_info *info);

typedef enum brisk_finish_reason {
  BRISK_FINISH_NONE = 0,      /* not finished */
  BRISK_FINISH_EOG = 1,       /* generated an end-of-generation token */
  BRISK_FINISH_LENGTH = 2,    /* generated max_tokens tokens */
  BRISK_FINISH_CANCELLED = 3, /* brisk_engine_cancel */
  BRISK_FINISH_ERROR = 4,     /* its forward pass, sampling (e.g. every token
                                 forbidden) or an allocation for its text
                                 failed; brisk_request_stats.error says why */
  BRISK_FINISH_STOP = 5       /* its text reached one of its stop strings */
} brisk_finish_reason;

/* A token and its log-probability. */
typedef struct brisk_token_logprob {
  int32_t token;
  float logprob;
} brisk_token_logprob;

/* One event: a generated token, the end of a completion, or both.
 * The host allocates arrays of it for brisk_engine_poll, so its size is part
 * of the ABI version (it has no struct_size): fields are only added with a
 * new major version. */
typedef struct brisk_engine_event {
  uint64_t id;     /* the request */
  void *user_data; /* its params' user_data */
  int32_t token;   /* the generated token, or -1 (a cancellation or error) */
  /* The text that became complete with this token (control tokens give
   * none): whole UTF-8 characters only, a character split across tokens
   * comes with its last token, and one left incomplete when the request
   * ends is dropped. Text that may be the start of one of the request's
   * stop strings comes with a later event, once it is known not to be (or
   * with the last event). Not NUL-terminated; valid until the next
   * brisk_engine_poll or brisk_engine_free. */
  const char *text;
  size_t text_len;
  int32_t finished;           /* nonzero on the completion's last event */
  brisk_finish_reason reason; /* BRISK_FINISH_NONE unless finished */
  int32_t index;              /* the completion, 0 .. n - 1 (0 when n = 1) */
  /* With the request's logprobs > 0 and token >= 0: the token's
   * log-probability under the model's distribution (log-softmax of its raw
   * logits, before any sampler step), and the n_top_logprobs (= logprobs,
   * at most n_vocab) most likely tokens in decreasing order (ties by lower
   * id). Otherwise 0, NULL and 0. Valid until the next brisk_engine_poll or
   * brisk_engine_free, like text. */
  float logprob;
  const brisk_token_logprob *top_logprobs;
  int32_t n_top_logprobs;
} brisk_engine_event;

/*
 * Moves up to `capacity` of the oldest queued events into events[] and sets
 * *n to how many; the others stay queued for the next call (so *n ==
 * capacity means there may be more). Each completion's events come in
 * order, exactly one of them finished. events may be NULL when capacity is 0.
 * BRISK_E_INVALID_ARGUMENT for a NULL engine or n; BRISK_E_OUT_OF_MEMORY
 * when the buffer for the delivered texts or alternatives cannot grow (*n
 * is not set, every event stays queued and a later call can deliver them,
 * e.g. with a smaller capacity).
 */
BRISK_API brisk_status brisk_engine_poll(brisk_engine *engine, brisk_engine_event *events,
                                         size_t capacity, size_t *n);

/* One request's progress, over all its completions; times in nanoseconds
 * since its submission: queue until completion 0 was admitted, TTFT until
 * the first token of any completion, e2e until the last one finished. */
typedef struct brisk_request_stats {
  uint32_t struct_size; /* set by the caller: sizeof(brisk_request_stats) */
  int32_t n_prompt_tokens;
  int32_t n_generated_tokens; /* summed over completions */
  int32_t n_preemptions;      /* times a completion was preempted (recomputed or swapped) */
  int32_t finished;           /* nonzero once every completion finished */
  brisk_finish_reason reason; /* completion 0's */
  uint64_t queue_ns;          /* until first admitted; 0 before that */
  uint64_t ttft_ns;           /* until its first token; 0 before that */
  uint64_t e2e_ns;            /* until finished; 0 before that */
  /* Time per output token after the first: (e2e - ttft) / (generated - 1),
   * with generated summed over the completions, once finished with at
   * least 2 tokens; 0 otherwise. Callers built before this field (a
   * smaller struct_size) do not get it. */
  uint64_t tpot_ns;
  /* Speculative decoding, summed over completions: tokens drafted
   * (scheduled after a pending token) and of those accepted (kept as
   * output). Callers built before these fields do not get them. */
  uint64_t n_spec_drafted;
  uint64_t n_spec_accepted;
  /* Once a completion finished with BRISK_FINISH_ERROR: why (the message
   * of the failing call, naming the cause), NUL-terminated; "" otherwise.
   * Callers built before this field do not get it. */
  char error[256];
  /* Prompt tokens whose KV the request's first admission took from the
   * prefix cache instead of computing them (a multiple of the block size;
   * 0 with the cache off or before admission): what OpenAI-style usage
   * reports as cached tokens. Callers built before this field do not get
   * it. */
  int32_t n_cached_tokens;
} brisk_request_stats;

/*
 * Fills *stats for request `id`: available from submission until the
 * brisk_engine_poll call after the one that delivered its last finished
 * event.
 * BRISK_E_NOT_FOUND otherwise; BRISK_E_INVALID_ARGUMENT for NULL arguments
 * or a bad struct_size.
 */
BRISK_API brisk_status brisk_engine_request_stats(brisk_engine *engine, uint64_t id,
                                                  brisk_request_stats *stats);

/* Engine-wide counters since creation. */
typedef struct brisk_engine_counters {
  uint32_t struct_size;        /* set by the caller: sizeof(brisk_engine_counters) */
  uint64_t n_submitted;        /* requests accepted by brisk_engine_submit */
  uint64_t n_finished;         /* requests finished (any reason) */
  uint64_t n_cancelled;        /* of which cancelled */
  uint64_t n_prompt_tokens;    /* prompt tokens of the accepted requests */
  uint64_t n_generated_tokens; /* tokens sampled */
  uint64_t n_computed_tokens;  /* tokens run through the model, recomputation included */
  uint64_t n_preemptions;
  uint64_t n_steps;             /* steps that ran a batch */
  int32_t n_running, n_waiting; /* now */
  int32_t n_kv_blocks;          /* blocks in the pool */
  int32_t n_free_kv_blocks;     /* blocks no request holds now (cached ones included) */
  /* Swap preemption (BRISK_PREEMPT_SWAP): KV copies to and from host memory,
   * their bytes, the host memory held now, and preemptions that recomputed
   * because the host tier was full or a copy failed. */
  uint64_t n_swapped_out, n_swapped_in;
  uint64_t swap_out_bytes, swap_in_bytes;
  uint64_t swap_bytes_used;
  uint64_t n_swap_fallbacks;
  /* Prefix cache: tokens of admitted requests looked up in it (prompt, plus
   * generated tokens for a preempted request; 0 with the cache off), and of
   * those the tokens reused instead of computed. Hit rate = hit / lookup. */
  uint64_t n_prefix_lookup_tokens;
  uint64_t n_prefix_hit_tokens;
  /* Speculative decoding (brisk_request_params.spec_n_draft): tokens
   * drafted and of those accepted; acceptance rate = accepted / drafted. */
  uint64_t n_spec_drafted;
  uint64_t n_spec_accepted;
} brisk_engine_counters;

/* Fills *stats. BRISK_E_INVALID_ARGUMENT for NULL arguments or a bad
 * struct_size. */
BRISK_API brisk_status brisk_engine_stats(brisk_engine *engine, brisk_engine_counters *stats);

/* ------------------------------------------------------------------------ */
/* Experimental API: may change in any release                              */
/* ------------------------------------------------------------------------ */
#ifdef BRISK_EXPERIMENTAL

/* Engine serving metrics: the set of latencies, rates and utilizations is
 * still growing with the scheduler, so its struct is not frozen for 1.0. */

/* One latency over the requests completed in the metrics window, in
 * nanoseconds. Percentiles are by nearest rank (the sample of rank
 * ceil(q * count)) from a fixed-size log-linear histogram, within 0.8%
 * relative error; min, max and mean are exact. All 0 when count is 0. */
typedef struct brisk_latency_summary {
  uint64_t count;
  uint64_t p50_ns, p90_ns, p99_ns;
  uint64_t min_ns, max_ns;
  double mean_ns;
} brisk_latency_summary;

/*
 * Serving metrics over a window that starts at the first submission after
 * creation (or after brisk_engine_reset_metrics; a request submitted before
 * the reset and finishing after it counts from the reset) and ends at the
 * last finish, or now while a request is still unfinished. A request is
 * "completed" when it finished by EOG or max_tokens; cancelled and failed
 * ones are only counted in n_aborted. Rates are per second of the window
 * (0 for an empty window).
 */
typedef struct brisk_engine_metrics {
  uint32_t struct_size; /* set by the caller: sizeof(brisk_engine_metrics) */
  uint64_t n_completed;
  uint64_t n_aborted;
  /* Per completed request: queue = submission to first admission, ttft =
   * submission to first token, e2e = submission to finish, tpot = (e2e -
   * ttft) / (generated - 1) over requests with at least 2 tokens. */
  brisk_latency_summary queue, ttft, tpot, e2e;
  double window_s;
  double output_tokens_per_s; /* generated tokens of completed requests */
  double total_tokens_per_s;  /* their prompt plus generated tokens */
  double requests_per_s;      /* completed requests */
  /* Goodput: completed requests meeting the params' SLO (a request with one
   * token has no TPOT and meets that bound); without an SLO, all of them. */
  uint64_t n_good;
  double goodput_requests_per_s;
  double goodput_fraction; /* n_good / n_completed; 0 without completions */
  /* Fraction of KV blocks held by requests: now, and the mean after every
   * step of the window that ran a batch. */
  double kv_utilization;
  double kv_utilization_mean;
  uint64_t n_preemptions; /* in the window */
  /* Steps of the window that ran a batch, and their wall time
   * (scheduling, forward pass and sampling). */
  uint64_t n_busy_steps;
  double busy_s;
  /* The model's work in those steps, computed from its shapes and weight
   * types: weights and KV read plus KV written (activations not counted),
   * and FLOPs of the matrix products and attention (elementwise work not
   * counted). */
  double bytes;
  double flops;
  double achieved_gbs;    /* bytes / busy_s / 1e9; 0 without busy time */
  double achieved_gflops; /* flops / busy_s / 1e9 */
  /* achieved_gbs / mem_bandwidth_gbs and achieved_gflops / peak_gflops of
   * the engine params; 0 when that machine figure is unknown (0). */
  double mbu;
  double mfu;
  /* Prefix cache in the window: tokens looked up at admission, tokens
   * reused instead of computed, and hit / lookup (0 without lookups). */
  uint64_t n_prefix_lookup_tokens;
  uint64_t n_prefix_hit_tokens;
  double prefix_hit_rate;
  /* The prefix cache's host tier (brisk_engine_params.prefix_host_bytes),
   * as in brisk_kv_stats: bytes, index bytes and blocks it holds now; in
   * the window, blocks it gave back to the pool (their tokens are among
   * n_prefix_hit_tokens), lookups it missed and blocks it evicted. */
  uint64_t host_tier_bytes;
  uint64_t host_tier_index_bytes;
  uint64_t n_host_tier_blocks;
  uint64_t n_host_tier_hits;
  uint64_t n_host_tier_misses;
  uint64_t n_host_tier_evictions;
  /* Embedding requests (brisk_engine_submit_embed) in the window that got
   * their vector, their tokens, and their submission-to-vector latency
   * (cancelled and failed ones count in n_aborted). Callers built before
   * these fields do not get them. */
  uint64_t n_embeddings;
  uint64_t n_embed_tokens;
  brisk_latency_summary embed_e2e;
} brisk_engine_metrics;

/*
 * Fills *metrics. BRISK_E_INVALID_ARGUMENT for NULL arguments or a bad
 * struct_size. Must not run concurrently with brisk_engine_step
 * (see the engine's thread safety). Cost: a scan of four fixed-size
 * histograms (about 4k buckets each).
 */
BRISK_API brisk_status brisk_engine_get_metrics(brisk_engine *engine,
                                                brisk_engine_metrics *metrics);

/* Empties the metrics window (e.g. between benchmark phases); the next
 * window starts at the next submission. brisk_engine_stats's counters are
 * not affected. BRISK_E_INVALID_ARGUMENT for a NULL engine. Must not run
 * concurrently with brisk_engine_step. */
BRISK_API brisk_status brisk_engine_reset_metrics(brisk_engine *engine);

/* ---- Structured output: decoding constraints -------------------------- */
/*
 * A constraint limits generated text to a formal language: a GBNF grammar
 * (llama.cpp's format), a JSON Schema, any JSON object (JSON mode) or a
 * regular expression. At each step it gives the tokens whose text keeps
 * the output a prefix of some string of the language (a bitset over the
 * vocabulary), and end-of-generation tokens only once the output is a
 * whole string of it; sampling picks among those only. So a request that
 * ends by an end-of-generation token has produced a string of the
 * language, and one cut by max_tokens a prefix of one.
 *
 * Using it through the engine (one constraint per request):
 *
 *   brisk_constraint_params cp;
 *   brisk_constraint_params_init(&cp);
 *   cp.kind = BRISK_CONSTRAINT_JSON_SCHEMA;
 *   cp.text = "{\"type\": \"object\", \"properties\": {...}}";
 *   brisk_engine_submit_constrained(engine, &request_params, &cp, &id);
 *
 * and, for a hand-written decoding loop: brisk_grammar_compile once,
 * brisk_constraint_create per generation, brisk_sampler_set_constraint,
 * then after each sample brisk_constraint_accept(c, token).
 *
 * Masks are cached per matcher state, so after the first few steps of a
 * generation most steps reuse a mask (see docs/performance.md for the
 * cost); a new state costs one walk over the vocabulary.
 */

typedef enum brisk_constraint_kind {
  BRISK_CONSTRAINT_NONE = 0,
  /* text: GBNF rules; generation starts at the rule named `root`. */
  BRISK_CONSTRAINT_GBNF = 1,
  /* text: a JSON Schema (the supported keywords are listed in
   * docs/structured-output.md; any other constraining keyword is an error,
   * never ignored, so accepted output always validates). */
  BRISK_CONSTRAINT_JSON_SCHEMA = 2,
  /* Any JSON object (RFC 8259); text is ignored. */
  BRISK_CONSTRAINT_JSON = 3,
  /* text: a regular expression (Python `re` syntax, ASCII classes) that the
   * whole output must match, as re.fullmatch. */
  BRISK_CONSTRAINT_REGEX = 4
} brisk_constraint_kind;

typedef struct brisk_constraint_params {
  uint32_t struct_size;       /* sizeof(brisk_constraint_params) */
  brisk_constraint_kind kind; /* default BRISK_CONSTRAINT_NONE */
  const char *text;           /* NUL-terminated UTF-8, copied; NULL for JSON mode */
  const char *root;           /* GBNF start rule; NULL (default) = "root" */
} brisk_constraint_params;

/* Fills *params with defaults (including struct_size). NULL is ignored. */
BRISK_API void brisk_constraint_params_init(brisk_constraint_params *params);

/* A compiled constraint: immutable once made, so one may be shared by any
 * number of threads and constraints. */
typedef struct brisk_grammar brisk_grammar;

/*
 * Compiles params into *out. BRISK_E_INVALID_ARGUMENT for NULL arguments,
 * a bad struct_size or kind, or invalid text, with a message naming the
 * position: "grammar: line L column C: ..." for GBNF (or the rule, for an
 * undefined, left-recursive or never-ending one), "json_schema: at
 * /properties/age: ..." for a schema (JSON syntax errors give line and
 * column), "regex: position N: ..." for a regular expression;
 * BRISK_E_OUT_OF_MEMORY. On failure *out is untouched.
 */
BRISK_API brisk_status brisk_grammar_compile(const brisk_constraint_params *params,
                                             brisk_grammar **out);

/* Frees the grammar. NULL is a no-op. Constraints made from it must be
 * freed first. */
BRISK_API void brisk_grammar_free(brisk_grammar *grammar);

/* The GBNF text the grammar was compiled from (for a schema or regex, the
 * grammar generated from it), valid as long as the grammar. */
BRISK_API const char *brisk_grammar_gbnf(const brisk_grammar *grammar);

/* One generation's position in a grammar, bound to a model's vocabulary.
 * Not thread-safe; must not outlive the grammar or the model. */
typedef struct brisk_constraint brisk_constraint;

/*
 * Makes a constraint at the start of `grammar` for the vocabulary of
 * `model` (token texts as brisk_token_to_piece gives them; control tokens
 * other than end-of-generation ones are never allowed). Costs a sort of
 * the vocabulary. BRISK_E_INVALID_ARGUMENT for NULL arguments,
 * BRISK_E_UNSUPPORTED for a model without a vocabulary,
 * BRISK_E_OUT_OF_MEMORY.
 */
BRISK_API brisk_status brisk_constraint_create(const brisk_model *model,
                                               const brisk_grammar *grammar,
                                               brisk_constraint **out);

/* Frees the constraint. NULL is a no-op. */
BRISK_API void brisk_constraint_free(brisk_constraint *constraint);

/*
 * The tokens allowed next: *mask points at (n_vocab + 31) / 32 words, token
 * t allowed when bit t % 32 of word t / 32 is set, valid until the next
 * call on this constraint; *n_allowed (may be NULL) receives how many.
 * n_allowed 0 means the constraint cannot go on with this vocabulary (a
 * character no token can produce). Errors: BRISK_E_INVALID_ARGUMENT for
 * NULL arguments or a grammar too ambiguous for the matcher's limits,
 * BRISK_E_OUT_OF_MEMORY.
 */
BRISK_API brisk_status brisk_constraint_mask(brisk_constraint *constraint, const uint32_t **mask,
                                             int32_t *n_allowed);

/*
 * Advances over token `token`, which must be allowed (as the mask says);
 * BRISK_E_INVALID_ARGUMENT otherwise, with the state unchanged. An
 * end-of-generation token is allowed once the output is complete and ends
 * the constraint (afterwards only end-of-generation tokens are allowed).
 */
BRISK_API brisk_status brisk_constraint_accept(brisk_constraint *constraint, int32_t token);

/* Nonzero when the text accepted so far is a whole string of the language. */
BRISK_API int brisk_constraint_is_complete(const brisk_constraint *constraint);

/* Back to the start of the grammar (the mask cache is kept). NULL is a no-op. */
BRISK_API void brisk_constraint_reset(brisk_constraint *constraint);

/*
 * Makes `sampler` sample only tokens `constraint` allows: each sample first
 * sets the logits of the other tokens to -inf (before bias and penalties;
 * the last log-probabilities then show them as -inf). The sampler borrows
 * the constraint (NULL removes it); the caller accepts each token into it
 * with brisk_constraint_accept. Sampling with a constraint that allows no
 * token fails with BRISK_E_INVALID_STATE. Both must share one vocabulary
 * (BRISK_E_INVALID_ARGUMENT otherwise). brisk_spec_round refuses a sampler
 * with a constraint (BRISK_E_UNSUPPORTED): it produces several tokens at
 * once; the engine's constrained requests speculate exactly instead.
 */
BRISK_API brisk_status brisk_sampler_set_constraint(brisk_sampler *sampler,
                                                    brisk_constraint *constraint);

/*
 * brisk_engine_submit with a constraint on every completion of the
 * request (NULL or kind BRISK_CONSTRAINT_NONE: none). The constraint is
 * compiled here, so an invalid grammar or schema is an error of this call
 * (messages as brisk_grammar_compile's). Speculative decoding by prompt
 * lookup stays exact: each drafted token is checked against the
 * constraint as it is verified. Drafting with a draft model
 * (spec_draft_model) is not supported with a constraint
 * (BRISK_E_UNSUPPORTED). Once the output is complete the constraint
 * allows end-of-generation tokens (and whatever may still extend it), so a
 * completion normally ends with BRISK_FINISH_EOG (or LENGTH, STOP as
 * usual); one whose constraint allows no token of the vocabulary finishes
 * with BRISK_FINISH_CONSTRAINT (token -1), or with BRISK_FINISH_STOP when
 * the output is complete but the vocabulary has no end-of-generation
 * token. Thread safety as brisk_engine_submit; `constraint` and its text
 * are only read during the call.
 */
BRISK_API brisk_status brisk_engine_submit_constrained(brisk_engine *engine,
                                                       const brisk_request_params *params,
                                                       const brisk_constraint_params *constraint,
                                                       uint64_t *id);

/*
 * Tool calls in chat, for the families whose reference templates define
 * them: "chatml" (Qwen 2.5 and Qwen 3, Hermes style: <tool_call> blocks),
 * "llama3" (Llama 3.1-3.3: a JSON {"name", "parameters"} turn),
 * "mistral-v3" and "mistral-v3-tekken" ([TOOL_CALLS] arrays). Other
 * families are BRISK_E_UNSUPPORTED. template_name NULL: the model's.
 *
 * tools_json is OpenAI's "tools" array: [{"type": "function", "function":
 * {"name", "description", "parameters": JSON Schema}}, ...]; names are
 * 1-64 of a-z A-Z 0-9 _ -.
 *
 * brisk_chat_apply_tools is brisk_chat_apply with the tools rendered into
 * the prompt as the family's reference template does (Llama 3.1's with
 * its default date, tools in the first user message; Qwen's without a
 * default system text). Besides system/user/assistant, messages may be
 * "tool" (a tool's result; "tool:ID" gives the call id, which the mistral
 * families need) and "tool_calls" (an assistant turn of calls: content is
 * OpenAI's tool_calls array, arguments as an object or a JSON string).
 * Buffer, length and error rules as brisk_chat_apply's; invalid tools or
 * calls are BRISK_E_INVALID_ARGUMENT naming the item.
 *
 * brisk_tool_call_grammar writes into *gbnf (free with brisk_string_free) the
 * GBNF (for BRISK_CONSTRAINT_GBNF) of one or more calls in the family's
 * output format whose arguments validate against their tool's parameters
 * schema (the subset brisk_grammar_compile supports; other keywords are
 * errors naming the tool): any tool, or only `tool_name` when it is not
 * NULL (OpenAI's tool_choice "required" and a named function). The
 * mistral grammar leaves out the [TOOL_CALLS] control token (a constraint
 * constrains text).
 *
 * brisk_chat_parse_tool_calls finds the calls in a model's output
 * text[0, len): *calls_json = a JSON array [{"name": .., "arguments":
 * {..}}, ...] or NULL when the text holds none; *content (if content is
 * not NULL) = the text outside the calls. Both NUL-terminated, freed with
 * brisk_string_free. Text that does not parse as a call is content, never an
 * error.
 *
 * All three allocate only their results, read the model only, and are safe
 * to call concurrently.
 */
BRISK_API brisk_status brisk_chat_apply_tools(const brisk_model *model, const char *template_name,
                                              const brisk_chat_message *messages, size_t n_messages,
                                              const char *tools_json, int add_assistant_prefix,
                                              char *buf, size_t capacity, size_t *len);
BRISK_API brisk_status brisk_tool_call_grammar(const brisk_model *model, const char *template_name,
                                               const char *tools_json, const char *tool_name,
                                               char **gbnf);
BRISK_API brisk_status brisk_chat_parse_tool_calls(const brisk_model *model,
                                                   const char *template_name, const char *text,
                                                   size_t len, char **calls_json, char **content);
/* Frees a string the library returned for the caller to free (NULL: no-op). */
BRISK_API void brisk_string_free(char *s);

/* Finish reason of a constrained completion that could not go on: no token
 * of the vocabulary continues the constraint (never garbage output). */
#  define BRISK_FINISH_CONSTRAINT ((brisk_finish_reason)6)

/* ---- Memory cap --------------------------------------------------------- */
/*
 * A hard limit on the host memory brisk holds, kept by the library instead
 * of the operating system's OOM killer: every allocation the library makes
 * (through the allocator hook), the temporary JSON parse trees of Hugging
 * Face folders (counted at a bound of their size; json-c allocates them),
 * and the pages of a mapped model file that repacking rewrites count
 * against the process-wide limit and against the limit of the handle they
 * are made for (memory_limit in the model, context and engine params; an
 * engine's context counts against the engine's too). Weights used in place
 * from a mapped file are page cache the kernel can reclaim and do not
 * count; neither does GPU memory. A call that would pass a limit returns
 * BRISK_E_OUT_OF_MEMORY with a message naming the limit, and leaves its
 * handle as before the call, usable.
 */

/* Sets the process-wide limit in bytes; 0 (the default) is none. Lowering
 * it below what is in use fails only later allocations. Thread-safe, at any
 * time. Returns BRISK_OK. */
BRISK_API brisk_status brisk_set_memory_limit(uint64_t bytes);
/* The process-wide limit; 0 when none. Thread-safe. */
BRISK_API uint64_t brisk_memory_limit(void);
/* Bytes counted against the process-wide limit now (brisk_memory_allocated
 * plus the charges that are not allocations). Thread-safe. */
BRISK_API uint64_t brisk_memory_used(void);

/* Bytes counted against the handle's limit now (0 for NULL). Thread-safe
 * (a value read while the handle is in use is a snapshot). */
BRISK_API uint64_t brisk_model_memory_used(const brisk_model *model);
BRISK_API uint64_t brisk_context_memory_used(const brisk_context *ctx);
BRISK_API uint64_t brisk_engine_memory_used(const brisk_engine *engine);

/* Changes the handle's limit (0: none); memory already held is kept, a limit
 * below it fails later allocations only. BRISK_E_INVALID_ARGUMENT for NULL.
 * Thread-safe. */
BRISK_API brisk_status brisk_context_set_memory_limit(brisk_context *ctx, uint64_t bytes);
BRISK_API brisk_status brisk_engine_set_memory_limit(brisk_engine *engine, uint64_t bytes);

/*
 * Bytes of weights one forward step of n_tokens tokens reads, n_out of them
 * producing logits: every layer's matrices and norms once, a
 * mixture-of-experts layer only the experts n_tokens tokens can choose (at
 * most all of them), n_tokens rows of the token embedding, and the output
 * matrix once when n_out > 0. The numerator of memory-bandwidth
 * utilisation (MBU) for a decode step (n_tokens = n_out = 1), as `brisk
 * bench` and the engine's metrics report it. 0 for NULL or n_tokens <= 0.
 * Thread-safe.
 */
BRISK_API uint64_t brisk_model_step_weight_bytes(const brisk_model *model, int64_t n_tokens,
                                                 int64_t n_out);

/* What a model and a context will take, before loading anything. */
typedef struct brisk_memory_estimate {
  uint32_t struct_size; /* set by the caller: sizeof(brisk_memory_estimate) */
  uint64_t weights;     /* weights in host memory: read or repacked (0 when used mapped) */
  uint64_t mapped;      /* weights used in place from the mapped file (not counted) */
  uint64_t model_other; /* the model's other memory: vocabulary, tables, metadata */
  uint64_t kv;          /* the context's KV pool */
  uint64_t buffers;     /* the context's activations, logits and workspace */
  uint64_t total;       /* weights + model_other + kv + buffers: counted bytes */
} brisk_memory_estimate;

/*
 * Estimates the bytes that loading the model at `path` with `model_params`
 * and creating one context with `ctx_params` (either may be NULL for
 * defaults) will count against the memory limits, reading only the file's
 * header and metadata (GGUF; a Hugging Face folder's config and headers).
 * The total is within 5% of brisk_model_memory_used plus
 * brisk_context_memory_used after those calls (tests/model/
 * test_estimate.c). Errors as brisk_model_load's for the header, and
 * brisk_context_create's for the params.
 */
BRISK_API brisk_status brisk_estimate_memory(const char *path,
                                             const brisk_model_params *model_params,
                                             const brisk_context_params *ctx_params,
                                             brisk_memory_estimate *out);
/*
 * Sequence snapshots: one sequence's tokens, positions and KV cache as a
 * byte string that restores into any sequence id of any context of the same
 * model and KV cache type, in this or another process, whatever the block
 * sizes (docs/snapshots.md has the format). A snapshot carries a format
 * version, the model's fingerprint (architecture, hyper-parameters, tensor
 * names, types and shapes, vocabulary; weight values are not hashed, so
 * fine-tunes of one base share it), the KV type, a checksum, the token ids
 * and the positions; import checks every field before it changes anything.
 * Restored into a context of the same block size, the next logits are
 * bitwise those of the original (other block sizes: to rounding). Uses:
 * saving a conversation, and handing a prefilled sequence from one engine
 * to another (prefill / decode disaggregation).
 */

/* Writes n bytes of a snapshot; returns 0, or nonzero to stop (the export
 * then fails with BRISK_E_IO). Called on the exporting thread only. */
typedef int (*brisk_seq_write_fn)(void *user_data, const void *data, size_t n);
/* Reads exactly n bytes of a snapshot into data; returns 0, or nonzero at
 * an error or an end (the import then fails with BRISK_E_IO). */
typedef int (*brisk_seq_read_fn)(void *user_data, void *data, size_t n);

/*
 * Writes sequence seq_id of ctx as a snapshot into buf[0 .. capacity):
 * *n_bytes is set to the snapshot's size, and BRISK_E_BUFFER_TOO_SMALL
 * returned (nothing written) when capacity is less (buf may be NULL then;
 * call again with a buffer of *n_bytes). BRISK_E_INVALID_ARGUMENT for a NULL
 * ctx or n_bytes, a bad or empty sequence; BRISK_E_OUT_OF_MEMORY. The
 * sequence and the context are unchanged. Calls on one context must not run
 * concurrently.
 */
BRISK_API brisk_status brisk_seq_export(brisk_context *ctx, int32_t seq_id, void *buf,
                                        size_t capacity, size_t *n_bytes);
/* brisk_seq_export through a writer callback, in order, in pieces of any
 * size (the largest: one layer's K or V of the sequence). */
BRISK_API brisk_status brisk_seq_export_to(brisk_context *ctx, int32_t seq_id,
                                           brisk_seq_write_fn write, void *user_data);

/*
 * Restores a snapshot of exactly n_bytes into empty sequence seq_id of ctx
 * (any id; the snapshot's full blocks join the prefix cache as decoded ones
 * would). Errors change nothing:
 *   BRISK_E_INVALID_ARGUMENT  NULL ctx, a bad or non-empty sequence, a
 *                             snapshot of another model (fingerprint) or
 *                             another KV cache type
 *   BRISK_E_FORMAT            not a snapshot, another format version, a bad
 *                             checksum, size, count, token id or position
 *                             (the message names the field)
 *   BRISK_E_IO                (import_from) the reader failed or ended
 *   BRISK_E_KV_FULL           too few free KV blocks for its tokens
 *   BRISK_E_OUT_OF_MEMORY
 * The buffer is only read during the call.
 */
BRISK_API brisk_status brisk_seq_import(brisk_context *ctx, int32_t seq_id, const void *buf,
                                        size_t n_bytes);
/* brisk_seq_import through a reader callback; the reader is not used after
 * the call (the whole snapshot is read, into memory of the call's, before
 * the context changes). */
BRISK_API brisk_status brisk_seq_import_from(brisk_context *ctx, int32_t seq_id,
                                             brisk_seq_read_fn read, void *user_data);

/*
 * Attention sinks + sliding window (StreamingLLM, Xiao et al. 2023) for
 * sequence seq_id, which must be empty: it keeps its first n_sinks tokens
 * (rounded up to whole KV blocks) and at least its last `window` tokens
 * (fewer than window + block_size); as it grows, each brisk_decode
 * releases the whole blocks between them that the batch does not write,
 * so one sequence can generate far past the KV pool in bounded memory. A
 * batch never evicts its own tokens, and the blocks it evicts are released
 * only once it succeeds (so a failed one is undone): fed in batches of at
 * most `window` tokens, the sequence holds at most n_sinks + 2 x window +
 * 3 x block_size tokens' worth of blocks at any time; generating one token
 * at a time, fewer than n_sinks + window + 3 x block_size.
 * Positions: the caller keeps feeding positions 0, 1, 2, ... as always
 * (brisk_seq_len is the next one), while attention sees positions within
 * the cache as StreamingLLM does: a query is as far from a window key as
 * in the sequence, and from sink s as if the evicted positions were never
 * there (the sinks' keys are rewritten rotated to s + evicted; see
 * lib/context/stream.h). Until the first eviction (the sequence is then
 * longer than the rounded n_sinks + window + block_size) logits are
 * bitwise those of a sequence without a window. Models attend with RoPE
 * (every architecture brisk loads).
 * Such a sequence is never published to the prefix cache,
 * brisk_seq_match_prefix attaches nothing to it, brisk_seq_fork from or to
 * it and brisk_seq_export / brisk_seq_import return BRISK_E_UNSUPPORTED,
 * and brisk_seq_truncate keeps 0 tokens or at least the sinks plus the
 * evicted positions (BRISK_E_INVALID_ARGUMENT otherwise). The window stays
 * set on the id when the sequence is freed; 0, 0 turns it off.
 * Returns BRISK_E_INVALID_ARGUMENT for a NULL ctx, a bad id, a sequence
 * that is not empty, n_sinks < 0, window < 0, n_sinks > 0 with window 0,
 * or sinks (in whole blocks) above max_batch_tokens; BRISK_E_UNSUPPORTED
 * for a tensor- or pipeline-parallel model or one with multi-head latent
 * attention (deepseek2); BRISK_E_OUT_OF_MEMORY (a host copy of the
 * sinks' K and V is kept: n_sinks x n_layer x 2 x n_head_kv x head_dim
 * floats). Not thread-safe with other calls on ctx.
 */
BRISK_API brisk_status brisk_seq_set_window(brisk_context *ctx, int32_t seq_id, int32_t n_sinks,
                                            int32_t window);

/*
 * Pipeline parallelism (brisk_model_params.pp_size, docs/parallelism.md):
 * what the context's decodes so far measured. *n_stages: the model's
 * stages (1 without PP); *n_micro_batches: micro-batches run through the
 * pipeline; *bubble: the share of stage time spent waiting, 1 - (time the
 * stages computed) / (stages x wall time of the decodes), in [0, 1);
 * *ideal_bubble: what a pipeline of equal stages would lose for the same
 * micro-batch counts, (S - 1) / (M + S - 1) averaged over the decodes.
 * All 0 (n_stages 1) without PP or before the first decode.
 * Returns BRISK_E_INVALID_ARGUMENT for a NULL argument. Call it from the
 * thread that decodes on ctx (or when no decode runs).
 */
BRISK_API brisk_status brisk_context_pipeline_stats(const brisk_context *ctx, int32_t *n_stages,
                                                    uint64_t *n_micro_batches, double *bubble,
                                                    double *ideal_bubble);

/*
 * Multi-process ranks over MPI (docs/parallelism.md): tensor or pipeline
 * parallelism whose ranks are the processes of an MPI job (mpirun -np N),
 * one rank per process, on the CPU. Every process loads the same model with
 * tp_size N, or pp_size N, or tp_size x pp_size = N (the job's size; a grid:
 * process p is TP rank p % tp_size of stage p / tp_size), after
 * brisk_mpi_world, and keeps only its rank's part of it (its TP shard of
 * its stage's layers);
 * rank 0 then creates contexts (and engines) on it as usual, one at a
 * time, and the other ranks call brisk_worker_run, which follows rank 0's
 * contexts step by step. Logits are bit for bit those of one process. Rank
 * 0 ends the job's ranks with brisk_mpi_finalize, which every process calls
 * before it exits. MPI lives in a plugin, libbrisk-mpi.so, opened on the
 * first brisk_mpi_world and looked for as brisk_set_plugin_dir says:
 * libbrisk itself does not link MPI.
 */

/*
 * Joins the MPI job (initializing MPI, thread level SERIALIZED, unless the
 * program did): *rank and *size receive this process's rank and the job's
 * size. Idempotent. Returns BRISK_E_UNSUPPORTED when the MPI plugin
 * (libbrisk-mpi.so) is absent (a build without Open MPI) or cannot be
 * loaded (Open MPI's libraries missing): the message says where it looked
 * or why, BRISK_E_INVALID_ARGUMENT for a NULL
 * argument, BRISK_E_INTERNAL for an MPI error. Not thread-safe: call it
 * from the thread that will use the model, before loading it.
 */
BRISK_API brisk_status brisk_mpi_world(int32_t *rank, int32_t *size);

/*
 * Ranks 1..N-1: follows rank 0. Each context rank 0 creates on its model
 * (loaded with tp_size x pp_size = N) gets this rank's shard of its stage,
 * KV storage and a pass of
 * n_threads threads (0: one per processor) here, and runs every decode
 * with it until rank 0 frees that context; then the next one. Returns
 * BRISK_OK when rank 0 calls brisk_mpi_finalize. A context that fails on
 * any rank (an error of its own, or of another rank, reported by the
 * communicator) fails on every rank: rank 0's decode returns an error, this
 * call returns the status (BRISK_E_CANCELLED when another rank failed), and
 * the job takes no more contexts; no rank is left waiting. A rank that
 * dies outright is mpirun's to report (it ends the job).
 * Returns BRISK_E_INVALID_STATE before brisk_mpi_world,
 * BRISK_E_INVALID_ARGUMENT on rank 0, for a NULL model, a model whose
 * tp_size x pp_size is not the job's size, or n_threads outside [0, 1024].
 * The model must outlive the call; call it on the thread that joined.
 */
BRISK_API brisk_status brisk_worker_run(const brisk_model *model, int32_t n_threads);

/*
 * Ends this process's part in the MPI job: on rank 0 it first releases the
 * workers (their brisk_worker_run returns BRISK_OK), unless a context
 * failed; then MPI is finalized if brisk_mpi_world initialized it. Free
 * rank 0's contexts before. A no-op without brisk_mpi_world; after it,
 * brisk_mpi_world starts over only if the program initializes MPI itself.
 */
BRISK_API void brisk_mpi_finalize(void);
/* ------------------------------------------------------------------------ */
/* Embeddings                                                               */
/* ------------------------------------------------------------------------ */

/* How the hidden states of a text's tokens become one vector. */
typedef enum brisk_embed_pooling {
  /* The model folder's choice (sentence-transformers' 1_Pooling/config.json)
   * or a GGUF encoder's ({arch}.pooling_type); without one: MEAN for
   * encoders, LAST for decoders. */
  BRISK_EMBED_POOLING_DEFAULT = 0,
  BRISK_EMBED_POOLING_MEAN = 1, /* the mean over every token, [CLS] and [SEP] included */
  BRISK_EMBED_POOLING_CLS = 2,  /* the first token's */
  BRISK_EMBED_POOLING_LAST = 3  /* the last token's (decoder embedding models) */
} brisk_embed_pooling;

typedef struct brisk_embed_params {
  uint32_t struct_size;
  int32_t pooling; /* a brisk_embed_pooling; default BRISK_EMBED_POOLING_DEFAULT */
  /* 1: each vector divided by its L2 norm; 0: as pooled; -1 (default): as
   * the folder says (a sentence-transformers Normalize module), 1 for a
   * GGUF encoder (as llama.cpp's embedding tools), else 0. */
  int32_t normalize;
  /* Tokens per text at most (longer texts are cut, keeping an encoder's
   * closing [SEP]); 0 (default): the folder's max_seq_length, else the
   * model's training context. */
  int32_t max_tokens;
  int32_t n_threads; /* worker threads; 0 (default): one per core */
} brisk_embed_params;

/* Fills *params with the defaults above (struct_size set); NULL is a
 * no-op. Any thread. */
BRISK_API void brisk_embed_params_init(brisk_embed_params *params);

/*
 * Embeds n_texts texts with `model`: each is tokenized (an encoder's
 * WordPiece tokenizer adds [CLS] and [SEP]; a decoder's adds its BOS when its
 * vocabulary says so), run through the model whole and without a KV cache
 * (encoders attend both ways, decoders causally), and its final hidden
 * states (a decoder's after the output norm) are pooled and, if asked,
 * L2-normalised into out[i * n_embd .. (i + 1) * n_embd), n_embd being
 * brisk_model_n_embd(model). params NULL: the defaults.
 *
 * Returns BRISK_OK; BRISK_E_BUFFER_TOO_SMALL when out_cap (in floats) is
 * less than n_texts * n_embd (nothing written); BRISK_E_INVALID_ARGUMENT for
 * NULL model, texts, a NULL text or out (out may be NULL when n_texts is 0),
 * a bad pooling or field; BRISK_E_UNSUPPORTED for a model without a
 * tokenizer, one placed on a GPU (embeddings run on the CPU), or pooling
 * DEFAULT on a folder whose pooling brisk does not compute (max,
 * weighted mean) or a GGUF reranker's (rank); BRISK_E_OUT_OF_MEMORY. On error out is unspecified.
 *
 * The model is only read: calls may run concurrently on one model, each
 * with its own scratch memory (freed before it returns). Texts are copied
 * nowhere and read only during the call.
 */
BRISK_API brisk_status brisk_embed(const brisk_model *model, const brisk_embed_params *params,
                                   const char *const *texts, int32_t n_texts, float *out,
                                   size_t out_cap);

/*
 * Embedding requests on an engine (brisk_engine_submit_embed), served next
 * to generation as serving engines serve pooling requests: each step, after
 * the running requests' next tokens and prompt chunks, waiting embedding
 * requests take what is left of max_batch_tokens in rank order (priority,
 * then submission, interleaved with the admission of waiting generation
 * requests), as many as fit packed into one embedding pass; the first that
 * does not fit waits for the next step (first come, first served). With a
 * step time budget, one joins a step when the cost model predicts it fits,
 * the step has nothing else, or the budget held it back for 8 steps. A
 * request runs whole in one step: a decoder runs a causal pass over its
 * tokens into scratch F32 KV that lives only for the pass (the engine's KV
 * pool is not used), an encoder its bidirectional pass. Its vector is
 * bitwise what brisk_embed gives for the same text and params (the same
 * passes and pooling; a sequence does not depend on its batch).
 *
 * An engine on an encoder-only model (BERT family) serves only embedding
 * requests: it has no KV pool, and brisk_engine_submit on it is
 * BRISK_E_UNSUPPORTED with a message. Embeddings run on the CPU (a model
 * with GPU layers or split across ranks is refused at submit).
 */
typedef struct brisk_embed_request_params {
  uint32_t struct_size; /* sizeof(brisk_embed_request_params) */
  /* The input: n_tokens ids (copied, used as given: no [CLS] / BOS is
   * added and nothing is cut), or, when tokens is NULL, text tokenized and
   * cut as brisk_embed does. At least one token, at most max_tokens (below)
   * and the engine's max_batch_tokens. */
  const int32_t *tokens;
  size_t n_tokens;
  const char *text;
  /* As brisk_embed_params: a brisk_embed_pooling (default DEFAULT), 1 / 0 /
   * -1 (default: the folder's) normalisation, the most tokens of one input
   * (0, default: the folder's max_seq_length, else the training context). */
  int32_t pooling;
  int32_t normalize;
  int32_t max_tokens;
  /* Higher is served first; default 0. */
  int32_t priority;
  /* Returned in the request's event, never dereferenced. */
  void *user_data;
} brisk_embed_request_params;

/* Fills *params with defaults (struct_size set; normalize -1). NULL is a
 * no-op. Any thread. */
BRISK_API void brisk_embed_request_params_init(brisk_embed_request_params *params);

/*
 * Queues an embedding request; *id (nonzero, unique within the engine,
 * shared with generation requests) names it. Tokenizes, checks and copies
 * everything here: BRISK_E_INVALID_ARGUMENT (NULL engine, params or id, bad
 * struct_size, no input, a token outside [0, n_vocab), a bad pooling,
 * normalize or max_tokens, more tokens than max_tokens or than the
 * engine's max_batch_tokens, named in the message), BRISK_E_UNSUPPORTED (a
 * model without a tokenizer given text, one on a GPU or split across
 * ranks, pooling DEFAULT on a folder whose pooling brisk does not compute),
 * BRISK_E_OUT_OF_MEMORY. Safe to call from any thread while another steps.
 *
 * Its one event is its finished event: token -1, no text, index 0, reason
 * BRISK_FINISH_LENGTH when its vector is ready (then read it with
 * brisk_engine_embedding), BRISK_FINISH_CANCELLED (brisk_engine_cancel
 * before the step that ran it) or BRISK_FINISH_ERROR
 * (brisk_request_stats.error says why). brisk_engine_request_stats gives
 * its n_prompt_tokens (the tokens embedded) and times; generated tokens 0.
 */
BRISK_API brisk_status brisk_engine_submit_embed(brisk_engine *engine,
                                                 const brisk_embed_request_params *params,
                                                 uint64_t *id);

/*
 * Copies the vector of embedding request `id` into out[0 .. n_embd) and
 * sets *n to n_embd (brisk_model_n_embd). Available from the step that
 * queued its finished event (reason BRISK_FINISH_LENGTH) until the
 * brisk_engine_poll call after the one that delivered that event, like
 * brisk_engine_request_stats; the engine keeps the vector until then.
 * BRISK_E_BUFFER_TOO_SMALL when cap < n_embd (*n set, nothing copied);
 * BRISK_E_NOT_FOUND when no live request has the id; BRISK_E_INVALID_STATE
 * for a generation request or an embedding request without a vector (not
 * run yet, cancelled or failed); BRISK_E_INVALID_ARGUMENT for NULL engine
 * or n, or NULL out with cap > 0. Call it from the thread that steps and
 * polls (as brisk_engine_poll).
 */
BRISK_API brisk_status brisk_engine_embedding(brisk_engine *engine, uint64_t id, float *out,
                                              size_t cap, size_t *n);

#endif /* BRISK_EXPERIMENTAL */

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* BRISK_H */
