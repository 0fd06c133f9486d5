/* Where the fields of every public struct with a struct_size lie, for the
 * struct_size rule (abi.h). A field appended to brisk.h must be appended here
 * too; tests/core/test_abi.c fails until it is. */
#include "core/abi.h"

static const brisk_abi_field allocator_fields[] = {
    BRISK_ABI_FIELD(brisk_allocator, struct_size), BRISK_ABI_FIELD(brisk_allocator, malloc_fn),
    BRISK_ABI_FIELD(brisk_allocator, realloc_fn),  BRISK_ABI_FIELD(brisk_allocator, free_fn),
    BRISK_ABI_FIELD(brisk_allocator, user_data),
};
const brisk_abi_layout brisk_abi_allocator = {"brisk_allocator", sizeof(brisk_allocator),
                                              allocator_fields,
                                              sizeof allocator_fields / sizeof *allocator_fields};

static const brisk_abi_field model_params_fields[] = {
    BRISK_ABI_FIELD(brisk_model_params, struct_size),
    BRISK_ABI_FIELD(brisk_model_params, progress),
    BRISK_ABI_FIELD(brisk_model_params, progress_user_data),
    BRISK_ABI_FIELD(brisk_model_params, use_mmap),
    BRISK_ABI_FIELD(brisk_model_params, vocab_only),
    BRISK_ABI_FIELD(brisk_model_params, repack),
    BRISK_ABI_FIELD(brisk_model_params, device),
    BRISK_ABI_FIELD(brisk_model_params, n_gpu_layers),
    BRISK_ABI_FIELD(brisk_model_params, memory_limit),
    BRISK_ABI_FIELD(brisk_model_params, tp_size),
    BRISK_ABI_FIELD(brisk_model_params, pp_size),
};
const brisk_abi_layout brisk_abi_model_params = {
    "brisk_model_params", sizeof(brisk_model_params), model_params_fields,
    sizeof model_params_fields / sizeof *model_params_fields};

static const brisk_abi_field tensor_info_fields[] = {
    BRISK_ABI_FIELD(brisk_tensor_info, struct_size), BRISK_ABI_FIELD(brisk_tensor_info, name),
    BRISK_ABI_FIELD(brisk_tensor_info, type),        BRISK_ABI_FIELD(brisk_tensor_info, n_dims),
    BRISK_ABI_FIELD(brisk_tensor_info, dims),        BRISK_ABI_FIELD(brisk_tensor_info, n_bytes),
};
const brisk_abi_layout brisk_abi_tensor_info = {
    "brisk_tensor_info", sizeof(brisk_tensor_info), tensor_info_fields,
    sizeof tensor_info_fields / sizeof *tensor_info_fields};

static const brisk_abi_field context_params_fields[] = {
    BRISK_ABI_FIELD(brisk_context_params, struct_size),
    BRISK_ABI_FIELD(brisk_context_params, n_threads),
    BRISK_ABI_FIELD(brisk_context_params, kv_tokens),
    BRISK_ABI_FIELD(brisk_context_params, kv_bytes),
    BRISK_ABI_FIELD(brisk_context_params, block_size),
    BRISK_ABI_FIELD(brisk_context_params, kv_type),
    BRISK_ABI_FIELD(brisk_context_params, max_batch_tokens),
    BRISK_ABI_FIELD(brisk_context_params, n_seq_max),
    BRISK_ABI_FIELD(brisk_context_params, abort_callback),
    BRISK_ABI_FIELD(brisk_context_params, abort_user_data),
    BRISK_ABI_FIELD(brisk_context_params, prefix_cache),
    BRISK_ABI_FIELD(brisk_context_params, memory_limit),
    BRISK_ABI_FIELD(brisk_context_params, prefix_host_bytes),
};
const brisk_abi_layout brisk_abi_context_params = {
    "brisk_context_params", sizeof(brisk_context_params), context_params_fields,
    sizeof context_params_fields / sizeof *context_params_fields};

