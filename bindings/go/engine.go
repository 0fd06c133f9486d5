package brisk

/*
#include <stdlib.h>
#include "brisk.h"
*/
import "C"

import (
	"context"
	"runtime"
	"sync"
	"unsafe"
)

// locked pins the goroutine to its OS thread for a function's duration, so
// that brisk_last_error (thread-local) is read on the thread whose call
// failed: `defer locked()()`.
func locked() func() {
	runtime.LockOSThread()
	return runtime.UnlockOSThread
}

// EngineOptions: zero values take the library's defaults.
type EngineOptions struct {
	NThreads, KVTokens, MaxBatchTokens, MaxRunning int
	NoPrefixCache                                  bool
}

// Request for Engine.Submit: Prompt text (tokenized with BOS) unless Tokens
// is set. Use NewRequest for the defaults.
type Request struct {
	Prompt    string
	Tokens    []int32
	MaxTokens int
	Sampler   SamplerOptions
	Stop      []string
	NoStopEOG bool
	Priority  int
	N         int
}

// NewRequest is a request for prompt with the library's defaults.
func NewRequest(prompt string) Request {
	return Request{Prompt: prompt, MaxTokens: 128, Sampler: DefaultSampler(), N: 1}
}

// Finish says why a completion ended.
type Finish int

const (
	FinishNone      Finish = 0
	FinishEOG       Finish = 1
	FinishLength    Finish = 2
	FinishCancelled Finish = 3
	FinishError     Finish = 4
	FinishStop      Finish = 5
)

// Event is one engine event: Token is -1 for none (a cancellation).
type Event struct {
	ID       uint64
	Index    int
	Token    int32
	Text     string
	Finished bool
	Reason   Finish
}

// StepInfo says what one Step did.
type StepInfo struct {
	NTokens, NDecodeTokens, NPrefillTokens, NRunning, NWaiting, NFinished int
}

// Engine serves many requests with continuous batching. Submit and Cancel
// may be called from any goroutine; Step, Poll, Stream, Serve and Close from
// one at a time.
type Engine struct {
	p       *C.brisk_engine
	events  []C.brisk_engine_event
	pending []Event
	wake    chan struct{}
	mu      sync.RWMutex   // Close waits for running Submit/Cancel calls
	serving sync.WaitGroup // and for Serve's goroutine
}

func NewEngine(m *Model, o EngineOptions) (*Engine, error) {
	defer locked()()
	var p C.brisk_engine_params
	C.brisk_engine_params_init(&p)
	p.n_threads = C.int32_t(o.NThreads)
	p.kv_tokens = C.int32_t(o.KVTokens)
	if o.MaxBatchTokens > 0 {
		p.max_batch_tokens = C.int32_t(o.MaxBatchTokens)
	}
	if o.MaxRunning > 0 {
		p.max_running = C.int32_t(o.MaxRunning)
	}
	if o.NoPrefixCache {
		p.prefix_cache = 0
	}
	var e *C.brisk_engine
	if err := check(C.brisk_engine_create(m.p, &p, &e)); err != nil {
		return nil, err
	}
	return &Engine{p: e, events: make([]C.brisk_engine_event, 256), wake: make(chan struct{}, 1)}, nil
}

// Close frees the engine and every request it holds. It waits for a Serve
// goroutine to end: cancel Serve's context first.
func (e *Engine) Close() {
	e.serving.Wait()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.p != nil {
		C.brisk_engine_free(e.p)
		e.p = nil
	}
}

// Submit queues a request and returns its id. Safe from any goroutine.
func (e *Engine) Submit(r Request) (uint64, error) {
	defer locked()()
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.p == nil {
		return 0, &Error{Status: StatusInvalidState, Message: "the engine is closed"}
	}
	var p C.brisk_request_params
	C.brisk_request_params_init(&p)
	text := C.CString(r.Prompt)
	defer C.free(unsafe.Pointer(text))
	if len(r.Tokens) > 0 {
		toks := (*C.int32_t)(C.malloc(C.size_t(len(r.Tokens)) * 4))
		defer C.free(unsafe.Pointer(toks))
		copy(unsafe.Slice((*int32)(unsafe.Pointer(toks)), len(r.Tokens)), r.Tokens)
		p.prompt_tokens = toks
		p.n_prompt_tokens = C.size_t(len(r.Tokens))
	} else {
		p.prompt_text = text
	}
	sp := (*C.brisk_sampler_params)(C.malloc(C.sizeof_brisk_sampler_params))
	defer C.free(unsafe.Pointer(sp))
	*sp = r.Sampler.raw()
	p.sampler = sp
	if r.MaxTokens > 0 {
		p.max_tokens = C.int32_t(r.MaxTokens)
	}
	if r.NoStopEOG {
		p.stop_at_eog = 0
	}
	p.priority = C.int32_t(r.Priority)
	if r.N > 0 {
		p.n = C.int32_t(r.N)
	}
	n := len(r.Stop)
	strs := (*[1 << 20]*C.char)(C.malloc(C.size_t(n+1) * C.size_t(unsafe.Sizeof((*C.char)(nil)))))[: n+1 : n+1]
	defer C.free(unsafe.Pointer(&strs[0]))
	for i, s := range r.Stop {
		strs[i] = C.CString(s)
		defer C.free(unsafe.Pointer(strs[i]))
	}
	p.stop = &strs[0]
	p.n_stop = C.size_t(n)
	var id C.uint64_t
	if err := check(C.brisk_engine_submit(e.p, &p, &id)); err != nil {
		return 0, err
	}
	select {
	case e.wake <- struct{}{}:
	default:
	}
	return uint64(id), nil
}

