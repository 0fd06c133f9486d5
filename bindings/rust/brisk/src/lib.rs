//! Safe Rust bindings for brisk, an embeddable LLM inference library.
//!
//! ```no_run
//! let model = brisk::Model::load("model.gguf")?;
//! let msgs = [brisk::ChatMessage::new("user", "Tell me a story.")];
//! for piece in model.chat(&msgs, &brisk::GenerateOptions::default())? {
//!     print!("{}", piece?);
//! }
//! # Ok::<(), brisk::Error>(())
//! ```
//!
//! Handles own their C objects and free them on drop. Thread safety follows
//! brisk.h: a [`Model`] is immutable (`Send + Sync`, cheap to clone); a
//! [`Context`], [`Sampler`] and [`Engine`] are `Send` but used through
//! `&mut self`; an engine's [`Submitter`] (`Send + Sync`) submits and
//! cancels from other threads while one thread steps.
use brisk_sys as sys;
use std::ffi::{c_void, CStr, CString};
use std::fmt;
use std::os::raw::{c_char, c_int};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Once};

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

/// The kind of failure: brisk_status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    InvalidArgument,
    OutOfMemory,
    Io,
    Format,
    Unsupported,
    Cancelled,
    BufferTooSmall,
    NotFound,
    InvalidState,
    Internal,
    KvFull,
    /// A status this version of the bindings does not know, or an ABI mismatch.
    Other(i32),
}

impl Status {
    fn from_raw(s: sys::brisk_status) -> Status {
        match s {
            sys::BRISK_E_INVALID_ARGUMENT => Status::InvalidArgument,
            sys::BRISK_E_OUT_OF_MEMORY => Status::OutOfMemory,
            sys::BRISK_E_IO => Status::Io,
            sys::BRISK_E_FORMAT => Status::Format,
            sys::BRISK_E_UNSUPPORTED => Status::Unsupported,
            sys::BRISK_E_CANCELLED => Status::Cancelled,
            sys::BRISK_E_BUFFER_TOO_SMALL => Status::BufferTooSmall,
            sys::BRISK_E_NOT_FOUND => Status::NotFound,
            sys::BRISK_E_INVALID_STATE => Status::InvalidState,
            sys::BRISK_E_INTERNAL => Status::Internal,
            sys::BRISK_E_KV_FULL => Status::KvFull,
            other => Status::Other(other),
        }
    }
}

/// A failed brisk call: its status and the library's message (brisk_last_error).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    pub status: Status,
    pub message: String,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.status, self.message)
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

fn cstr(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

fn check(st: sys::brisk_status) -> Result<()> {
    if st == sys::BRISK_OK {
        return Ok(());
    }
    Err(Error { status: Status::from_raw(st), message: cstr(unsafe { sys::brisk_last_error() }) })
}

fn invalid(message: &str) -> Error {
    Error { status: Status::InvalidArgument, message: message.to_string() }
}

fn c_string(s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| invalid("string contains a NUL byte"))
}

static ABI_CHECK: Once = Once::new();
static mut ABI_OK: bool = false;

/// Refuses a library of another ABI version (checked once, before any handle).
fn check_abi() -> Result<()> {
    ABI_CHECK.call_once(|| unsafe { ABI_OK = sys::brisk_abi_version() == sys::BRISK_ABI_VERSION });
    // SAFETY: written once inside call_once, read-only afterwards.
    if unsafe { ABI_OK } {
        Ok(())
    } else {
        Err(Error {
            status: Status::Other(-1),
            message: format!(
                "libbrisk has ABI version {}, these bindings need {}",
                unsafe { sys::brisk_abi_version() },
                sys::BRISK_ABI_VERSION
            ),
        })
    }
}

/// The library's version, "MAJOR.MINOR.PATCH".
pub fn version() -> String {
    cstr(unsafe { sys::brisk_version_string() })
}

/// Bytes the library holds now, over all handles (0 once all are dropped).
pub fn memory_allocated() -> u64 {
    unsafe { sys::brisk_memory_allocated() }
}

/// A log line's level.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    Debug = 0,
    Info = 1,
    Warn = 2,
    Error = 3,
}

type LogSink = Box<dyn Fn(LogLevel, &str) + Send + Sync>;
static LOG_SINK: std::sync::Mutex<Option<Arc<LogSink>>> = std::sync::Mutex::new(None);

unsafe extern "C" fn log_trampoline(level: c_int, message: *const c_char, _: *mut c_void) {
    let sink = LOG_SINK.lock().ok().and_then(|g| g.clone());
    if let Some(sink) = sink {
        let lvl = match level {
            0 => LogLevel::Debug,
            1 => LogLevel::Info,
            2 => LogLevel::Warn,
            _ => LogLevel::Error,
        };
        let msg = cstr(message);
        // A panic must not unwind into C.
        let _ = catch_unwind(AssertUnwindSafe(|| sink(lvl, &msg)));
    }
}