static const brisk_abi_field kv_stats_fields[] = {
    BRISK_ABI_FIELD(brisk_kv_stats, struct_size),
    BRISK_ABI_FIELD(brisk_kv_stats, block_size),
    BRISK_ABI_FIELD(brisk_kv_stats, n_blocks),
    BRISK_ABI_FIELD(brisk_kv_stats, n_free_blocks),
    BRISK_ABI_FIELD(brisk_kv_stats, bytes_per_block),
    BRISK_ABI_FIELD(brisk_kv_stats, kv_bytes),
    BRISK_ABI_FIELD(brisk_kv_stats, other_bytes),
    BRISK_ABI_FIELD(brisk_kv_stats, n_cached_blocks),
    BRISK_ABI_FIELD(brisk_kv_stats, bytes_per_token),
    BRISK_ABI_FIELD(brisk_kv_stats, host_tier_bytes),
    BRISK_ABI_FIELD(brisk_kv_stats, host_tier_index_bytes),
    BRISK_ABI_FIELD(brisk_kv_stats, n_host_tier_blocks),
    BRISK_ABI_FIELD(brisk_kv_stats, n_host_tier_hits),
    BRISK_ABI_FIELD(brisk_kv_stats, n_host_tier_misses),
    BRISK_ABI_FIELD(brisk_kv_stats, n_host_tier_evictions),
};
const brisk_abi_layout brisk_abi_kv_stats = {"brisk_kv_stats", sizeof(brisk_kv_stats),
                                             kv_stats_fields,
                                             sizeof kv_stats_fields / sizeof *kv_stats_fields};

static const brisk_abi_field sampler_params_fields[] = {
    BRISK_ABI_FIELD(brisk_sampler_params, struct_size),
    BRISK_ABI_FIELD(brisk_sampler_params, seed),
    BRISK_ABI_FIELD(brisk_sampler_params, temperature),
    BRISK_ABI_FIELD(brisk_sampler_params, top_k),
    BRISK_ABI_FIELD(brisk_sampler_params, top_p),
    BRISK_ABI_FIELD(brisk_sampler_params, min_p),
    BRISK_ABI_FIELD(brisk_sampler_params, typical_p),
    BRISK_ABI_FIELD(brisk_sampler_params, penalty_last_n),
    BRISK_ABI_FIELD(brisk_sampler_params, repeat_penalty),
    BRISK_ABI_FIELD(brisk_sampler_params, frequency_penalty),
    BRISK_ABI_FIELD(brisk_sampler_params, presence_penalty),
    BRISK_ABI_FIELD(brisk_sampler_params, n_logit_bias),
    BRISK_ABI_FIELD(brisk_sampler_params, logit_bias),
    BRISK_ABI_FIELD(brisk_sampler_params, n_logprobs),
};
const brisk_abi_layout brisk_abi_sampler_params = {
    "brisk_sampler_params", sizeof(brisk_sampler_params), sampler_params_fields,
    sizeof sampler_params_fields / sizeof *sampler_params_fields};

static const brisk_abi_field stopper_params_fields[] = {
    BRISK_ABI_FIELD(brisk_stopper_params, struct_size),
    BRISK_ABI_FIELD(brisk_stopper_params, max_tokens),
    BRISK_ABI_FIELD(brisk_stopper_params, stop_at_eog),
    BRISK_ABI_FIELD(brisk_stopper_params, stop_tokens),
    BRISK_ABI_FIELD(brisk_stopper_params, n_stop_tokens),
    BRISK_ABI_FIELD(brisk_stopper_params, stop_strings),
    BRISK_ABI_FIELD(brisk_stopper_params, n_stop_strings),
    BRISK_ABI_FIELD(brisk_stopper_params, detokenize_flags),
};
const brisk_abi_layout brisk_abi_stopper_params = {
    "brisk_stopper_params", sizeof(brisk_stopper_params), stopper_params_fields,
    sizeof stopper_params_fields / sizeof *stopper_params_fields};