// Cancel stops request id; its finished event (FinishCancelled) follows.
func (e *Engine) Cancel(id uint64) error {
	defer locked()()
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.p == nil {
		return &Error{Status: StatusInvalidState, Message: "the engine is closed"}
	}
	return check(C.brisk_engine_cancel(e.p, C.uint64_t(id)))
}

// Step runs one scheduler iteration.
func (e *Engine) Step() (StepInfo, error) {
	defer locked()()
	var si C.brisk_engine_step_info
	si.struct_size = C.uint32_t(C.sizeof_brisk_engine_step_info)
	if err := check(C.brisk_engine_step(e.p, &si)); err != nil {
		return StepInfo{}, err
	}
	return StepInfo{int(si.n_tokens), int(si.n_decode_tokens), int(si.n_prefill_tokens), int(si.n_running),
		int(si.n_waiting), int(si.n_finished)}, nil
}

func (e *Engine) pollRaw() ([]Event, error) {
	defer locked()()
	var out []Event
	for {
		var n C.size_t
		if err := check(C.brisk_engine_poll(e.p, &e.events[0], C.size_t(len(e.events)), &n)); err != nil {
			return out, err
		}
		for _, ev := range e.events[:int(n)] {
			out = append(out, Event{ID: uint64(ev.id), Index: int(ev.index), Token: int32(ev.token),
				Text: C.GoStringN(ev.text, C.int(ev.text_len)), Finished: ev.finished != 0,
				Reason: Finish(ev.reason)})
		}
		if int(n) < len(e.events) {
			return out, nil
		}
	}
}

// Poll returns every queued event, oldest first.
func (e *Engine) Poll() ([]Event, error) {
	out := e.pending
	e.pending = nil
	evs, err := e.pollRaw()
	return append(out, evs...), err
}

// Busy says whether requests are running or waiting.
func (e *Engine) Busy() (bool, error) {
	defer locked()()
	var c C.brisk_engine_counters
	c.struct_size = C.uint32_t(C.sizeof_brisk_engine_counters)
	if err := check(C.brisk_engine_stats(e.p, &c)); err != nil {
		return false, err
	}
	return c.n_running+c.n_waiting > 0, nil
}

// Stream is an iterator over one request's events, scanner style.
type Stream struct {
	e    *Engine
	ctx  context.Context
	id   uint64
	q    []Event
	ev   Event
	err  error
	done bool
}

// Stream steps the engine (in the caller's goroutine) until request id
// finished, yielding its events; other requests' events stay queued for
// Poll. Cancelling ctx cancels the request.
func (e *Engine) Stream(ctx context.Context, id uint64) *Stream {
	return &Stream{e: e, ctx: ctx, id: id}
}

func (s *Stream) Next() bool {
	for !s.done {
		if len(s.q) > 0 {
			s.ev, s.q = s.q[0], s.q[1:]
			if s.ev.Finished {
				s.done = true
			}
			return true
		}
		keep := s.e.pending[:0:0]
		for _, ev := range s.e.pending {
			if ev.ID == s.id {
				s.q = append(s.q, ev)
			} else {
				keep = append(keep, ev)
			}
		}
		s.e.pending = keep
		if len(s.q) > 0 {
			continue
		}
		if s.ctx.Err() != nil {
			if err := s.e.Cancel(s.id); err != nil {
				s.err, s.done = err, true
				return false
			}
		}
		evs, err := s.e.pollRaw()
		if err == nil {
			for _, ev := range evs {
				if ev.ID == s.id {
					s.q = append(s.q, ev)
				} else {
					s.e.pending = append(s.e.pending, ev)
				}
			}
			if len(s.q) > 0 {
				continue
			}
			_, err = s.e.Step()
		}
		if err != nil {
			s.err, s.done = err, true
			return false
		}
	}
	return false
}

func (s *Stream) Event() Event { return s.ev }
func (s *Stream) Err() error   { return s.err }

// Serve steps the engine in a goroutine of its own and sends every event to
// the returned channel, until ctx is done (the channel is then closed). While
// it runs, only Submit and Cancel may be called; the goroutine sleeps while
// the engine is idle and wakes on Submit.
func (e *Engine) Serve(ctx context.Context) <-chan Event {
	out := make(chan Event, 64)
	e.serving.Add(1)
	go func() {
		defer e.serving.Done()
		defer close(out)
		for ctx.Err() == nil {
			evs, err := e.Poll()
			for _, ev := range evs {
				select {
				case out <- ev:
				case <-ctx.Done():
					return
				}
			}
			if err != nil {
				return
			}
			busy, err := e.Busy()
			if err != nil {
				return
			}
			if !busy {
				select {
				case <-e.wake:
				case <-ctx.Done():
					return
				}
				continue
			}
			if _, err := e.Step(); err != nil {
				return
			}
		}
	}()
	return out
}