/// Routes the library's log lines at or above `min` to `sink` (None: stderr).
/// The sink may be called from the library's threads, concurrently.
pub fn set_log_callback(sink: Option<LogSink>, min: LogLevel) -> Result<()> {
    match sink {
        Some(s) => {
            *LOG_SINK.lock().unwrap() = Some(Arc::new(s));
            check(unsafe {
                sys::brisk_set_log_callback(
                    Some(log_trampoline),
                    std::ptr::null_mut(),
                    min as c_int,
                )
            })
        }
        None => {
            let r = check(unsafe {
                sys::brisk_set_log_callback(None, std::ptr::null_mut(), min as c_int)
            });
            *LOG_SINK.lock().unwrap() = None;
            r
        }
    }
}

// ---------------------------------------------------------------------------
// Model
// ---------------------------------------------------------------------------

/// The model `brisk run` uses without -m (SmolLM2-135M-Instruct), from the
/// brisk cache: $BRISK_CACHE_DIR, else $XDG_CACHE_HOME/brisk, else
/// ~/.cache/brisk. Nothing is downloaded here: run `brisk run` once to fetch
/// it. Status::NotFound when it is not there.
pub fn default_model_path() -> Result<String> {
    const NAME: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let dir = var("BRISK_CACHE_DIR")
        .or_else(|| var("XDG_CACHE_HOME").map(|x| format!("{x}/brisk")))
        .or_else(|| var("HOME").map(|h| format!("{h}/.cache/brisk")))
        .ok_or_else(|| Error { status: Status::NotFound, message: "no cache folder".into() })?;
    let path = format!("{dir}/{NAME}");
    match std::fs::metadata(&path) {
        Ok(m) if m.len() > 0 => Ok(path),
        _ => Err(Error {
            status: Status::NotFound,
            message: format!("the default model {path} is absent (run `brisk run` once)"),
        }),
    }
}

struct ModelInner(*mut sys::brisk_model);
// SAFETY: brisk.h: a model is immutable after load and every getter may run
// concurrently from any thread.
unsafe impl Send for ModelInner {}
unsafe impl Sync for ModelInner {}
impl Drop for ModelInner {
    fn drop(&mut self) {
        unsafe { sys::brisk_model_free(self.0) }
    }
}

/// A loaded model. Cloning shares it; contexts, samplers and engines keep a
/// clone, so it lives as long as they do.
#[derive(Clone)]
pub struct Model(Arc<ModelInner>);

/// Options of [`Model::load_with`].
pub struct LoadOptions<'a> {
    pub use_mmap: bool,
    pub vocab_only: bool,
    /// Called with the fraction loaded; return false to cancel (Status::Cancelled).
    pub progress: Option<&'a mut dyn FnMut(f32) -> bool>,
}

impl Default for LoadOptions<'_> {
    fn default() -> Self {
        LoadOptions { use_mmap: true, vocab_only: false, progress: None }
    }
}

unsafe extern "C" fn progress_trampoline(fraction: f32, user: *mut c_void) -> c_int {
    let f = &mut *(user as *mut &mut dyn FnMut(f32) -> bool);
    match catch_unwind(AssertUnwindSafe(|| f(fraction))) {
        Ok(true) => 1,
        _ => 0,
    }
}

impl Model {
    /// Loads the default model (see [`default_model_path`]).
    pub fn load_default() -> Result<Model> {
        Model::load(&default_model_path()?)
    }

    /// Loads a GGUF file or a Hugging Face model folder.
    pub fn load(path: &str) -> Result<Model> {
        Model::load_with(path, LoadOptions::default())
    }

    pub fn load_with(path: &str, mut opts: LoadOptions<'_>) -> Result<Model> {
        check_abi()?;
        let cpath = c_string(path)?;
        let mut p = unsafe {
            let mut p = std::mem::MaybeUninit::<sys::brisk_model_params>::zeroed();
            sys::brisk_model_params_init(p.as_mut_ptr());
            p.assume_init()
        };
        p.use_mmap = opts.use_mmap as c_int;
        p.vocab_only = opts.vocab_only as c_int;
        let mut cb: Option<&mut dyn FnMut(f32) -> bool> = opts.progress.take();
        if let Some(f) = cb.as_mut() {
            p.progress = Some(progress_trampoline);
            p.progress_user_data = f as *mut &mut dyn FnMut(f32) -> bool as *mut c_void;
        }
        let mut h = std::ptr::null_mut();
        check(unsafe { sys::brisk_model_load(cpath.as_ptr(), &p, &mut h) })?;
        Ok(Model(Arc::new(ModelInner(h))))
    }

    fn raw(&self) -> *const sys::brisk_model {
        self.0 .0
    }

