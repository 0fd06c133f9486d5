//! The safe bindings against the C API: the c_reference program (built by
//! meson, path in $BRISK_C_REFERENCE) prints tokens, logits and generated
//! tokens for stories260K; these tests must get exactly the same.
use brisk::*;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const PROMPT: &str = "Once upon a time";

fn model_path() -> Option<String> {
    let p = std::env::var("BRISK_TEST_MODEL").unwrap_or_else(|_| {
        concat!(env!("CARGO_MANIFEST_DIR"), "/../../../../shared/models/stories260K.gguf").into()
    });
    std::path::Path::new(&p).exists().then_some(p)
}

fn reference() -> Option<(String, HashMap<String, String>)> {
    let path = model_path()?;
    let exe = std::env::var("BRISK_C_REFERENCE").ok()?;
    let out = std::process::Command::new(exe).args([&path, PROMPT]).output().ok()?;
    assert!(out.status.success(), "c_reference failed");
    let text = String::from_utf8(out.stdout).unwrap();
    let map = text
        .lines()
        .map(|l| {
            let (k, v) = l.split_once(' ').unwrap_or((l, ""));
            (k.to_string(), v.to_string())
        })
        .collect();
    Some((path, map))
}

macro_rules! need_reference {
    () => {
        match reference() {
            Some(r) => r,
            None => {
                eprintln!("SKIP: needs ../shared/models/stories260K.gguf and BRISK_C_REFERENCE");
                return;
            }
        }
    };
}