static const brisk_abi_field spec_params_fields[] = {
    BRISK_ABI_FIELD(brisk_spec_params, struct_size),
    BRISK_ABI_FIELD(brisk_spec_params, drafter),
    BRISK_ABI_FIELD(brisk_spec_params, n_draft),
    BRISK_ABI_FIELD(brisk_spec_params, adaptive),
    BRISK_ABI_FIELD(brisk_spec_params, n_draft_min),
    BRISK_ABI_FIELD(brisk_spec_params, ngram_min),
    BRISK_ABI_FIELD(brisk_spec_params, ngram_max),
    BRISK_ABI_FIELD(brisk_spec_params, draft_model),
    BRISK_ABI_FIELD(brisk_spec_params, draft_context_params),
};
const brisk_abi_layout brisk_abi_spec_params = {
    "brisk_spec_params", sizeof(brisk_spec_params), spec_params_fields,
    sizeof spec_params_fields / sizeof *spec_params_fields};

static const brisk_abi_field spec_stats_fields[] = {
    BRISK_ABI_FIELD(brisk_spec_stats, struct_size),
    BRISK_ABI_FIELD(brisk_spec_stats, n_rounds),
    BRISK_ABI_FIELD(brisk_spec_stats, n_drafted),
    BRISK_ABI_FIELD(brisk_spec_stats, n_accepted),
    BRISK_ABI_FIELD(brisk_spec_stats, n_produced),
    BRISK_ABI_FIELD(brisk_spec_stats, n_draft_decodes),
};
const brisk_abi_layout brisk_abi_spec_stats = {
    "brisk_spec_stats", sizeof(brisk_spec_stats), spec_stats_fields,
    sizeof spec_stats_fields / sizeof *spec_stats_fields};

static const brisk_abi_field engine_params_fields[] = {
    BRISK_ABI_FIELD(brisk_engine_params, struct_size),
    BRISK_ABI_FIELD(brisk_engine_params, n_threads),
    BRISK_ABI_FIELD(brisk_engine_params, kv_tokens),
    BRISK_ABI_FIELD(brisk_engine_params, kv_bytes),
    BRISK_ABI_FIELD(brisk_engine_params, block_size),
    BRISK_ABI_FIELD(brisk_engine_params, kv_type),
    BRISK_ABI_FIELD(brisk_engine_params, max_batch_tokens),
    BRISK_ABI_FIELD(brisk_engine_params, max_running),
    BRISK_ABI_FIELD(brisk_engine_params, prefill_chunk),
    BRISK_ABI_FIELD(brisk_engine_params, slo_ttft_ms),
    BRISK_ABI_FIELD(brisk_engine_params, slo_tpot_ms),
    BRISK_ABI_FIELD(brisk_engine_params, mem_bandwidth_gbs),
    BRISK_ABI_FIELD(brisk_engine_params, peak_gflops),
    BRISK_ABI_FIELD(brisk_engine_params, preempt_mode),
    BRISK_ABI_FIELD(brisk_engine_params, swap_bytes),
    BRISK_ABI_FIELD(brisk_engine_params, step_time_budget_us),
    BRISK_ABI_FIELD(brisk_engine_params, prefix_cache),
    BRISK_ABI_FIELD(brisk_engine_params, reserve_blocks),
    BRISK_ABI_FIELD(brisk_engine_params, draft_model),
    BRISK_ABI_FIELD(brisk_engine_params, memory_limit),
    BRISK_ABI_FIELD(brisk_engine_params, prefix_host_bytes),
};
const brisk_abi_layout brisk_abi_engine_params = {
    "brisk_engine_params", sizeof(brisk_engine_params), engine_params_fields,
    sizeof engine_params_fields / sizeof *engine_params_fields};