    pub fn n_vocab(&self) -> i32 {
        unsafe { sys::brisk_model_n_vocab(self.raw()) }
    }
    pub fn n_ctx_train(&self) -> i32 {
        unsafe { sys::brisk_model_n_ctx_train(self.raw()) }
    }
    pub fn architecture(&self) -> String {
        cstr(unsafe { sys::brisk_model_architecture(self.raw()) })
    }

    /// Token ids of `text`, with BOS as the vocabulary says when `add_special`.
    pub fn tokenize(&self, text: &str, add_special: bool, parse_special: bool) -> Result<Vec<i32>> {
        let flags = (add_special as u32) * sys::BRISK_TOKENIZE_ADD_SPECIAL
            | (parse_special as u32) * sys::BRISK_TOKENIZE_PARSE_SPECIAL;
        let mut out = vec![0i32; text.len() + 8];
        let mut n = 0usize;
        loop {
            let st = unsafe {
                sys::brisk_tokenize(
                    self.raw(),
                    text.as_ptr() as *const c_char,
                    text.len(),
                    out.as_mut_ptr(),
                    out.len(),
                    flags,
                    &mut n,
                )
            };
            if st == sys::BRISK_E_BUFFER_TOO_SMALL {
                out.resize(n, 0);
                continue;
            }
            check(st)?;
            out.truncate(n);
            return Ok(out);
        }
    }

    /// The bytes of a token sequence (lossless; may be invalid UTF-8).
    pub fn detokenize_bytes(&self, tokens: &[i32], flags: u32) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; tokens.len() * 16 + 16];
        let mut n = 0usize;
        loop {
            let st = unsafe {
                sys::brisk_detokenize(
                    self.raw(),
                    tokens.as_ptr(),
                    tokens.len(),
                    flags,
                    buf.as_mut_ptr() as *mut c_char,
                    buf.len(),
                    &mut n,
                )
            };
            if st == sys::BRISK_E_BUFFER_TOO_SMALL {
                buf.resize(n, 0);
                continue;
            }
            check(st)?;
            buf.truncate(n);
            return Ok(buf);
        }
    }

    /// The text of a token sequence (invalid UTF-8 replaced by U+FFFD).
    pub fn detokenize(&self, tokens: &[i32]) -> Result<String> {
        Ok(String::from_utf8_lossy(&self.detokenize_bytes(tokens, 0)?).into_owned())
    }

    pub fn is_eog(&self, token: i32) -> bool {
        unsafe { sys::brisk_token_is_eog(self.raw(), token) != 0 }
    }

    /// The prompt text of a conversation in the model's chat format (or the
    /// named template family).
    pub fn apply_chat(&self, messages: &[ChatMessage], template: Option<&str>) -> Result<String> {
        let owned: Vec<(CString, CString)> = messages
            .iter()
            .map(|m| Ok((c_string(&m.role)?, c_string(&m.content)?)))
            .collect::<Result<_>>()?;
        let raw: Vec<sys::brisk_chat_message> = owned
            .iter()
            .map(|(r, c)| sys::brisk_chat_message { role: r.as_ptr(), content: c.as_ptr() })
            .collect();
        let tmpl = template.map(c_string).transpose()?;
        let tp = tmpl.as_ref().map_or(std::ptr::null(), |t| t.as_ptr());
        let mut len = 0usize;
        let st = unsafe {
            sys::brisk_chat_apply(
                self.raw(),
                tp,
                raw.as_ptr(),
                raw.len(),
                1,
                std::ptr::null_mut(),
                0,
                &mut len,
            )
        };
        if st != sys::BRISK_E_BUFFER_TOO_SMALL {
            check(st)?;
        }
        let mut buf = vec![0u8; len + 1];
        check(unsafe {
            sys::brisk_chat_apply(
                self.raw(),
                tp,
                raw.as_ptr(),
                raw.len(),
                1,
                buf.as_mut_ptr() as *mut c_char,
                buf.len(),
                &mut len,
            )
        })?;
        buf.truncate(len);
        String::from_utf8(buf).map_err(|_| invalid("chat text is not UTF-8"))
    }

    /// Generates text for `prompt`: an iterator of text pieces as they are
    /// produced (whole UTF-8 characters; stop strings are never shown).
    pub fn generate(&self, prompt: &str, opts: &GenerateOptions) -> Result<Generation> {
        let tokens = self.tokenize(prompt, true, opts.parse_special)?;
        Generation::new(self, tokens, opts)
    }

    /// Streams the assistant's answer to a conversation.
    pub fn chat(&self, messages: &[ChatMessage], opts: &GenerateOptions) -> Result<Generation> {
        let text = self.apply_chat(messages, opts.template.as_deref())?;
        let tokens = self.tokenize(&text, true, true)?;
        Generation::new(self, tokens, opts)
    }
}

/// One message of a conversation: role "system", "user" or "assistant".
#[derive(Clone, Debug)]
pub struct ChatMessage {
    pub role: String,
    pub content: String,
}