fn ints(s: &str) -> Vec<i32> {
    s.split_whitespace().map(|x| x.parse().unwrap()).collect()
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

#[test]
fn tokens_logits_and_generation_match_c() {
    let (path, r) = need_reference!();
    let model = Model::load(&path).unwrap();
    let toks = model.tokenize(PROMPT, true, false).unwrap();
    assert_eq!(toks, ints(&r["tokens"]));
    assert_eq!(model.n_vocab(), r["n_vocab"].parse::<i32>().unwrap());
    assert_eq!(model.detokenize_bytes(&ints(&r["greedy"]), 0).unwrap(), hex(&r["text"]));

    let mut ctx = Context::new(&model, &ContextOptions::default()).unwrap();
    let mut batch = Batch::new(toks.len()).unwrap();
    batch.add_sequence(&toks, 0, 0).unwrap();
    ctx.decode(&batch).unwrap();
    let want: Vec<f32> =
        r["logits"].split_whitespace().map(|x| x.parse::<f32>().unwrap()).collect();
    let got = ctx.logits(toks.len() as i32 - 1).unwrap();
    assert_eq!(got.len(), want.len());
    for (a, b) in got.iter().zip(&want) {
        assert_eq!(a.to_bits(), b.to_bits());
    }
    assert!(ctx.logits(0).is_none());
    drop(ctx);

    for (key, opts) in [
        ("greedy", SamplerOptions::greedy()),
        (
            "sampled",
            SamplerOptions { temperature: 0.8, top_p: 0.9, seed: 42, ..Default::default() },
        ),
    ] {
        let mut ctx = Context::new(&model, &ContextOptions::default()).unwrap();
        let mut s = Sampler::new(&model, &opts).unwrap();
        let mut b = Batch::new(toks.len()).unwrap();
        b.add_sequence(&toks, 0, 0).unwrap();
        ctx.decode(&b).unwrap();
        let mut out = Vec::new();
        let mut at = toks.len() as i32 - 1;
        while out.len() < 16 {
            let t = s.sample(&ctx, at).unwrap();
            s.accept(t).unwrap();
            out.push(t);
            b.clear();
            b.add(t, (toks.len() + out.len() - 1) as i32, 0, true).unwrap();
            ctx.decode(&b).unwrap();
            at = 0;
        }
        assert_eq!(out, ints(&r[key]), "{key}");
    }

    // The iterator of text pieces gives the greedy text.
    let opts =
        GenerateOptions { max_tokens: 16, sampler: SamplerOptions::greedy(), ..Default::default() };
    let pieces: Vec<String> = model.generate(PROMPT, &opts).unwrap().map(|p| p.unwrap()).collect();
    assert!(pieces.len() > 1);
    assert_eq!(pieces.concat(), String::from_utf8_lossy(&hex(&r["text"])));
}

#[test]
fn chat_matches_c() {
    let (path, r) = need_reference!();
    let model = Model::load(&path).unwrap();
    let conv = [ChatMessage::new("system", "Be brief."), ChatMessage::new("user", "Hi there!")];
    let text = model.apply_chat(&conv, Some("chatml")).unwrap();
    assert_eq!(text.as_bytes(), &hex(&r["chat"])[..]);
    assert_eq!(model.apply_chat(&conv, None).unwrap_err().status, Status::Unsupported);
    let opts = GenerateOptions {
        max_tokens: 8,
        sampler: SamplerOptions::greedy(),
        template: Some("chatml".into()),
        ..Default::default()
    };
    let got: String = model.chat(&conv, &opts).unwrap().map(|p| p.unwrap()).collect();
    let plain = GenerateOptions { parse_special: true, ..opts };
    let want: String = model.generate(&text, &plain).unwrap().map(|p| p.unwrap()).collect();
    assert_eq!(got, want);
}

#[test]
fn engine_streams_match_c() {
    let (path, r) = need_reference!();
    let model = Model::load(&path).unwrap();
    let mut engine =
        Engine::new(&model, &EngineOptions { kv_tokens: 1024, ..Default::default() }).unwrap();
    let mut req = Request::tokens(&ints(&r["tokens"]));
    req.max_tokens = 16;
    req.sampler = SamplerOptions::greedy();
    req.stop_at_eog = false;
    let a = engine.submit(&req).unwrap();
    let mut text_req = Request::text(PROMPT);
    text_req.max_tokens = 16;
    text_req.sampler = SamplerOptions::greedy();
    text_req.stop_at_eog = false;
    // Submitted from another thread while this one steps.
    let sub = engine.submitter();
    let b = std::thread::spawn(move || sub.submit(&text_req).unwrap()).join().unwrap();
    let got_a: Vec<i32> = engine.stream(a).map(|e| e.unwrap()).filter_map(|e| e.token).collect();
    assert_eq!(got_a, ints(&r["engine"]));
    let evs: Vec<Event> = engine.stream(b).map(|e| e.unwrap()).collect();
    assert_eq!(evs.iter().filter_map(|e| e.token).collect::<Vec<_>>(), ints(&r["engine"]));
    assert_eq!(evs.last().unwrap().finished, Some(Finish::Length));
    assert_eq!(engine.stats().unwrap().n_finished, 2);

    // A cancellation, through events().
    let c = engine.submit(&Request::text(PROMPT)).unwrap();
    engine.step().unwrap();
    engine.cancel(c).unwrap();
    let evs: Vec<Event> = engine.events().map(|e| e.unwrap()).collect();
    assert_eq!(evs.last().unwrap().finished, Some(Finish::Cancelled));
    // Dropping a stream early cancels its request.
    let mut long = Request::text(PROMPT);
    long.max_tokens = 100;
    long.stop_at_eog = false;
    let d = engine.submit(&long).unwrap();
    let first = engine.stream(d).next().unwrap().unwrap();
    assert_eq!(first.id, d);
    let evs: Vec<Event> = engine.events().map(|e| e.unwrap()).collect();
    assert_eq!(evs.last().unwrap().finished, Some(Finish::Cancelled));
    assert!(evs.len() < 100);
    let err = engine.cancel(987654).unwrap_err();
    assert_eq!(err.status, Status::NotFound);
    assert!(!err.message.is_empty());
}

#[test]
fn errors_carry_the_message() {
    let err = Model::load("/nonexistent/model.gguf").err().unwrap();
    assert_eq!(err.status, Status::Io);
    assert!(err.message.contains("/nonexistent/model.gguf"), "{}", err.message);
    let path = match model_path() {
        Some(p) => p,
        None => return,
    };
    let model = Model::load(&path).unwrap();
    let err = Sampler::new(&model, &SamplerOptions { temperature: -1.0, ..Default::default() })
        .err()
        .unwrap();
    assert_eq!(err.status, Status::InvalidArgument);
    assert!(err.message.contains("temperature"));
    assert!(model.detokenize(&[1 << 20]).is_err());
}

#[test]
fn callbacks() {
    let path = match model_path() {
        Some(p) => p,
        None => return,
    };
    // Progress: returning false cancels the load.
    let mut seen = 0;
    let mut progress = |_: f32| {
        seen += 1;
        false
    };
    let err = Model::load_with(
        &path,
        LoadOptions { progress: Some(&mut progress), ..Default::default() },
    )
    .err()
    .unwrap();
    assert_eq!(err.status, Status::Cancelled);
    assert!(seen > 0);
    // Abort, set from another thread.
    let model = Model::load(&path).unwrap();
    let flag = Arc::new(AtomicBool::new(false));
    let mut ctx =
        Context::new(&model, &ContextOptions { abort: Some(flag.clone()), ..Default::default() })
            .unwrap();
    let toks = model.tokenize(PROMPT, true, false).unwrap();
    let mut b = Batch::new(toks.len()).unwrap();
    b.add_sequence(&toks, 0, 0).unwrap();
    let f = flag.clone();
    std::thread::spawn(move || f.store(true, Ordering::Relaxed)).join().unwrap();
    assert_eq!(ctx.decode(&b).unwrap_err().status, Status::Cancelled);
    assert_eq!(ctx.seq_len(0), 0);
    flag.store(false, Ordering::Relaxed);
    ctx.decode(&b).unwrap();
    // Generation cancelled through its flag.
    let cancel = Arc::new(AtomicBool::new(true));
    let opts = GenerateOptions { cancel: Some(cancel), ..Default::default() };
    let err = model.generate(PROMPT, &opts).err().unwrap();
    assert_eq!(err.status, Status::Cancelled);
    // The log sink gets lines as Rust strings; a panic in it is contained.
    let lines = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let l2 = lines.clone();
    set_log_callback(
        Some(Box::new(move |_, m| l2.lock().unwrap().push(m.to_string()))),
        LogLevel::Debug,
    )
    .unwrap();
    drop(Model::load(&path).unwrap());
    set_log_callback(None, LogLevel::Warn).unwrap();
}

#[test]
fn drop_frees_everything() {
    let path = match model_path() {
        Some(p) => p,
        None => return,
    };
    // Other tests run in parallel threads of this process: measure in a child.
    if std::env::var_os("BRISK_DROP_CHILD").is_none() {
        let exe = std::env::current_exe().unwrap();
        let st = std::process::Command::new(exe)
            .args(["--exact", "drop_frees_everything", "--test-threads=1"])
            .env("BRISK_DROP_CHILD", "1")
            .status()
            .unwrap();
        assert!(st.success());
        return;
    }
    assert_eq!(memory_allocated(), 0);
    {
        let model = Model::load(&path).unwrap();
        let opts = GenerateOptions { max_tokens: 8, ..Default::default() };
        let mut gen = model.generate(PROMPT, &opts).unwrap();
        let _ = gen.next(); // dropped half-way
        let mut engine =
            Engine::new(&model, &EngineOptions { kv_tokens: 256, ..Default::default() }).unwrap();
        let id = engine.submit(&Request::text(PROMPT)).unwrap();
        let _ = engine.stream(id).next();
        let sub = engine.submitter();
        drop(engine); // the submitter keeps the engine alive
        sub.cancel(id).unwrap();
        assert!(memory_allocated() > 0);
    }
    assert_eq!(memory_allocated(), 0);
}

fn assert_send_sync<T: Send + Sync>() {}
fn assert_send<T: Send>() {}

#[test]
fn thread_contract() {
    assert_send_sync::<Model>();
    assert_send_sync::<Submitter>();
    assert_send::<Context>();
    assert_send::<Engine>();
    assert_send::<Sampler>();
    assert_eq!(brisk_sys::BRISK_ABI_VERSION, 0);
    assert!(!version().is_empty());
}

/// The README's chat example, with the default model when it is fetched.
#[test]
fn readme_chat_with_the_default_model() {
    let path = match default_model_path() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("SKIP: {}", e.message);
            return;
        }
    };
    let model = Model::load(&path).unwrap();
    let msgs = [ChatMessage::new("user", "What is the capital of France?")];
    let opts =
        GenerateOptions { max_tokens: 64, sampler: SamplerOptions::greedy(), ..Default::default() };
    let text: String = model.chat(&msgs, &opts).unwrap().map(|p| p.unwrap()).collect();
    assert!(text.contains("Paris"), "{text}");
}

/// A library of another ABI version (a stand-in preloaded over libbrisk's
/// brisk_abi_version) is refused with a message, in a child process.
#[test]
fn other_abi_refused() {
    if std::env::var_os("BRISK_ABI_CHILD").is_some() {
        let err = Model::load("/nonexistent").err().unwrap();
        assert!(err.message.contains("ABI version 1, these bindings need 0"), "{}", err.message);
        return;
    }
    let fake = match std::env::var_os("BRISK_FAKE_ABI_LIBRARY") {
        Some(f) => f,
        None => {
            eprintln!("SKIP: BRISK_FAKE_ABI_LIBRARY not given");
            return;
        }
    };
    let st = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "other_abi_refused", "--test-threads=1"])
        .env("BRISK_ABI_CHILD", "1")
        .env("LD_PRELOAD", fake)
        .status()
        .unwrap();
    assert!(st.success());
}
