//! Raw declarations of brisk's C API, written by hand from `include/brisk.h`
//! (its stable part). `tests/layout.rs` compares every struct's size and field
//! offsets with the C compiler's (the `c_layout` program built by meson).
//!
//! Every struct with a `struct_size` is accepted by any library of the same
//! ABI version: a smaller one (this crate older than the library) gets
//! defaults for the fields it lacks; a larger one needs its unknown tail to be
//! zero. Fill them with the `*_params_init` functions.
#![allow(non_camel_case_types)]

use std::os::raw::{c_char, c_int, c_void};

/// The ABI version these declarations are written for (BRISK_ABI_VERSION).
pub const BRISK_ABI_VERSION: c_int = 0;

pub type brisk_status = c_int;
pub const BRISK_OK: brisk_status = 0;
pub const BRISK_E_INVALID_ARGUMENT: brisk_status = 1;
pub const BRISK_E_OUT_OF_MEMORY: brisk_status = 2;
pub const BRISK_E_IO: brisk_status = 3;
pub const BRISK_E_FORMAT: brisk_status = 4;
pub const BRISK_E_UNSUPPORTED: brisk_status = 5;
pub const BRISK_E_CANCELLED: brisk_status = 6;
pub const BRISK_E_BUFFER_TOO_SMALL: brisk_status = 7;
pub const BRISK_E_NOT_FOUND: brisk_status = 8;
pub const BRISK_E_INVALID_STATE: brisk_status = 9;
pub const BRISK_E_INTERNAL: brisk_status = 10;
pub const BRISK_E_KV_FULL: brisk_status = 11;

pub type brisk_log_level = c_int;
pub type brisk_kv_type = c_int;
pub type brisk_special_token = c_int;
pub type brisk_stop_reason = c_int;
pub type brisk_preempt_mode = c_int;
pub type brisk_finish_reason = c_int;

pub const BRISK_TOKENIZE_ADD_SPECIAL: u32 = 1;
pub const BRISK_TOKENIZE_PARSE_SPECIAL: u32 = 2;
pub const BRISK_DETOKENIZE_REMOVE_SPECIAL: u32 = 1;
pub const BRISK_DETOKENIZE_RENDER_SPECIAL: u32 = 2;
pub const BRISK_DETOKENIZE_CLEAN_SPACES: u32 = 4;
pub const BRISK_DETOKENIZE_REPLACE_INVALID: u32 = 8;

pub type brisk_log_fn =
    Option<unsafe extern "C" fn(level: brisk_log_level, message: *const c_char, user: *mut c_void)>;
pub type brisk_progress_fn =
    Option<unsafe extern "C" fn(fraction: f32, user: *mut c_void) -> c_int>;
pub type brisk_abort_fn = Option<unsafe extern "C" fn(user: *mut c_void) -> c_int>;