impl ChatMessage {
    pub fn new(role: &str, content: &str) -> ChatMessage {
        ChatMessage { role: role.into(), content: content.into() }
    }
}

// ---------------------------------------------------------------------------
// Sampling options, sampler
// ---------------------------------------------------------------------------

/// Sampler settings (see brisk.h for the order of the steps).
#[derive(Clone, Debug)]
pub struct SamplerOptions {
    /// 0 = greedy.
    pub temperature: f32,
    pub top_k: i32,
    pub top_p: f32,
    pub min_p: f32,
    pub repeat_penalty: f32,
    pub seed: u64,
}

impl Default for SamplerOptions {
    fn default() -> Self {
        SamplerOptions {
            temperature: 1.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            repeat_penalty: 1.0,
            seed: 0,
        }
    }
}

impl SamplerOptions {
    pub fn greedy() -> Self {
        SamplerOptions { temperature: 0.0, ..Default::default() }
    }
    fn raw(&self) -> sys::brisk_sampler_params {
        let mut p = unsafe {
            let mut p = std::mem::MaybeUninit::<sys::brisk_sampler_params>::zeroed();
            sys::brisk_sampler_params_init(p.as_mut_ptr());
            p.assume_init()
        };
        p.temperature = self.temperature;
        p.top_k = self.top_k;
        p.top_p = self.top_p;
        p.min_p = self.min_p;
        p.repeat_penalty = self.repeat_penalty;
        p.seed = self.seed;
        p
    }
}

/// Picks tokens from logits; holds the penalty window and random state.
pub struct Sampler {
    raw: *mut sys::brisk_sampler,
    _model: Model,
}
// SAFETY: a sampler may move between threads; calls need &mut self.
unsafe impl Send for Sampler {}

impl Sampler {
    pub fn new(model: &Model, opts: &SamplerOptions) -> Result<Sampler> {
        let p = opts.raw();
        let mut h = std::ptr::null_mut();
        check(unsafe { sys::brisk_sampler_create(model.raw(), &p, &mut h) })?;
        Ok(Sampler { raw: h, _model: model.clone() })
    }
    /// A token from entry `i` of `ctx`'s last decode (not accepted yet).
    pub fn sample(&mut self, ctx: &Context, i: i32) -> Result<i32> {
        let mut t = 0;
        check(unsafe { sys::brisk_sampler_sample(self.raw, ctx.raw, i, &mut t) })?;
        Ok(t)
    }
    pub fn sample_logits(&mut self, logits: &[f32]) -> Result<i32> {
        let mut t = 0;
        let n = i32::try_from(logits.len()).map_err(|_| invalid("too many logits"))?;
        check(unsafe { sys::brisk_sampler_sample_logits(self.raw, logits.as_ptr(), n, &mut t) })?;
        Ok(t)
    }
    pub fn accept(&mut self, token: i32) -> Result<()> {
        check(unsafe { sys::brisk_sampler_accept(self.raw, token) })
    }
    pub fn reset(&mut self) {
        unsafe { sys::brisk_sampler_reset(self.raw) }
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        unsafe { sys::brisk_sampler_free(self.raw) }
    }
}

// ---------------------------------------------------------------------------
// Context and batch
// ---------------------------------------------------------------------------

/// Options of [`Context::new`]; zeros are the library's defaults.
#[derive(Clone, Debug)]
pub struct ContextOptions {
    pub n_threads: i32,
    pub kv_tokens: i32,
    pub max_batch_tokens: i32,
    pub n_seq_max: i32,
    /// Set it (from any thread) to make the running and later decodes fail
    /// with Status::Cancelled until it is cleared.
    pub abort: Option<Arc<AtomicBool>>,
}

impl Default for ContextOptions {
    fn default() -> Self {
        ContextOptions {
            n_threads: 0,
            kv_tokens: 0,
            max_batch_tokens: 512,
            n_seq_max: 64,
            abort: None,
        }
    }
}

unsafe extern "C" fn abort_trampoline(user: *mut c_void) -> c_int {
    (*(user as *const AtomicBool)).load(Ordering::Relaxed) as c_int
}

/// Runs a model over a paged KV cache.
pub struct Context {
    raw: *mut sys::brisk_context,
    n_vocab: usize,
    _abort: Option<Arc<AtomicBool>>,
    _model: Model,
}
// SAFETY: calls on one context must not run concurrently: &mut self.
unsafe impl Send for Context {}