static const brisk_abi_field request_params_fields[] = {
    BRISK_ABI_FIELD(brisk_request_params, struct_size),
    BRISK_ABI_FIELD(brisk_request_params, prompt_tokens),
    BRISK_ABI_FIELD(brisk_request_params, n_prompt_tokens),
    BRISK_ABI_FIELD(brisk_request_params, prompt_text),
    BRISK_ABI_FIELD(brisk_request_params, sampler),
    BRISK_ABI_FIELD(brisk_request_params, max_tokens),
    BRISK_ABI_FIELD(brisk_request_params, stop_at_eog),
    BRISK_ABI_FIELD(brisk_request_params, priority),
    BRISK_ABI_FIELD(brisk_request_params, user_data),
    BRISK_ABI_FIELD(brisk_request_params, stop),
    BRISK_ABI_FIELD(brisk_request_params, n_stop),
    BRISK_ABI_FIELD(brisk_request_params, logprobs),
    BRISK_ABI_FIELD(brisk_request_params, n),
    BRISK_ABI_FIELD(brisk_request_params, spec_n_draft),
    BRISK_ABI_FIELD(brisk_request_params, spec_ngram_min),
    BRISK_ABI_FIELD(brisk_request_params, spec_ngram_max),
    BRISK_ABI_FIELD(brisk_request_params, spec_adaptive),
    BRISK_ABI_FIELD(brisk_request_params, spec_draft_model),
    BRISK_ABI_FIELD(brisk_request_params, n_sinks),
    BRISK_ABI_FIELD(brisk_request_params, window),
};
const brisk_abi_layout brisk_abi_request_params = {
    "brisk_request_params", sizeof(brisk_request_params), request_params_fields,
    sizeof request_params_fields / sizeof *request_params_fields};

static const brisk_abi_field engine_step_info_fields[] = {
    BRISK_ABI_FIELD(brisk_engine_step_info, struct_size),
    BRISK_ABI_FIELD(brisk_engine_step_info, n_tokens),
    BRISK_ABI_FIELD(brisk_engine_step_info, n_decode_tokens),
    BRISK_ABI_FIELD(brisk_engine_step_info, n_prefill_tokens),
    BRISK_ABI_FIELD(brisk_engine_step_info, n_running),
    BRISK_ABI_FIELD(brisk_engine_step_info, n_waiting),
    BRISK_ABI_FIELD(brisk_engine_step_info, n_finished),
    BRISK_ABI_FIELD(brisk_engine_step_info, n_preempted),
    BRISK_ABI_FIELD(brisk_engine_step_info, duration_ns),
    BRISK_ABI_FIELD(brisk_engine_step_info, n_swapped_out),
    BRISK_ABI_FIELD(brisk_engine_step_info, n_swapped_in),
    BRISK_ABI_FIELD(brisk_engine_step_info, predicted_ns),
};
const brisk_abi_layout brisk_abi_engine_step_info = {
    "brisk_engine_step_info", sizeof(brisk_engine_step_info), engine_step_info_fields,
    sizeof engine_step_info_fields / sizeof *engine_step_info_fields};

static const brisk_abi_field request_stats_fields[] = {
    BRISK_ABI_FIELD(brisk_request_stats, struct_size),
    BRISK_ABI_FIELD(brisk_request_stats, n_prompt_tokens),
    BRISK_ABI_FIELD(brisk_request_stats, n_generated_tokens),
    BRISK_ABI_FIELD(brisk_request_stats, n_preemptions),
    BRISK_ABI_FIELD(brisk_request_stats, finished),
    BRISK_ABI_FIELD(brisk_request_stats, reason),
    BRISK_ABI_FIELD(brisk_request_stats, queue_ns),
    BRISK_ABI_FIELD(brisk_request_stats, ttft_ns),
    BRISK_ABI_FIELD(brisk_request_stats, e2e_ns),
    BRISK_ABI_FIELD(brisk_request_stats, tpot_ns),
    BRISK_ABI_FIELD(brisk_request_stats, n_spec_drafted),
    BRISK_ABI_FIELD(brisk_request_stats, n_spec_accepted),
    BRISK_ABI_FIELD(brisk_request_stats, error),
    BRISK_ABI_FIELD(brisk_request_stats, n_cached_tokens),
};
const brisk_abi_layout brisk_abi_request_stats = {
    "brisk_request_stats", sizeof(brisk_request_stats), request_stats_fields,
    sizeof request_stats_fields / sizeof *request_stats_fields};