#[repr(C)]
pub struct brisk_model {
    _private: [u8; 0],
}
#[repr(C)]
pub struct brisk_context {
    _private: [u8; 0],
}
#[repr(C)]
pub struct brisk_batch {
    _private: [u8; 0],
}
#[repr(C)]
pub struct brisk_sampler {
    _private: [u8; 0],
}
#[repr(C)]
pub struct brisk_stopper {
    _private: [u8; 0],
}
#[repr(C)]
pub struct brisk_engine {
    _private: [u8; 0],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct brisk_model_params {
    pub struct_size: u32,
    pub progress: brisk_progress_fn,
    pub progress_user_data: *mut c_void,
    pub use_mmap: c_int,
    pub vocab_only: c_int,
    pub repack: c_int,
    pub device: *const c_char,
    pub n_gpu_layers: i32,
    pub memory_limit: u64,
    pub tp_size: i32,
    pub pp_size: i32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct brisk_tensor_info {
    pub struct_size: u32,
    pub name: *const c_char,
    pub r#type: *const c_char,
    pub n_dims: u32,
    pub dims: [u64; 4],
    pub n_bytes: u64,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct brisk_context_params {
    pub struct_size: u32,
    pub n_threads: i32,
    pub kv_tokens: i32,
    pub kv_bytes: u64,
    pub block_size: i32,
    pub kv_type: brisk_kv_type,
    pub max_batch_tokens: i32,
    pub n_seq_max: i32,
    pub abort_callback: brisk_abort_fn,
    pub abort_user_data: *mut c_void,
    pub prefix_cache: i32,
    pub memory_limit: u64,
    pub prefix_host_bytes: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct brisk_kv_stats {
    pub struct_size: u32,
    pub block_size: i32,
    pub n_blocks: i32,
    pub n_free_blocks: i32,
    pub bytes_per_block: u64,
    pub kv_bytes: u64,
    pub other_bytes: u64,
    pub n_cached_blocks: i32,
    pub bytes_per_token: u64,
    pub host_tier_bytes: u64,
    pub host_tier_index_bytes: u64,
    pub n_host_tier_blocks: u64,
    pub n_host_tier_hits: u64,
    pub n_host_tier_misses: u64,
    pub n_host_tier_evictions: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct brisk_logit_bias {
    pub token: i32,
    pub bias: f32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct brisk_sampler_params {
    pub struct_size: u32,
    pub seed: u64,
    pub temperature: f32,
    pub top_k: i32,
    pub top_p: f32,
    pub min_p: f32,
    pub typical_p: f32,
    pub penalty_last_n: i32,
    pub repeat_penalty: f32,
    pub frequency_penalty: f32,
    pub presence_penalty: f32,
    pub n_logit_bias: usize,
    pub logit_bias: *const brisk_logit_bias,
    pub n_logprobs: i32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct brisk_stopper_params {
    pub struct_size: u32,
    pub max_tokens: i32,
    pub stop_at_eog: c_int,
    pub stop_tokens: *const i32,
    pub n_stop_tokens: usize,
    pub stop_strings: *const *const c_char,
    pub n_stop_strings: usize,
    pub detokenize_flags: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct brisk_chat_message {
    pub role: *const c_char,
    pub content: *const c_char,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct brisk_engine_params {
    pub struct_size: u32,
    pub n_threads: i32,
    pub kv_tokens: i32,
    pub kv_bytes: u64,
    pub block_size: i32,
    pub kv_type: brisk_kv_type,
    pub max_batch_tokens: i32,
    pub max_running: i32,
    pub prefill_chunk: i32,
    pub slo_ttft_ms: f64,
    pub slo_tpot_ms: f64,
    pub mem_bandwidth_gbs: f64,
    pub peak_gflops: f64,
    pub preempt_mode: brisk_preempt_mode,
    pub swap_bytes: u64,
    pub step_time_budget_us: i64,
    pub prefix_cache: i32,
    pub reserve_blocks: i32,
    pub draft_model: *const brisk_model,
    pub memory_limit: u64,
    pub prefix_host_bytes: u64,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct brisk_request_params {
    pub struct_size: u32,
    pub prompt_tokens: *const i32,
    pub n_prompt_tokens: usize,
    pub prompt_text: *const c_char,
    pub sampler: *const brisk_sampler_params,
    pub max_tokens: i32,
    pub stop_at_eog: c_int,
    pub priority: i32,
    pub user_data: *mut c_void,
    pub stop: *const *const c_char,
    pub n_stop: usize,
    pub logprobs: i32,
    pub n: i32,
    pub spec_n_draft: i32,
    pub spec_ngram_min: i32,
    pub spec_ngram_max: i32,
    pub spec_adaptive: c_int,
    pub spec_draft_model: c_int,
    pub n_sinks: i32,
    pub window: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct brisk_engine_step_info {
    pub struct_size: u32,
    pub n_tokens: i32,
    pub n_decode_tokens: i32,
    pub n_prefill_tokens: i32,
    pub n_running: i32,
    pub n_waiting: i32,
    pub n_finished: i32,
    pub n_preempted: i32,
    pub duration_ns: u64,
    pub n_swapped_out: i32,
    pub n_swapped_in: i32,
    pub predicted_ns: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct brisk_token_logprob {
    pub token: i32,
    pub logprob: f32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct brisk_engine_event {
    pub id: u64,
    pub user_data: *mut c_void,
    pub token: i32,
    pub text: *const c_char,
    pub text_len: usize,
    pub finished: i32,
    pub reason: brisk_finish_reason,
    pub index: i32,
    pub logprob: f32,
    pub top_logprobs: *const brisk_token_logprob,
    pub n_top_logprobs: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct brisk_request_stats {
    pub struct_size: u32,
    pub n_prompt_tokens: i32,
    pub n_generated_tokens: i32,
    pub n_preemptions: i32,
    pub finished: i32,
    pub reason: brisk_finish_reason,
    pub queue_ns: u64,
    pub ttft_ns: u64,
    pub e2e_ns: u64,
    pub tpot_ns: u64,
    pub n_spec_drafted: u64,
    pub n_spec_accepted: u64,
    pub error: [c_char; 256],
    pub n_cached_tokens: i32,
}

// Arrays longer than 32 have no derived Default.
impl Default for brisk_request_stats {
    fn default() -> Self {
        brisk_request_stats {
            struct_size: 0,
            n_prompt_tokens: 0,
            n_generated_tokens: 0,
            n_preemptions: 0,
            finished: 0,
            reason: Default::default(),
            queue_ns: 0,
            ttft_ns: 0,
            e2e_ns: 0,
            tpot_ns: 0,
            n_spec_drafted: 0,
            n_spec_accepted: 0,
            error: [0; 256],
            n_cached_tokens: 0,
        }
    }
}

#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct brisk_engine_counters {
    pub struct_size: u32,
    pub n_submitted: u64,
    pub n_finished: u64,
    pub n_cancelled: u64,
    pub n_prompt_tokens: u64,
    pub n_generated_tokens: u64,
    pub n_computed_tokens: u64,
    pub n_preemptions: u64,
    pub n_steps: u64,
    pub n_running: i32,
    pub n_waiting: i32,
    pub n_kv_blocks: i32,
    pub n_free_kv_blocks: i32,
    pub n_swapped_out: u64,
    pub n_swapped_in: u64,
    pub swap_out_bytes: u64,
    pub swap_in_bytes: u64,
    pub swap_bytes_used: u64,
    pub n_swap_fallbacks: u64,
    pub n_prefix_lookup_tokens: u64,
    pub n_prefix_hit_tokens: u64,
    pub n_spec_drafted: u64,
    pub n_spec_accepted: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct brisk_embed_params {
    pub struct_size: u32,
    pub pooling: i32,
    pub normalize: i32,
    pub max_tokens: i32,
    pub n_threads: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct brisk_embed_request_params {
    pub struct_size: u32,
    pub tokens: *const i32,
    pub n_tokens: usize,
    pub text: *const c_char,
    pub pooling: i32,
    pub normalize: i32,
    pub max_tokens: i32,
    pub priority: i32,
    pub user_data: *mut c_void,
}

extern "C" {
    pub fn brisk_version_string() -> *const c_char;
    pub fn brisk_version_number() -> c_int;
    pub fn brisk_abi_version() -> c_int;
    pub fn brisk_system_info() -> *const c_char;
    pub fn brisk_status_string(status: brisk_status) -> *const c_char;
    pub fn brisk_last_error() -> *const c_char;
    pub fn brisk_set_log_callback(
        fn_: brisk_log_fn,
        user: *mut c_void,
        min_level: brisk_log_level,
    ) -> brisk_status;
    pub fn brisk_memory_allocated() -> u64;

    pub fn brisk_model_params_init(params: *mut brisk_model_params);
    pub fn brisk_model_load(
        path: *const c_char,
        params: *const brisk_model_params,
        out: *mut *mut brisk_model,
    ) -> brisk_status;
    pub fn brisk_model_free(model: *mut brisk_model);
    pub fn brisk_model_architecture(model: *const brisk_model) -> *const c_char;
    pub fn brisk_model_n_vocab(model: *const brisk_model) -> i32;
    pub fn brisk_model_n_ctx_train(model: *const brisk_model) -> i32;
    pub fn brisk_model_n_embd(model: *const brisk_model) -> i32;
    pub fn brisk_embed_params_init(params: *mut brisk_embed_params);
    pub fn brisk_embed(
        model: *const brisk_model,
        params: *const brisk_embed_params,
        texts: *const *const c_char,
        n_texts: i32,
        out: *mut f32,
        out_cap: usize,
    ) -> brisk_status;
    pub fn brisk_embed_request_params_init(params: *mut brisk_embed_request_params);
    pub fn brisk_engine_submit_embed(
        engine: *mut brisk_engine,
        params: *const brisk_embed_request_params,
        id: *mut u64,
    ) -> brisk_status;
    pub fn brisk_engine_embedding(
        engine: *mut brisk_engine,
        id: u64,
        out: *mut f32,
        cap: usize,
        n: *mut usize,
    ) -> brisk_status;
    pub fn brisk_model_n_layer(model: *const brisk_model) -> i32;
    pub fn brisk_model_meta(
        model: *const brisk_model,
        key: *const c_char,
        buf: *mut c_char,
        capacity: usize,
        needed: *mut usize,
    ) -> brisk_status;
    pub fn brisk_model_n_tensors(model: *const brisk_model) -> i64;
    pub fn brisk_model_tensor(
        model: *const brisk_model,
        index: i64,
        info: *mut brisk_tensor_info,
    ) -> brisk_status;

    pub fn brisk_tokenize(
        model: *const brisk_model,
        text: *const c_char,
        len: usize,
        tokens: *mut i32,
        capacity: usize,
        flags: u32,
        n_tokens: *mut usize,
    ) -> brisk_status;
    pub fn brisk_token_to_piece(
        model: *const brisk_model,
        token: i32,
        flags: u32,
        buf: *mut c_char,
        capacity: usize,
        n_bytes: *mut usize,
    ) -> brisk_status;
    pub fn brisk_detokenize(
        model: *const brisk_model,
        tokens: *const i32,
        n_tokens: usize,
        flags: u32,
        buf: *mut c_char,
        capacity: usize,
        n_bytes: *mut usize,
    ) -> brisk_status;
    pub fn brisk_model_special_token(model: *const brisk_model, which: brisk_special_token) -> i32;
    pub fn brisk_token_is_eog(model: *const brisk_model, token: i32) -> c_int;

    pub fn brisk_chat_apply(
        model: *const brisk_model,
        template_name: *const c_char,
        messages: *const brisk_chat_message,
        n_messages: usize,
        add_assistant_prefix: c_int,
        buf: *mut c_char,
        capacity: usize,
        len: *mut usize,
    ) -> brisk_status;
    pub fn brisk_chat_template_name(model: *const brisk_model) -> *const c_char;

    pub fn brisk_context_params_init(params: *mut brisk_context_params);
    pub fn brisk_context_create(
        model: *const brisk_model,
        params: *const brisk_context_params,
        out: *mut *mut brisk_context,
    ) -> brisk_status;
    pub fn brisk_context_free(ctx: *mut brisk_context);
    pub fn brisk_context_kv_stats(
        ctx: *const brisk_context,
        stats: *mut brisk_kv_stats,
    ) -> brisk_status;
    pub fn brisk_batch_create(capacity: i32, out: *mut *mut brisk_batch) -> brisk_status;
    pub fn brisk_batch_free(batch: *mut brisk_batch);
    pub fn brisk_batch_clear(batch: *mut brisk_batch);
    pub fn brisk_batch_size(batch: *const brisk_batch) -> i32;
    pub fn brisk_batch_add(
        batch: *mut brisk_batch,
        token: i32,
        pos: i32,
        seq_id: i32,
        want_logits: c_int,
    ) -> brisk_status;
    pub fn brisk_decode(ctx: *mut brisk_context, batch: *const brisk_batch) -> brisk_status;
    pub fn brisk_get_logits(ctx: *const brisk_context, i: i32) -> *const f32;
    pub fn brisk_seq_len(ctx: *const brisk_context, seq_id: i32) -> i32;
    pub fn brisk_seq_truncate(ctx: *mut brisk_context, seq_id: i32, len: i32) -> brisk_status;
    pub fn brisk_seq_free(ctx: *mut brisk_context, seq_id: i32) -> brisk_status;
    /// Experimental: attention sinks + sliding window (brisk.h).
    pub fn brisk_seq_set_window(
        ctx: *mut brisk_context,
        seq_id: i32,
        n_sinks: i32,
        window: i32,
    ) -> brisk_status;

    pub fn brisk_sampler_params_init(params: *mut brisk_sampler_params);
    pub fn brisk_sampler_create(
        model: *const brisk_model,
        params: *const brisk_sampler_params,
        out: *mut *mut brisk_sampler,
    ) -> brisk_status;
    pub fn brisk_sampler_free(sampler: *mut brisk_sampler);
    pub fn brisk_sampler_sample(
        sampler: *mut brisk_sampler,
        ctx: *const brisk_context,
        i: i32,
        token: *mut i32,
    ) -> brisk_status;
    pub fn brisk_sampler_sample_logits(
        sampler: *mut brisk_sampler,
        logits: *const f32,
        n_vocab: i32,
        token: *mut i32,
    ) -> brisk_status;
    pub fn brisk_sampler_accept(sampler: *mut brisk_sampler, token: i32) -> brisk_status;
    pub fn brisk_sampler_reset(sampler: *mut brisk_sampler);

    pub fn brisk_stopper_params_init(params: *mut brisk_stopper_params);
    pub fn brisk_stopper_create(
        model: *const brisk_model,
        params: *const brisk_stopper_params,
        out: *mut *mut brisk_stopper,
    ) -> brisk_status;
    pub fn brisk_stopper_free(stopper: *mut brisk_stopper);
    pub fn brisk_stopper_push(
        stopper: *mut brisk_stopper,
        token: i32,
        text: *mut *const c_char,
        len: *mut usize,
        reason: *mut brisk_stop_reason,
    ) -> brisk_status;
    pub fn brisk_stopper_flush(
        stopper: *mut brisk_stopper,
        text: *mut *const c_char,
        len: *mut usize,
    ) -> brisk_status;

    pub fn brisk_engine_params_init(params: *mut brisk_engine_params);
    pub fn brisk_engine_create(
        model: *const brisk_model,
        params: *const brisk_engine_params,
        out: *mut *mut brisk_engine,
    ) -> brisk_status;
    pub fn brisk_engine_free(engine: *mut brisk_engine);
    pub fn brisk_request_params_init(params: *mut brisk_request_params);
    pub fn brisk_engine_submit(
        engine: *mut brisk_engine,
        params: *const brisk_request_params,
        id: *mut u64,
    ) -> brisk_status;
    pub fn brisk_engine_cancel(engine: *mut brisk_engine, id: u64) -> brisk_status;
    pub fn brisk_engine_step(
        engine: *mut brisk_engine,
        info: *mut brisk_engine_step_info,
    ) -> brisk_status;
    pub fn brisk_engine_poll(
        engine: *mut brisk_engine,
        events: *mut brisk_engine_event,
        capacity: usize,
        n: *mut usize,
    ) -> brisk_status;
    pub fn brisk_engine_request_stats(
        engine: *mut brisk_engine,
        id: u64,
        stats: *mut brisk_request_stats,
    ) -> brisk_status;
    pub fn brisk_engine_stats(
        engine: *mut brisk_engine,
        stats: *mut brisk_engine_counters,
    ) -> brisk_status;
}