impl Context {
    pub fn new(model: &Model, opts: &ContextOptions) -> Result<Context> {
        let mut p = unsafe {
            let mut p = std::mem::MaybeUninit::<sys::brisk_context_params>::zeroed();
            sys::brisk_context_params_init(p.as_mut_ptr());
            p.assume_init()
        };
        p.n_threads = opts.n_threads;
        p.kv_tokens = opts.kv_tokens;
        p.max_batch_tokens = opts.max_batch_tokens;
        p.n_seq_max = opts.n_seq_max;
        if let Some(flag) = &opts.abort {
            p.abort_callback = Some(abort_trampoline);
            p.abort_user_data = Arc::as_ptr(flag) as *mut c_void;
        }
        let mut h = std::ptr::null_mut();
        check(unsafe { sys::brisk_context_create(model.raw(), &p, &mut h) })?;
        Ok(Context {
            raw: h,
            n_vocab: model.n_vocab() as usize,
            _abort: opts.abort.clone(),
            _model: model.clone(),
        })
    }

    /// Runs the model on `batch`; on error the context is as before.
    pub fn decode(&mut self, batch: &Batch) -> Result<()> {
        check(unsafe { sys::brisk_decode(self.raw, batch.raw) })
    }

    /// Entry `i`'s logits of the last decode, borrowed from the context
    /// without a copy (the borrow ends before the next decode).
    pub fn logits(&self, i: i32) -> Option<&[f32]> {
        let p = unsafe { sys::brisk_get_logits(self.raw, i) };
        if p.is_null() {
            None
        } else {
            Some(unsafe { std::slice::from_raw_parts(p, self.n_vocab) })
        }
    }

    pub fn seq_len(&self, seq: i32) -> i32 {
        unsafe { sys::brisk_seq_len(self.raw, seq) }
    }
    pub fn seq_truncate(&mut self, seq: i32, len: i32) -> Result<()> {
        check(unsafe { sys::brisk_seq_truncate(self.raw, seq, len) })
    }
    pub fn seq_free(&mut self, seq: i32) -> Result<()> {
        check(unsafe { sys::brisk_seq_free(self.raw, seq) })
    }
    pub fn kv_stats(&self) -> Result<sys::brisk_kv_stats> {
        let mut s = sys::brisk_kv_stats {
            struct_size: std::mem::size_of::<sys::brisk_kv_stats>() as u32,
            ..Default::default()
        };
        check(unsafe { sys::brisk_context_kv_stats(self.raw, &mut s) })?;
        Ok(s)
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        unsafe { sys::brisk_context_free(self.raw) }
    }
}

/// Tokens for one decode: (token, position, sequence, want logits).
pub struct Batch {
    raw: *mut sys::brisk_batch,
}
unsafe impl Send for Batch {}

impl Batch {
    pub fn new(capacity: usize) -> Result<Batch> {
        let cap = i32::try_from(capacity).map_err(|_| invalid("batch capacity too large"))?;
        let mut h = std::ptr::null_mut();
        check(unsafe { sys::brisk_batch_create(cap, &mut h) })?;
        Ok(Batch { raw: h })
    }
    pub fn add(&mut self, token: i32, pos: i32, seq: i32, logits: bool) -> Result<()> {
        check(unsafe { sys::brisk_batch_add(self.raw, token, pos, seq, logits as c_int) })
    }
    /// Adds tokens at positions start.., asking logits for the last one.
    pub fn add_sequence(&mut self, tokens: &[i32], start: i32, seq: i32) -> Result<()> {
        for (k, &t) in tokens.iter().enumerate() {
            self.add(t, start + k as i32, seq, k + 1 == tokens.len())?;
        }
        Ok(())
    }
    pub fn clear(&mut self) {
        unsafe { sys::brisk_batch_clear(self.raw) }
    }
    pub fn len(&self) -> usize {
        unsafe { sys::brisk_batch_size(self.raw) as usize }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        unsafe { sys::brisk_batch_free(self.raw) }
    }
}

// ---------------------------------------------------------------------------
// Generation
// ---------------------------------------------------------------------------

/// Options of [`Model::generate`] and [`Model::chat`].
#[derive(Clone, Debug)]
pub struct GenerateOptions {
    pub max_tokens: i32,
    pub sampler: SamplerOptions,
    pub stop: Vec<String>,
    pub parse_special: bool,
    /// The chat template family for [`Model::chat`] ("chatml", ...); None:
    /// the one recognized in the model's template.
    pub template: Option<String>,
    pub n_threads: i32,
    /// Set it from another thread to stop the generation (the iterator then
    /// yields one Err with Status::Cancelled).
    pub cancel: Option<Arc<AtomicBool>>,
}

impl Default for GenerateOptions {
    fn default() -> Self {
        GenerateOptions {
            max_tokens: 128,
            sampler: SamplerOptions { temperature: 0.8, top_p: 0.95, ..Default::default() },
            stop: Vec::new(),
            parse_special: false,
            template: None,
            n_threads: 0,
            cancel: None,
        }
    }
}

/// A running generation: yields text pieces until a stop condition.
pub struct Generation {
    ctx: Context,
    sampler: Sampler,
    stopper: *mut sys::brisk_stopper,
    batch: Batch,
    pos: i32,
    logits_at: i32,
    done: bool,
}
unsafe impl Send for Generation {}