static const brisk_abi_field engine_counters_fields[] = {
    BRISK_ABI_FIELD(brisk_engine_counters, struct_size),
    BRISK_ABI_FIELD(brisk_engine_counters, n_submitted),
    BRISK_ABI_FIELD(brisk_engine_counters, n_finished),
    BRISK_ABI_FIELD(brisk_engine_counters, n_cancelled),
    BRISK_ABI_FIELD(brisk_engine_counters, n_prompt_tokens),
    BRISK_ABI_FIELD(brisk_engine_counters, n_generated_tokens),
    BRISK_ABI_FIELD(brisk_engine_counters, n_computed_tokens),
    BRISK_ABI_FIELD(brisk_engine_counters, n_preemptions),
    BRISK_ABI_FIELD(brisk_engine_counters, n_steps),
    BRISK_ABI_FIELD(brisk_engine_counters, n_running),
    BRISK_ABI_FIELD(brisk_engine_counters, n_waiting),
    BRISK_ABI_FIELD(brisk_engine_counters, n_kv_blocks),
    BRISK_ABI_FIELD(brisk_engine_counters, n_free_kv_blocks),
    BRISK_ABI_FIELD(brisk_engine_counters, n_swapped_out),
    BRISK_ABI_FIELD(brisk_engine_counters, n_swapped_in),
    BRISK_ABI_FIELD(brisk_engine_counters, swap_out_bytes),
    BRISK_ABI_FIELD(brisk_engine_counters, swap_in_bytes),
    BRISK_ABI_FIELD(brisk_engine_counters, swap_bytes_used),
    BRISK_ABI_FIELD(brisk_engine_counters, n_swap_fallbacks),
    BRISK_ABI_FIELD(brisk_engine_counters, n_prefix_lookup_tokens),
    BRISK_ABI_FIELD(brisk_engine_counters, n_prefix_hit_tokens),
    BRISK_ABI_FIELD(brisk_engine_counters, n_spec_drafted),
    BRISK_ABI_FIELD(brisk_engine_counters, n_spec_accepted),
};
const brisk_abi_layout brisk_abi_engine_counters = {
    "brisk_engine_counters", sizeof(brisk_engine_counters), engine_counters_fields,
    sizeof engine_counters_fields / sizeof *engine_counters_fields};

