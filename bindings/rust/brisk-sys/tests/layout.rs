//! The hand-written declarations against brisk.h: every struct's size, field
//! names and offsets against the C compiler's (the c_layout program, path in
//! $BRISK_C_LAYOUT), and every function's name, parameter count and return
//! type (void or not) against the header's text.
use brisk_sys::*;
use std::collections::HashMap;
use std::mem::{size_of, MaybeUninit};

/// offsetof without `offset_of!` (Rust 1.77), for older toolchains such as
/// Debian's: the distance from a struct to its field in an uninitialized value.
macro_rules! offset {
    ($t:ident, $f:ident) => {{
        let u = MaybeUninit::<$t>::uninit();
        let base = u.as_ptr();
        // SAFETY: addr_of! takes the field's address without reading it.
        unsafe { std::ptr::addr_of!((*base).$f) as usize - base as usize }
    }};
}

macro_rules! layout {
    ($t:ident { $($f:ident),* $(,)? }) => {
        (stringify!($t), size_of::<$t>(),
         vec![$((stringify!($f).trim_start_matches("r#"), offset!($t, $f))),*])
    };
}

fn rust_layouts() -> Vec<(&'static str, usize, Vec<(&'static str, usize)>)> {
    vec![
        layout!(brisk_model_params {
            struct_size,
            progress,
            progress_user_data,
            use_mmap,
            vocab_only,
            repack,
            device,
            n_gpu_layers,
            memory_limit,
            tp_size,
            pp_size
        }),
        layout!(brisk_tensor_info { struct_size, name, r#type, n_dims, dims, n_bytes }),
        layout!(brisk_context_params {
            struct_size,
            n_threads,
            kv_tokens,
            kv_bytes,
            block_size,
            kv_type,
            max_batch_tokens,
            n_seq_max,
            abort_callback,
            abort_user_data,
            prefix_cache,
            memory_limit,
            prefix_host_bytes
        }),
        layout!(brisk_kv_stats {
            struct_size,
            block_size,
            n_blocks,
            n_free_blocks,
            bytes_per_block,
            kv_bytes,
            other_bytes,
            n_cached_blocks,
            bytes_per_token,
            host_tier_bytes,
            host_tier_index_bytes,
            n_host_tier_blocks,
            n_host_tier_hits,
            n_host_tier_misses,
            n_host_tier_evictions
        }),
        layout!(brisk_logit_bias { token, bias }),
        layout!(brisk_sampler_params {
            struct_size,
            seed,
            temperature,
            top_k,
            top_p,
            min_p,
            typical_p,
            penalty_last_n,
            repeat_penalty,
            frequency_penalty,
            presence_penalty,
            n_logit_bias,
            logit_bias,
            n_logprobs
        }),
        layout!(brisk_stopper_params {
            struct_size,
            max_tokens,
            stop_at_eog,
            stop_tokens,
            n_stop_tokens,
            stop_strings,
            n_stop_strings,
            detokenize_flags
        }),
        layout!(brisk_chat_message { role, content }),
        layout!(brisk_engine_params {
            struct_size,
            n_threads,
            kv_tokens,
            kv_bytes,
            block_size,
            kv_type,
            max_batch_tokens,
            max_running,
            prefill_chunk,
            slo_ttft_ms,
            slo_tpot_ms,
            mem_bandwidth_gbs,
            peak_gflops,
            preempt_mode,
            swap_bytes,
            step_time_budget_us,
            prefix_cache,
            reserve_blocks,
            draft_model,
            memory_limit,
            prefix_host_bytes
        }),
        layout!(brisk_request_params {
            struct_size,
            prompt_tokens,
            n_prompt_tokens,
            prompt_text,
            sampler,
            max_tokens,
            stop_at_eog,
            priority,
            user_data,
            stop,
            n_stop,
            logprobs,
            n,
            spec_n_draft,
            spec_ngram_min,
            spec_ngram_max,
            spec_adaptive,
            spec_draft_model,
            n_sinks,
            window
        }),
        layout!(brisk_engine_step_info {
            struct_size,
            n_tokens,
            n_decode_tokens,
            n_prefill_tokens,
            n_running,
            n_waiting,
            n_finished,
            n_preempted,
            duration_ns,
            n_swapped_out,
            n_swapped_in,
            predicted_ns
        }),
        layout!(brisk_token_logprob { token, logprob }),
        layout!(brisk_engine_event {
            id,
            user_data,
            token,
            text,
            text_len,
            finished,
            reason,
            index,
            logprob,
            top_logprobs,
            n_top_logprobs
        }),
        layout!(brisk_request_stats {
            struct_size,
            n_prompt_tokens,
            n_generated_tokens,
            n_preemptions,
            finished,
            reason,
            queue_ns,
            ttft_ns,
            e2e_ns,
            tpot_ns,
            n_spec_drafted,
            n_spec_accepted,
            error,
            n_cached_tokens
        }),
        layout!(brisk_engine_counters {
            struct_size,
            n_submitted,
            n_finished,
            n_cancelled,
            n_prompt_tokens,
            n_generated_tokens,
            n_computed_tokens,
            n_preemptions,
            n_steps,
            n_running,
            n_waiting,
            n_kv_blocks,
            n_free_kv_blocks,
            n_swapped_out,
            n_swapped_in,
            swap_out_bytes,
            swap_in_bytes,
            swap_bytes_used,
            n_swap_fallbacks,
            n_prefix_lookup_tokens,
            n_prefix_hit_tokens,
            n_spec_drafted,
            n_spec_accepted
        }),
        layout!(brisk_embed_params {
            struct_size,
            pooling,
            normalize,
            max_tokens,
            n_threads
        }),
        layout!(brisk_embed_request_params {
            struct_size,
            tokens,
            n_tokens,
            text,
            pooling,
            normalize,
            max_tokens,
            priority,
            user_data
        }),
    ]
}

#[test]
fn structs_match_the_c_compiler() {
    let exe = match std::env::var_os("BRISK_C_LAYOUT") {
        Some(e) => e,
        None => {
            eprintln!("SKIP: BRISK_C_LAYOUT (bindings/tests/c_layout) not given");
            return;
        }
    };
    let out = std::process::Command::new(exe).output().expect("run c_layout");
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let mut sizes = HashMap::new();
    let mut fields: HashMap<String, Vec<(String, usize)>> = HashMap::new();
    for line in text.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        match w[0] {
            "struct" => {
                sizes.insert(w[1].to_string(), w[2].parse::<usize>().unwrap());
            }
            _ => {
                let (s, f) = w[1].split_once('.').unwrap();
                fields
                    .entry(s.to_string())
                    .or_default()
                    .push((f.to_string(), w[2].parse().unwrap()));
            }
        }
    }
    for (name, size, rust_fields) in rust_layouts() {
        let c: Vec<(String, usize)> = fields[name].clone();
        let r: Vec<(String, usize)> =
            rust_fields.iter().map(|(f, o)| (f.to_string(), *o)).collect();
        if r[0].0 == "struct_size" {
            // Fields appended to brisk.h after these declarations are fine:
            // the library gives an older, smaller struct its defaults.
            assert!(r.len() <= c.len(), "{name} declares more fields than brisk.h");
            assert_eq!(r[..], c[..r.len()], "fields of {name}");
            assert!(size <= sizes[name], "size of {name}");
        } else {
            // No struct_size: the size is part of the ABI version.
            assert_eq!(r, c, "fields of {name}");
            assert_eq!(sizes.get(name), Some(&size), "size of {name}");
        }
    }
}

/// (parameter count, returns void) of every BRISK_API function in the text.
fn signatures(text: &str, marker: &str) -> HashMap<String, (usize, bool)> {
    let mut out = HashMap::new();
    let flat: String =
        text.split('\n').map(|l| l.split("//").next().unwrap()).collect::<Vec<_>>().join(" ");
    for piece in flat.split(marker).skip(1) {
        let open = match piece.find('(') {
            Some(o) => o,
            None => continue,
        };
        let head = &piece[..open];
        let name = match head
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .filter(|s| !s.is_empty())
            .last()
        {
            Some(n) => n,
            None => continue,
        };
        if !name.starts_with("brisk_") {
            continue;
        }
        let mut depth = 0;
        let mut end = open;
        for (i, c) in piece[open..].char_indices() {
            match c {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + i;
                        break;
                    }
                }
                _ => {}
            }
        }
        let params = piece[open + 1..end].trim().trim_end_matches(',').trim();
        let mut n = 0;
        let mut d = 0;
        if !params.is_empty() && params != "void" {
            n = 1;
            for c in params.chars() {
                match c {
                    '(' => d += 1,
                    ')' => d -= 1,
                    ',' if d == 0 => n += 1,
                    _ => {}
                }
            }
        }
        let rest = &piece[end + 1..];
        let void = if marker == "BRISK_API" {
            head.trim_start().starts_with("void ")
        } else {
            !rest.trim_start().starts_with("->")
        };
        out.insert(name.to_string(), (n, void));
    }
    out
}

#[test]
fn functions_match_the_header() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../..");
    let header = std::fs::read_to_string(root.join("include/brisk.h")).unwrap();
    let header = header
        .split("/*")
        .enumerate()
        .map(|(i, s)| if i == 0 { s } else { s.split_once("*/").map(|x| x.1).unwrap_or("") })
        .collect::<String>();
    let rust = std::fs::read_to_string(root.join("bindings/rust/brisk-sys/src/lib.rs")).unwrap();
    let c = signatures(&header, "BRISK_API");
    let r = signatures(&rust, "pub fn ");
    assert!(r.len() > 60, "only {} Rust declarations parsed", r.len());
    for (name, sig) in &r {
        assert_eq!(
            c.get(name),
            Some(sig),
            "{name}: (parameters, returns void) differ from brisk.h"
        );
    }
}

#[test]
fn abi_version_matches() {
    assert_eq!(unsafe { brisk_abi_version() }, BRISK_ABI_VERSION);
}