impl Generation {
    fn new(model: &Model, tokens: Vec<i32>, opts: &GenerateOptions) -> Result<Generation> {
        if tokens.is_empty() {
            return Err(invalid("empty prompt"));
        }
        let n = tokens.len() as i32;
        let copts = ContextOptions {
            n_threads: opts.n_threads,
            kv_tokens: n + opts.max_tokens.max(1) + 1,
            max_batch_tokens: n,
            n_seq_max: 1,
            abort: opts.cancel.clone(),
        };
        let ctx = Context::new(model, &copts)?;
        let sampler = Sampler::new(model, &opts.sampler)?;
        let stops: Vec<CString> = opts.stop.iter().map(|s| c_string(s)).collect::<Result<_>>()?;
        let stop_ptrs: Vec<*const c_char> = stops.iter().map(|s| s.as_ptr()).collect();
        let mut sp = unsafe {
            let mut p = std::mem::MaybeUninit::<sys::brisk_stopper_params>::zeroed();
            sys::brisk_stopper_params_init(p.as_mut_ptr());
            p.assume_init()
        };
        sp.max_tokens = opts.max_tokens;
        sp.stop_strings = stop_ptrs.as_ptr();
        sp.n_stop_strings = stop_ptrs.len();
        sp.detokenize_flags = sys::BRISK_DETOKENIZE_REPLACE_INVALID;
        let mut stopper = std::ptr::null_mut();
        check(unsafe { sys::brisk_stopper_create(model.raw(), &sp, &mut stopper) })?;
        let batch = match Batch::new(tokens.len()) {
            Ok(b) => b,
            Err(e) => {
                unsafe { sys::brisk_stopper_free(stopper) };
                return Err(e);
            }
        };
        let mut g =
            Generation { ctx, sampler, stopper, batch, pos: n, logits_at: n - 1, done: false };
        g.batch.add_sequence(&tokens, 0, 0)?;
        g.ctx.decode(&g.batch)?;
        Ok(g)
    }

    fn next_piece(&mut self) -> Result<Option<String>> {
        loop {
            let tok = self.sampler.sample(&self.ctx, self.logits_at)?;
            self.sampler.accept(tok)?;
            let (mut text, mut len, mut reason) = (std::ptr::null(), 0usize, 0);
            check(unsafe {
                sys::brisk_stopper_push(self.stopper, tok, &mut text, &mut len, &mut reason)
            })?;
            let mut piece = if len > 0 {
                let bytes = unsafe { std::slice::from_raw_parts(text as *const u8, len) };
                String::from_utf8_lossy(bytes).into_owned()
            } else {
                String::new()
            };
            if reason != 0 {
                self.done = true;
                if reason != 3 {
                    // Ended otherwise than by a stop string: release what was
                    // held back as a possible one.
                    check(unsafe { sys::brisk_stopper_flush(self.stopper, &mut text, &mut len) })?;
                    if len > 0 {
                        let bytes = unsafe { std::slice::from_raw_parts(text as *const u8, len) };
                        piece.push_str(&String::from_utf8_lossy(bytes));
                    }
                }
                return Ok(if piece.is_empty() { None } else { Some(piece) });
            }
            self.batch.clear();
            self.batch.add(tok, self.pos, 0, true)?;
            self.ctx.decode(&self.batch)?;
            self.pos += 1;
            self.logits_at = 0;
            if !piece.is_empty() {
                return Ok(Some(piece));
            }
        }
    }
}

impl Iterator for Generation {
    type Item = Result<String>;
    fn next(&mut self) -> Option<Result<String>> {
        if self.done {
            return None;
        }
        match self.next_piece() {
            Ok(Some(p)) => Some(Ok(p)),
            Ok(None) => None,
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

impl Drop for Generation {
    fn drop(&mut self) {
        unsafe { sys::brisk_stopper_free(self.stopper) }
    }
}

// ---------------------------------------------------------------------------
// Engine
// ---------------------------------------------------------------------------

struct EngineInner {
    raw: *mut sys::brisk_engine,
    _model: Model,
}
// SAFETY: brisk.h: submit and cancel may run from any threads, concurrently
// with each other and with the one thread that steps; the other calls go
// through Engine's &mut self.
unsafe impl Send for EngineInner {}
unsafe impl Sync for EngineInner {}
impl Drop for EngineInner {
    fn drop(&mut self) {
        unsafe { sys::brisk_engine_free(self.raw) }
    }
}

/// Options of [`Engine::new`].
#[derive(Clone, Debug)]
pub struct EngineOptions {
    pub n_threads: i32,
    pub kv_tokens: i32,
    pub max_batch_tokens: i32,
    pub max_running: i32,
    pub prefix_cache: bool,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            n_threads: 0,
            kv_tokens: 0,
            max_batch_tokens: 512,
            max_running: 64,
            prefix_cache: true,
        }
    }
}

/// A request for [`Engine::submit`].
#[derive(Clone, Debug)]
pub struct Request {
    /// Text (tokenized with BOS) or, if `tokens` is not empty, ignored.
    pub prompt: String,
    pub tokens: Vec<i32>,
    pub max_tokens: i32,
    pub sampler: SamplerOptions,
    pub stop: Vec<String>,
    pub stop_at_eog: bool,
    pub priority: i32,
    pub n: i32,
}

impl Request {
    pub fn text(prompt: &str) -> Request {
        Request {
            prompt: prompt.into(),
            tokens: Vec::new(),
            max_tokens: 128,
            sampler: SamplerOptions::default(),
            stop: Vec::new(),
            stop_at_eog: true,
            priority: 0,
            n: 1,
        }
    }
    pub fn tokens(tokens: &[i32]) -> Request {
        Request { tokens: tokens.to_vec(), ..Request::text("") }
    }
}

/// Why a completion finished.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Finish {
    Eog,
    Length,
    Cancelled,
    Error,
    Stop,
    Other(i32),
}