static const brisk_abi_field engine_metrics_fields[] = {
    BRISK_ABI_FIELD(brisk_engine_metrics, struct_size),
    BRISK_ABI_FIELD(brisk_engine_metrics, n_completed),
    BRISK_ABI_FIELD(brisk_engine_metrics, n_aborted),
    BRISK_ABI_FIELD(brisk_engine_metrics, queue),
    BRISK_ABI_FIELD(brisk_engine_metrics, ttft),
    BRISK_ABI_FIELD(brisk_engine_metrics, tpot),
    BRISK_ABI_FIELD(brisk_engine_metrics, e2e),
    BRISK_ABI_FIELD(brisk_engine_metrics, window_s),
    BRISK_ABI_FIELD(brisk_engine_metrics, output_tokens_per_s),
    BRISK_ABI_FIELD(brisk_engine_metrics, total_tokens_per_s),
    BRISK_ABI_FIELD(brisk_engine_metrics, requests_per_s),
    BRISK_ABI_FIELD(brisk_engine_metrics, n_good),
    BRISK_ABI_FIELD(brisk_engine_metrics, goodput_requests_per_s),
    BRISK_ABI_FIELD(brisk_engine_metrics, goodput_fraction),
    BRISK_ABI_FIELD(brisk_engine_metrics, kv_utilization),
    BRISK_ABI_FIELD(brisk_engine_metrics, kv_utilization_mean),
    BRISK_ABI_FIELD(brisk_engine_metrics, n_preemptions),
    BRISK_ABI_FIELD(brisk_engine_metrics, n_busy_steps),
    BRISK_ABI_FIELD(brisk_engine_metrics, busy_s),
    BRISK_ABI_FIELD(brisk_engine_metrics, bytes),
    BRISK_ABI_FIELD(brisk_engine_metrics, flops),
    BRISK_ABI_FIELD(brisk_engine_metrics, achieved_gbs),
    BRISK_ABI_FIELD(brisk_engine_metrics, achieved_gflops),
    BRISK_ABI_FIELD(brisk_engine_metrics, mbu),
    BRISK_ABI_FIELD(brisk_engine_metrics, mfu),
    BRISK_ABI_FIELD(brisk_engine_metrics, n_prefix_lookup_tokens),
    BRISK_ABI_FIELD(brisk_engine_metrics, n_prefix_hit_tokens),
    BRISK_ABI_FIELD(brisk_engine_metrics, prefix_hit_rate),
    BRISK_ABI_FIELD(brisk_engine_metrics, host_tier_bytes),
    BRISK_ABI_FIELD(brisk_engine_metrics, host_tier_index_bytes),
    BRISK_ABI_FIELD(brisk_engine_metrics, n_host_tier_blocks),
    BRISK_ABI_FIELD(brisk_engine_metrics, n_host_tier_hits),
    BRISK_ABI_FIELD(brisk_engine_metrics, n_host_tier_misses),
    BRISK_ABI_FIELD(brisk_engine_metrics, n_host_tier_evictions),
    BRISK_ABI_FIELD(brisk_engine_metrics, n_embeddings),
    BRISK_ABI_FIELD(brisk_engine_metrics, n_embed_tokens),
    BRISK_ABI_FIELD(brisk_engine_metrics, embed_e2e),
};
const brisk_abi_layout brisk_abi_engine_metrics = {
    "brisk_engine_metrics", sizeof(brisk_engine_metrics), engine_metrics_fields,
    sizeof engine_metrics_fields / sizeof *engine_metrics_fields};

static const brisk_abi_field device_props_fields[] = {
    BRISK_ABI_FIELD(brisk_device_props, struct_size),
    BRISK_ABI_FIELD(brisk_device_props, kind),
    BRISK_ABI_FIELD(brisk_device_props, index),
    BRISK_ABI_FIELD(brisk_device_props, compute_major),
    BRISK_ABI_FIELD(brisk_device_props, compute_minor),
    BRISK_ABI_FIELD(brisk_device_props, total_memory),
    BRISK_ABI_FIELD(brisk_device_props, free_memory),
    BRISK_ABI_FIELD(brisk_device_props, id),
    BRISK_ABI_FIELD(brisk_device_props, name),
};
const brisk_abi_layout brisk_abi_device_props = {
    "brisk_device_props", sizeof(brisk_device_props), device_props_fields,
    sizeof device_props_fields / sizeof *device_props_fields};

static const brisk_abi_field model_reader_fields[] = {
    BRISK_ABI_FIELD(brisk_model_reader, struct_size),
    BRISK_ABI_FIELD(brisk_model_reader, size),
    BRISK_ABI_FIELD(brisk_model_reader, read),
    BRISK_ABI_FIELD(brisk_model_reader, user_data),
};
const brisk_abi_layout brisk_abi_model_reader = {
    "brisk_model_reader", sizeof(brisk_model_reader), model_reader_fields,
    sizeof model_reader_fields / sizeof *model_reader_fields};

