"""ctypes declarations of brisk.h (the stable part the bindings use).

The struct layouts here are checked against the C compiler's by the tests
(tests/test_brisk.py runs bindings/tests/c_layout). Fields are only ever
appended in brisk.h, and every struct with a struct_size is accepted by any
library version (smaller: defaults; larger: an all-zero tail), so these
declarations keep working with newer libraries of the same ABI version.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char, c_char_p, c_double, c_float, c_int, c_int32,
                    c_int64, c_size_t, c_uint32, c_uint64, c_void_p)

ABI_VERSION = 0

c_status = c_int

PROGRESS_FN = CFUNCTYPE(c_int, c_float, c_void_p)
ABORT_FN = CFUNCTYPE(c_int, c_void_p)
LOG_FN = CFUNCTYPE(None, c_int, c_char_p, c_void_p)


class ModelParams(Structure):
    _fields_ = [("struct_size", c_uint32), ("progress", PROGRESS_FN),
                ("progress_user_data", c_void_p), ("use_mmap", c_int), ("vocab_only", c_int),
                ("repack", c_int), ("device", c_char_p), ("n_gpu_layers", c_int32),
                ("memory_limit", c_uint64),
                ("tp_size", c_int32), ("pp_size", c_int32)]


class TensorInfo(Structure):
    _fields_ = [("struct_size", c_uint32), ("name", c_char_p), ("type", c_char_p),
                ("n_dims", c_uint32), ("dims", c_uint64 * 4), ("n_bytes", c_uint64)]


class ContextParams(Structure):
    _fields_ = [("struct_size", c_uint32), ("n_threads", c_int32), ("kv_tokens", c_int32),
                ("kv_bytes", c_uint64), ("block_size", c_int32), ("kv_type", c_int),
                ("max_batch_tokens", c_int32), ("n_seq_max", c_int32),
                ("abort_callback", ABORT_FN), ("abort_user_data", c_void_p),
                ("prefix_cache", c_int32), ("memory_limit", c_uint64),
                ("prefix_host_bytes", c_uint64)]


class KVStats(Structure):
    _fields_ = [("struct_size", c_uint32), ("block_size", c_int32), ("n_blocks", c_int32),
                ("n_free_blocks", c_int32), ("bytes_per_block", c_uint64), ("kv_bytes", c_uint64),
                ("other_bytes", c_uint64), ("n_cached_blocks", c_int32),
                ("bytes_per_token", c_uint64), ("host_tier_bytes", c_uint64),
                ("host_tier_index_bytes", c_uint64), ("n_host_tier_blocks", c_uint64),
                ("n_host_tier_hits", c_uint64), ("n_host_tier_misses", c_uint64),
                ("n_host_tier_evictions", c_uint64)]


class LogitBias(Structure):
    _fields_ = [("token", c_int32), ("bias", c_float)]


class SamplerParams(Structure):
    _fields_ = [("struct_size", c_uint32), ("seed", c_uint64), ("temperature", c_float),
                ("top_k", c_int32), ("top_p", c_float), ("min_p", c_float),
                ("typical_p", c_float), ("penalty_last_n", c_int32), ("repeat_penalty", c_float),
                ("frequency_penalty", c_float), ("presence_penalty", c_float),
                ("n_logit_bias", c_size_t), ("logit_bias", POINTER(LogitBias)),
                ("n_logprobs", c_int32)]


class StopperParams(Structure):
    _fields_ = [("struct_size", c_uint32), ("max_tokens", c_int32), ("stop_at_eog", c_int),
                ("stop_tokens", POINTER(c_int32)), ("n_stop_tokens", c_size_t),
                ("stop_strings", POINTER(c_char_p)), ("n_stop_strings", c_size_t),
                ("detokenize_flags", c_uint32)]


class ChatMessage(Structure):
    _fields_ = [("role", c_char_p), ("content", c_char_p)]


class EngineParams(Structure):
    _fields_ = [("struct_size", c_uint32), ("n_threads", c_int32), ("kv_tokens", c_int32),
                ("kv_bytes", c_uint64), ("block_size", c_int32), ("kv_type", c_int),
                ("max_batch_tokens", c_int32), ("max_running", c_int32),
                ("prefill_chunk", c_int32), ("slo_ttft_ms", c_double), ("slo_tpot_ms", c_double),
                ("mem_bandwidth_gbs", c_double), ("peak_gflops", c_double),
                ("preempt_mode", c_int), ("swap_bytes", c_uint64),
                ("step_time_budget_us", c_int64), ("prefix_cache", c_int32),
                ("reserve_blocks", c_int32), ("draft_model", c_void_p),
                ("memory_limit", c_uint64), ("prefix_host_bytes", c_uint64)]


class RequestParams(Structure):
    _fields_ = [("struct_size", c_uint32), ("prompt_tokens", POINTER(c_int32)),
                ("n_prompt_tokens", c_size_t), ("prompt_text", c_char_p),
                ("sampler", POINTER(SamplerParams)), ("max_tokens", c_int32),
                ("stop_at_eog", c_int), ("priority", c_int32), ("user_data", c_void_p),
                ("stop", POINTER(c_char_p)), ("n_stop", c_size_t), ("logprobs", c_int32),
                ("n", c_int32), ("spec_n_draft", c_int32), ("spec_ngram_min", c_int32),
                ("spec_ngram_max", c_int32), ("spec_adaptive", c_int),
                ("spec_draft_model", c_int), ("n_sinks", c_int32), ("window", c_int32)]


class StepInfo(Structure):
    _fields_ = [("struct_size", c_uint32), ("n_tokens", c_int32), ("n_decode_tokens", c_int32),
                ("n_prefill_tokens", c_int32), ("n_running", c_int32), ("n_waiting", c_int32),
                ("n_finished", c_int32), ("n_preempted", c_int32), ("duration_ns", c_uint64),
                ("n_swapped_out", c_int32), ("n_swapped_in", c_int32),
                ("predicted_ns", c_uint64)]


class TokenLogprob(Structure):
    _fields_ = [("token", c_int32), ("logprob", c_float)]


class EngineEvent(Structure):
    _fields_ = [("id", c_uint64), ("user_data", c_void_p), ("token", c_int32),
                ("text", c_void_p), ("text_len", c_size_t), ("finished", c_int32),
                ("reason", c_int), ("index", c_int32), ("logprob", c_float),
                ("top_logprobs", POINTER(TokenLogprob)), ("n_top_logprobs", c_int32)]


class RequestStats(Structure):
    _fields_ = [("struct_size", c_uint32), ("n_prompt_tokens", c_int32),
                ("n_generated_tokens", c_int32), ("n_preemptions", c_int32),
                ("finished", c_int32), ("reason", c_int), ("queue_ns", c_uint64),
                ("ttft_ns", c_uint64), ("e2e_ns", c_uint64), ("tpot_ns", c_uint64),
                ("n_spec_drafted", c_uint64), ("n_spec_accepted", c_uint64),
                ("error", c_char * 256), ("n_cached_tokens", c_int32)]


class EngineCounters(Structure):
    _fields_ = [("struct_size", c_uint32), ("n_submitted", c_uint64), ("n_finished", c_uint64),
                ("n_cancelled", c_uint64), ("n_prompt_tokens", c_uint64),
                ("n_generated_tokens", c_uint64), ("n_computed_tokens", c_uint64),
                ("n_preemptions", c_uint64), ("n_steps", c_uint64), ("n_running", c_int32),
                ("n_waiting", c_int32), ("n_kv_blocks", c_int32), ("n_free_kv_blocks", c_int32),
                ("n_swapped_out", c_uint64), ("n_swapped_in", c_uint64),
                ("swap_out_bytes", c_uint64), ("swap_in_bytes", c_uint64),
                ("swap_bytes_used", c_uint64), ("n_swap_fallbacks", c_uint64),
                ("n_prefix_lookup_tokens", c_uint64), ("n_prefix_hit_tokens", c_uint64),
                ("n_spec_drafted", c_uint64), ("n_spec_accepted", c_uint64)]


class EmbedParams(Structure):
    _fields_ = [("struct_size", c_uint32), ("pooling", c_int32), ("normalize", c_int32),
                ("max_tokens", c_int32), ("n_threads", c_int32)]


class EmbedRequestParams(Structure):
    _fields_ = [("struct_size", c_uint32), ("tokens", POINTER(c_int32)), ("n_tokens", c_size_t),
                ("text", c_char_p), ("pooling", c_int32), ("normalize", c_int32),
                ("max_tokens", c_int32), ("priority", c_int32), ("user_data", c_void_p)]


# Every struct the tests compare with the C layout, by its C name.
STRUCTS = {
    "brisk_model_params": ModelParams, "brisk_tensor_info": TensorInfo,
    "brisk_context_params": ContextParams, "brisk_kv_stats": KVStats,
    "brisk_logit_bias": LogitBias, "brisk_sampler_params": SamplerParams,
    "brisk_stopper_params": StopperParams, "brisk_chat_message": ChatMessage,
    "brisk_engine_params": EngineParams, "brisk_request_params": RequestParams,
    "brisk_engine_step_info": StepInfo, "brisk_token_logprob": TokenLogprob,
    "brisk_engine_event": EngineEvent, "brisk_request_stats": RequestStats,
    "brisk_engine_counters": EngineCounters, "brisk_embed_params": EmbedParams,
    "brisk_embed_request_params": EmbedRequestParams,
}

P = c_void_p  # opaque handles
PI32 = POINTER(c_int32)
PSIZE = POINTER(c_size_t)

# name: (restype, argtypes)
FUNCTIONS = {
    "brisk_version_string": (c_char_p, []),
    "brisk_abi_version": (c_int, []),
    "brisk_status_string": (c_char_p, [c_status]),
    "brisk_last_error": (c_char_p, []),
    "brisk_set_log_callback": (c_status, [LOG_FN, c_void_p, c_int]),
    "brisk_memory_allocated": (c_uint64, []),
    "brisk_model_params_init": (None, [POINTER(ModelParams)]),
    "brisk_model_load": (c_status, [c_char_p, POINTER(ModelParams), POINTER(P)]),
    "brisk_model_free": (None, [P]),
    "brisk_model_architecture": (c_char_p, [P]),
    "brisk_model_n_vocab": (c_int32, [P]),
    "brisk_model_n_ctx_train": (c_int32, [P]),
    "brisk_model_n_embd": (c_int32, [P]),
    "brisk_embed_params_init": (None, [POINTER(EmbedParams)]),
    "brisk_embed": (c_status, [P, POINTER(EmbedParams), POINTER(c_char_p), c_int32,
                               POINTER(c_float), c_size_t]),
    "brisk_model_n_layer": (c_int32, [P]),
    "brisk_model_meta": (c_status, [P, c_char_p, c_char_p, c_size_t, PSIZE]),
    "brisk_model_n_tensors": (c_int64, [P]),
    "brisk_model_tensor": (c_status, [P, c_int64, POINTER(TensorInfo)]),
    "brisk_tokenize": (c_status, [P, c_char_p, c_size_t, PI32, c_size_t, c_uint32, PSIZE]),
    "brisk_token_to_piece": (c_status, [P, c_int32, c_uint32, c_char_p, c_size_t, PSIZE]),
    "brisk_detokenize": (c_status, [P, PI32, c_size_t, c_uint32, c_char_p, c_size_t, PSIZE]),
    "brisk_model_special_token": (c_int32, [P, c_int]),
    "brisk_token_is_eog": (c_int, [P, c_int32]),
    "brisk_chat_apply": (c_status, [P, c_char_p, POINTER(ChatMessage), c_size_t, c_int, c_char_p,
                                    c_size_t, PSIZE]),
    "brisk_chat_template_name": (c_char_p, [P]),
    "brisk_context_params_init": (None, [POINTER(ContextParams)]),
    "brisk_context_create": (c_status, [P, POINTER(ContextParams), POINTER(P)]),
    "brisk_context_free": (None, [P]),
    "brisk_context_kv_stats": (c_status, [P, POINTER(KVStats)]),
    "brisk_batch_create": (c_status, [c_int32, POINTER(P)]),
    "brisk_batch_free": (None, [P]),
    "brisk_batch_clear": (None, [P]),
    "brisk_batch_size": (c_int32, [P]),
    "brisk_batch_add": (c_status, [P, c_int32, c_int32, c_int32, c_int]),
    "brisk_decode": (c_status, [P, P]),
    "brisk_get_logits": (POINTER(c_float), [P, c_int32]),
    "brisk_seq_len": (c_int32, [P, c_int32]),
    "brisk_seq_truncate": (c_status, [P, c_int32, c_int32]),
    "brisk_seq_free": (c_status, [P, c_int32]),
    "brisk_seq_set_window": (c_status, [P, c_int32, c_int32, c_int32]),
    "brisk_sampler_params_init": (None, [POINTER(SamplerParams)]),
    "brisk_sampler_create": (c_status, [P, POINTER(SamplerParams), POINTER(P)]),
    "brisk_sampler_free": (None, [P]),
    "brisk_sampler_sample": (c_status, [P, P, c_int32, PI32]),
    "brisk_sampler_sample_logits": (c_status, [P, POINTER(c_float), c_int32, PI32]),
    "brisk_sampler_accept": (c_status, [P, c_int32]),
    "brisk_sampler_reset": (None, [P]),
    "brisk_stopper_params_init": (None, [POINTER(StopperParams)]),
    "brisk_stopper_create": (c_status, [P, POINTER(StopperParams), POINTER(P)]),
    "brisk_stopper_free": (None, [P]),
    "brisk_stopper_push": (c_status, [P, c_int32, POINTER(c_void_p), PSIZE, POINTER(c_int)]),
    "brisk_stopper_flush": (c_status, [P, POINTER(c_void_p), PSIZE]),
    "brisk_engine_params_init": (None, [POINTER(EngineParams)]),
    "brisk_engine_create": (c_status, [P, POINTER(EngineParams), POINTER(P)]),
    "brisk_engine_free": (None, [P]),
    "brisk_request_params_init": (None, [POINTER(RequestParams)]),
    "brisk_engine_submit": (c_status, [P, POINTER(RequestParams), POINTER(c_uint64)]),
    "brisk_engine_cancel": (c_status, [P, c_uint64]),
    "brisk_engine_step": (c_status, [P, POINTER(StepInfo)]),
    "brisk_engine_poll": (c_status, [P, POINTER(EngineEvent), c_size_t, PSIZE]),
    "brisk_engine_request_stats": (c_status, [P, c_uint64, POINTER(RequestStats)]),
    "brisk_engine_stats": (c_status, [P, POINTER(EngineCounters)]),
    "brisk_embed_request_params_init": (None, [POINTER(EmbedRequestParams)]),
    "brisk_engine_submit_embed": (c_status, [P, POINTER(EmbedRequestParams), POINTER(c_uint64)]),
    "brisk_engine_embedding": (c_status, [P, c_uint64, POINTER(c_float), c_size_t, PSIZE]),
}


def _candidates():
    env = os.environ.get("BRISK_LIBRARY")
    if env:
        yield env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    for name in ("libbrisk.so", "libbrisk.so.%d" % ABI_VERSION):
        path = os.path.join(here, name)
        if os.path.exists(path):
            yield path
    # A checkout: bindings/python/brisk -> build/libbrisk.so
    root = os.path.dirname(os.path.dirname(os.path.dirname(here)))
    path = os.path.join(root, "build", "libbrisk.so")
    if os.path.exists(path):
        yield path
    found = ctypes.util.find_library("brisk")
    if found:
        yield found
    yield "libbrisk.so.%d" % ABI_VERSION


def load_library():
    """Loads libbrisk: $BRISK_LIBRARY, else one next to this package, else the
    checkout's build/, else the system's. Refuses another ABI version."""
    errors = []
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            errors.append("%s: %s" % (path, e))
            continue
        lib.brisk_abi_version.restype = c_int
        lib.brisk_abi_version.argtypes = []
        abi = lib.brisk_abi_version()
        if abi != ABI_VERSION:
            raise ImportError("brisk: %s has ABI version %d, these bindings need %d" %
                              (path, abi, ABI_VERSION))
        for name, (res, args) in FUNCTIONS.items():
            fn = getattr(lib, name)
            fn.restype = res
            fn.argtypes = args
        lib.path = path
        return lib
    raise ImportError("brisk: cannot load libbrisk (set BRISK_LIBRARY to its path): " +
                      "; ".join(errors))