/// One engine event: a token (None for a cancellation or error) with its
/// text, and Some(reason) on the completion's last event.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    pub id: u64,
    pub index: i32,
    pub token: Option<i32>,
    pub text: String,
    pub finished: Option<Finish>,
}

/// What one step did.
pub type StepInfo = sys::brisk_engine_step_info;

fn submit_raw(raw: *mut sys::brisk_engine, r: &Request) -> Result<u64> {
    let mut p = unsafe {
        let mut p = std::mem::MaybeUninit::<sys::brisk_request_params>::zeroed();
        sys::brisk_request_params_init(p.as_mut_ptr());
        p.assume_init()
    };
    let text = c_string(&r.prompt)?;
    if r.tokens.is_empty() {
        p.prompt_text = text.as_ptr();
    } else {
        p.prompt_tokens = r.tokens.as_ptr();
        p.n_prompt_tokens = r.tokens.len();
    }
    let sp = r.sampler.raw();
    p.sampler = &sp;
    p.max_tokens = r.max_tokens;
    p.stop_at_eog = r.stop_at_eog as c_int;
    p.priority = r.priority;
    p.n = r.n;
    let stops: Vec<CString> = r.stop.iter().map(|s| c_string(s)).collect::<Result<_>>()?;
    let ptrs: Vec<*const c_char> = stops.iter().map(|s| s.as_ptr()).collect();
    p.stop = ptrs.as_ptr();
    p.n_stop = ptrs.len();
    let mut id = 0u64;
    check(unsafe { sys::brisk_engine_submit(raw, &p, &mut id) })?;
    Ok(id)
}

/// Serves many requests on one model with continuous batching.
pub struct Engine {
    inner: Arc<EngineInner>,
    buf: Vec<sys::brisk_engine_event>,
    pending: std::collections::VecDeque<Event>,
}

// SAFETY: buf only holds the last poll's events (pointers into the engine's
// own storage, read under &mut self); the engine itself may move threads.
unsafe impl Send for Engine {}

/// Submits and cancels requests of an engine from any thread.
#[derive(Clone)]
pub struct Submitter(Arc<EngineInner>);

impl Submitter {
    pub fn submit(&self, r: &Request) -> Result<u64> {
        submit_raw(self.0.raw, r)
    }
    pub fn cancel(&self, id: u64) -> Result<()> {
        check(unsafe { sys::brisk_engine_cancel(self.0.raw, id) })
    }
}

impl Engine {
    pub fn new(model: &Model, opts: &EngineOptions) -> Result<Engine> {
        let mut p = unsafe {
            let mut p = std::mem::MaybeUninit::<sys::brisk_engine_params>::zeroed();
            sys::brisk_engine_params_init(p.as_mut_ptr());
            p.assume_init()
        };
        p.n_threads = opts.n_threads;
        p.kv_tokens = opts.kv_tokens;
        p.max_batch_tokens = opts.max_batch_tokens;
        p.max_running = opts.max_running;
        p.prefix_cache = opts.prefix_cache as i32;
        let mut h = std::ptr::null_mut();
        check(unsafe { sys::brisk_engine_create(model.raw(), &p, &mut h) })?;
        let empty = unsafe { std::mem::zeroed::<sys::brisk_engine_event>() };
        Ok(Engine {
            inner: Arc::new(EngineInner { raw: h, _model: model.clone() }),
            buf: vec![empty; 256],
            pending: Default::default(),
        })
    }

    /// A handle for submitting and cancelling from other threads.
    pub fn submitter(&self) -> Submitter {
        Submitter(self.inner.clone())
    }

    pub fn submit(&self, r: &Request) -> Result<u64> {
        submit_raw(self.inner.raw, r)
    }

    pub fn cancel(&self, id: u64) -> Result<()> {
        check(unsafe { sys::brisk_engine_cancel(self.inner.raw, id) })
    }