static const brisk_abi_field constraint_params_fields[] = {
    BRISK_ABI_FIELD(brisk_constraint_params, struct_size),
    BRISK_ABI_FIELD(brisk_constraint_params, kind),
    BRISK_ABI_FIELD(brisk_constraint_params, text),
    BRISK_ABI_FIELD(brisk_constraint_params, root),
};
const brisk_abi_layout brisk_abi_constraint_params = {
    "brisk_constraint_params", sizeof(brisk_constraint_params), constraint_params_fields,
    sizeof constraint_params_fields / sizeof *constraint_params_fields};

static const brisk_abi_field memory_estimate_fields[] = {
    BRISK_ABI_FIELD(brisk_memory_estimate, struct_size),
    BRISK_ABI_FIELD(brisk_memory_estimate, weights),
    BRISK_ABI_FIELD(brisk_memory_estimate, mapped),
    BRISK_ABI_FIELD(brisk_memory_estimate, model_other),
    BRISK_ABI_FIELD(brisk_memory_estimate, kv),
    BRISK_ABI_FIELD(brisk_memory_estimate, buffers),
    BRISK_ABI_FIELD(brisk_memory_estimate, total),
};
const brisk_abi_layout brisk_abi_memory_estimate = {
    "brisk_memory_estimate", sizeof(brisk_memory_estimate), memory_estimate_fields,
    sizeof memory_estimate_fields / sizeof *memory_estimate_fields};

static const brisk_abi_field embed_params_fields[] = {
    BRISK_ABI_FIELD(brisk_embed_params, struct_size),
    BRISK_ABI_FIELD(brisk_embed_params, pooling),
    BRISK_ABI_FIELD(brisk_embed_params, normalize),
    BRISK_ABI_FIELD(brisk_embed_params, max_tokens),
    BRISK_ABI_FIELD(brisk_embed_params, n_threads),
};
const brisk_abi_layout brisk_abi_embed_params = {
    "brisk_embed_params", sizeof(brisk_embed_params), embed_params_fields,
    sizeof embed_params_fields / sizeof *embed_params_fields};

static const brisk_abi_field embed_request_params_fields[] = {
    BRISK_ABI_FIELD(brisk_embed_request_params, struct_size),
    BRISK_ABI_FIELD(brisk_embed_request_params, tokens),
    BRISK_ABI_FIELD(brisk_embed_request_params, n_tokens),
    BRISK_ABI_FIELD(brisk_embed_request_params, text),
    BRISK_ABI_FIELD(brisk_embed_request_params, pooling),
    BRISK_ABI_FIELD(brisk_embed_request_params, normalize),
    BRISK_ABI_FIELD(brisk_embed_request_params, max_tokens),
    BRISK_ABI_FIELD(brisk_embed_request_params, priority),
    BRISK_ABI_FIELD(brisk_embed_request_params, user_data),
};
const brisk_abi_layout brisk_abi_embed_request_params = {
    "brisk_embed_request_params", sizeof(brisk_embed_request_params), embed_request_params_fields,
    sizeof embed_request_params_fields / sizeof *embed_request_params_fields};

const brisk_abi_layout *const brisk_abi_layouts[] = {
    &brisk_abi_embed_params,    &brisk_abi_memory_estimate,  &brisk_abi_constraint_params,
    &brisk_abi_device_props,    &brisk_abi_model_reader,     &brisk_abi_allocator,
    &brisk_abi_model_params,    &brisk_abi_tensor_info,      &brisk_abi_context_params,
    &brisk_abi_kv_stats,        &brisk_abi_sampler_params,   &brisk_abi_stopper_params,
    &brisk_abi_spec_params,     &brisk_abi_spec_stats,       &brisk_abi_engine_params,
    &brisk_abi_request_params,  &brisk_abi_engine_step_info, &brisk_abi_request_stats,
    &brisk_abi_engine_counters, &brisk_abi_engine_metrics,   &brisk_abi_embed_request_params,
};
const size_t brisk_abi_n_layouts = sizeof brisk_abi_layouts / sizeof *brisk_abi_layouts;