    /// One scheduler iteration.
    pub fn step(&mut self) -> Result<StepInfo> {
        let mut info =
            StepInfo { struct_size: std::mem::size_of::<StepInfo>() as u32, ..Default::default() };
        check(unsafe { sys::brisk_engine_step(self.inner.raw, &mut info) })?;
        Ok(info)
    }

    /// Every queued event, oldest first (texts copied).
    pub fn poll(&mut self) -> Result<Vec<Event>> {
        let mut out: Vec<Event> = self.pending.drain(..).collect();
        out.extend(self.poll_raw()?);
        Ok(out)
    }

    fn poll_raw(&mut self) -> Result<Vec<Event>> {
        let mut out = Vec::new();
        loop {
            let mut n = 0usize;
            check(unsafe {
                sys::brisk_engine_poll(
                    self.inner.raw,
                    self.buf.as_mut_ptr(),
                    self.buf.len(),
                    &mut n,
                )
            })?;
            for ev in &self.buf[..n] {
                let text = if ev.text_len > 0 {
                    let b =
                        unsafe { std::slice::from_raw_parts(ev.text as *const u8, ev.text_len) };
                    String::from_utf8_lossy(b).into_owned()
                } else {
                    String::new()
                };
                let finished = (ev.finished != 0).then(|| match ev.reason {
                    1 => Finish::Eog,
                    2 => Finish::Length,
                    3 => Finish::Cancelled,
                    4 => Finish::Error,
                    5 => Finish::Stop,
                    r => Finish::Other(r),
                });
                out.push(Event {
                    id: ev.id,
                    index: ev.index,
                    token: (ev.token >= 0).then_some(ev.token),
                    text,
                    finished,
                });
            }
            if n < self.buf.len() {
                return Ok(out);
            }
        }
    }

    pub fn stats(&self) -> Result<sys::brisk_engine_counters> {
        let mut c = sys::brisk_engine_counters {
            struct_size: std::mem::size_of::<sys::brisk_engine_counters>() as u32,
            ..Default::default()
        };
        check(unsafe { sys::brisk_engine_stats(self.inner.raw, &mut c) })?;
        Ok(c)
    }

    /// Whether requests are running or waiting.
    pub fn busy(&self) -> Result<bool> {
        let c = self.stats()?;
        Ok(c.n_running + c.n_waiting > 0)
    }

    /// Steps until every request finished, yielding every event.
    pub fn events(&mut self) -> Events<'_> {
        Events { engine: self, queue: Default::default(), only: None, done: false }
    }

    /// Steps until request `id` finished, yielding its events; other
    /// requests' events stay queued for the next poll. Dropping the iterator
    /// before the request finished cancels it.
    pub fn stream(&mut self, id: u64) -> Events<'_> {
        Events { engine: self, queue: Default::default(), only: Some(id), done: false }
    }
}

/// The iterator of [`Engine::events`] and [`Engine::stream`].
pub struct Events<'a> {
    engine: &'a mut Engine,
    queue: std::collections::VecDeque<Event>,
    only: Option<u64>,
    done: bool,
}

impl Drop for Events<'_> {
    fn drop(&mut self) {
        if let (Some(id), false) = (self.only, self.done) {
            let _ = self.engine.cancel(id); // finished meanwhile: a no-op
        }
    }
}

impl Iterator for Events<'_> {
    type Item = Result<Event>;
    fn next(&mut self) -> Option<Result<Event>> {
        loop {
            if self.done {
                return None;
            }
            if let Some(ev) = self.queue.pop_front() {
                if self.only == Some(ev.id) && ev.finished.is_some() {
                    self.done = true;
                }
                return Some(Ok(ev));
            }
            // Events polled earlier (by another stream) that are ours.
            let pending = std::mem::take(&mut self.engine.pending);
            for ev in pending {
                match self.only {
                    Some(id) if ev.id != id => self.engine.pending.push_back(ev),
                    _ => self.queue.push_back(ev),
                }
            }
            if !self.queue.is_empty() {
                continue;
            }
            match self.engine.poll_raw() {
                Ok(evs) => {
                    for ev in evs {
                        match self.only {
                            Some(id) if ev.id != id => self.engine.pending.push_back(ev),
                            _ => self.queue.push_back(ev),
                        }
                    }
                }
                Err(e) => return Some(Err(e)),
            }
            if !self.queue.is_empty() {
                continue;
            }
            match self.engine.busy() {
                Ok(true) => {}
                Ok(false) if self.only.is_none() => return None,
                Ok(false) => {
                    self.done = true;
                    let id = self.only.unwrap_or(0);
                    return Some(Err(Error {
                        status: Status::NotFound,
                        message: format!("request {id} is not running"),
                    }));
                }
                Err(e) => return Some(Err(e)),
            }
            if let Err(e) = self.engine.step() {
                return Some(Err(e));
            }
        }
    }
}

// The README's example is compiled and run as a doc test.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
