// Package brisk is a cgo binding of brisk, an embeddable LLM inference
// library: models, tokenization, contexts with batched decoding and logits,
// samplers, generation cancelled through context.Context, and the engine's
// continuous batching with submit/step/poll and streams of events.
//
// Every handle has a Close method that frees it; finalizers are not used, so
// close what you create (defer m.Close()). Errors are *Error values carrying
// the library's message; test them with errors.Is(err, brisk.ErrNotFound).
package brisk

/*
#cgo CFLAGS: -I${SRCDIR}/../../include
#cgo LDFLAGS: -L${SRCDIR}/../../build -Wl,-rpath,${SRCDIR}/../../build -lbrisk
#include <stdlib.h>
#include "brisk.h"

// The abort callback reads a flag that a goroutine sets when a
// context.Context is done: no Go code runs inside the decode.
static int brisk_go_abort(void *flag) { return __atomic_load_n((int *)flag, __ATOMIC_RELAXED); }
static void brisk_go_set_flag(int *flag, int v) { __atomic_store_n(flag, v, __ATOMIC_RELAXED); }
static void brisk_go_set_abort(brisk_context_params *p, int *flag) {
	p->abort_callback = brisk_go_abort;
	p->abort_user_data = flag;
}

extern int briskGoProgress(float fraction, void *user);
static int brisk_go_progress(float fraction, void *user) { return briskGoProgress(fraction, user); }
static void brisk_go_set_progress(brisk_model_params *p, uintptr_t handle) {
	p->progress = brisk_go_progress;
	p->progress_user_data = (void *)handle;
}

extern void briskGoLog(int level, char *message);
static void brisk_go_log(brisk_log_level level, const char *message, void *user) {
	(void)user;
	briskGoLog((int)level, (char *)message);
}
static brisk_status brisk_go_set_log(int on, int min_level) {
	return brisk_set_log_callback(on ? brisk_go_log : NULL, NULL, (brisk_log_level)min_level);
}
*/
import "C"

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/cgo"
	"sync"
	"unsafe"
)

// ABIVersion is the library ABI these declarations are written for.
const ABIVersion = 0

// Status is a brisk_status.
type Status int

const (
	StatusInvalidArgument Status = 1
	StatusOutOfMemory     Status = 2
	StatusIO              Status = 3
	StatusFormat          Status = 4
	StatusUnsupported     Status = 5
	StatusCancelled       Status = 6
	StatusBufferTooSmall  Status = 7
	StatusNotFound        Status = 8
	StatusInvalidState    Status = 9
	StatusInternal        Status = 10
	StatusKVFull          Status = 11
)

func (s Status) String() string { return C.GoString(C.brisk_status_string(C.brisk_status(s))) }

// Error is a failed brisk call: its status and the library's message.
type Error struct {
	Status  Status
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("brisk: %s: %s", e.Status, e.Message) }

// Is makes errors.Is(err, brisk.ErrNotFound) compare statuses.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Status == e.Status
}

// Sentinels for errors.Is.
var (
	ErrInvalidArgument = &Error{Status: StatusInvalidArgument}
	ErrOutOfMemory     = &Error{Status: StatusOutOfMemory}
	ErrIO              = &Error{Status: StatusIO}
	ErrFormat          = &Error{Status: StatusFormat}
	ErrUnsupported     = &Error{Status: StatusUnsupported}
	ErrCancelled       = &Error{Status: StatusCancelled}
	ErrNotFound        = &Error{Status: StatusNotFound}
	ErrInvalidState    = &Error{Status: StatusInvalidState}
	ErrKVFull          = &Error{Status: StatusKVFull}
)

// check turns a status into an error with the library's message. That
// message is thread-local, and a goroutine may move to another thread
// between two cgo calls: every caller runs under `defer locked()()`.
func check(st C.brisk_status) error {
	if st == C.BRISK_OK {
		return nil
	}
	return &Error{Status: Status(st), Message: C.GoString(C.brisk_last_error())}
}

var abiOnce sync.Once
var abiErr error

func checkABI() error {
	abiOnce.Do(func() {
		if v := int(C.brisk_abi_version()); v != ABIVersion {
			abiErr = &Error{Status: StatusInvalidState,
				Message: fmt.Sprintf("libbrisk has ABI version %d, this package needs %d", v, ABIVersion)}
		}
	})
	return abiErr
}

// Version is the library's "MAJOR.MINOR.PATCH".
func Version() string { return C.GoString(C.brisk_version_string()) }

// MemoryAllocated is the bytes the library holds now (0 once all is closed).
func MemoryAllocated() uint64 { return uint64(C.brisk_memory_allocated()) }

// ---------------------------------------------------------------------------
// Callbacks
// ---------------------------------------------------------------------------

//export briskGoProgress
func briskGoProgress(fraction C.float, user unsafe.Pointer) C.int {
	fn := cgo.Handle(uintptr(user)).Value().(func(float32) bool)
	ok := func() (r bool) {
		defer func() {
			if recover() != nil {
				r = false // a panic cancels the load instead of crossing C
			}
		}()
		return fn(float32(fraction))
	}()
	if ok {
		return 1
	}
	return 0
}

var logMu sync.RWMutex
var logSink func(level int, message string)

//export briskGoLog
func briskGoLog(level C.int, message *C.char) {
	logMu.RLock()
	sink := logSink
	logMu.RUnlock()
	if sink != nil {
		msg := C.GoString(message)
		func() {
			defer func() { _ = recover() }()
			sink(int(level), msg)
		}()
	}
}

// SetLogCallback routes log lines at or above minLevel (0 debug .. 3 error)
// to sink, which may be called from the library's threads; nil restores
// stderr.
func SetLogCallback(sink func(level int, message string), minLevel int) error {
	defer locked()()
	logMu.Lock()
	logSink = sink
	logMu.Unlock()
	on := 0
	if sink != nil {
		on = 1
	}
	return check(C.brisk_go_set_log(C.int(on), C.int(minLevel)))
}

// ---------------------------------------------------------------------------
// Model
// ---------------------------------------------------------------------------

// DefaultModelPath is the model `brisk run` uses without -m
// (SmolLM2-135M-Instruct) in the brisk cache: $BRISK_CACHE_DIR, else
// $XDG_CACHE_HOME/brisk, else ~/.cache/brisk. Nothing is downloaded here: run
// `brisk run` once to fetch it. ErrNotFound when it is not there.
func DefaultModelPath() (string, error) {
	const name = "SmolLM2-135M-Instruct.Q4_1.gguf"
	dir := os.Getenv("BRISK_CACHE_DIR")
	if dir == "" && os.Getenv("XDG_CACHE_HOME") != "" {
		dir = filepath.Join(os.Getenv("XDG_CACHE_HOME"), "brisk")
	}
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", &Error{Status: StatusNotFound, Message: "no cache folder: " + err.Error()}
		}
		dir = filepath.Join(home, ".cache", "brisk")
	}
	path := filepath.Join(dir, name)
	if st, err := os.Stat(path); err != nil || st.Size() == 0 {
		return "", &Error{Status: StatusNotFound,
			Message: "the default model " + path + " is absent (run `brisk run` once)"}
	}
	return path, nil
}

// LoadDefaultModel loads the model DefaultModelPath names.
func LoadDefaultModel() (*Model, error) {
	path, err := DefaultModelPath()
	if err != nil {
		return nil, err
	}
	return LoadModel(path, nil)
}

// Model is a loaded model; immutable, safe for concurrent use. It must be
// closed after everything created from it.
type Model struct {
	p *C.brisk_model
}

// LoadOptions of LoadModel; the zero value is the default.
type LoadOptions struct {
	NoMmap    bool
	VocabOnly bool
	// Progress gets the fraction loaded; returning false cancels the load.
	Progress func(fraction float32) bool
}

// LoadModel loads a GGUF file or a Hugging Face model folder.
func LoadModel(path string, opts *LoadOptions) (*Model, error) {
	defer locked()()
	if err := checkABI(); err != nil {
		return nil, err
	}
	var p C.brisk_model_params
	C.brisk_model_params_init(&p)
	if opts != nil {
		if opts.NoMmap {
			p.use_mmap = 0
		}
		if opts.VocabOnly {
			p.vocab_only = 1
		}
		if opts.Progress != nil {
			h := cgo.NewHandle(opts.Progress)
			defer h.Delete()
			C.brisk_go_set_progress(&p, C.uintptr_t(h))
		}
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var m *C.brisk_model
	if err := check(C.brisk_model_load(cpath, &p, &m)); err != nil {
		return nil, err
	}
	return &Model{p: m}, nil
}

// Close frees the model.
func (m *Model) Close() {
	if m.p != nil {
		C.brisk_model_free(m.p)
		m.p = nil
	}
}

func (m *Model) NVocab() int            { return int(C.brisk_model_n_vocab(m.p)) }
func (m *Model) NCtxTrain() int         { return int(C.brisk_model_n_ctx_train(m.p)) }
func (m *Model) Architecture() string   { return C.GoString(C.brisk_model_architecture(m.p)) }
func (m *Model) IsEOG(token int32) bool { return C.brisk_token_is_eog(m.p, C.int32_t(token)) != 0 }

// Tokenize returns the token ids of text (with BOS as the vocabulary says
// when addSpecial).
func (m *Model) Tokenize(text string, addSpecial, parseSpecial bool) ([]int32, error) {
	defer locked()()
	var flags C.uint32_t
	if addSpecial {
		flags |= C.BRISK_TOKENIZE_ADD_SPECIAL
	}
	if parseSpecial {
		flags |= C.BRISK_TOKENIZE_PARSE_SPECIAL
	}
	ctext := C.CString(text)
	defer C.free(unsafe.Pointer(ctext))
	out := make([]int32, len(text)+8)
	for {
		var n C.size_t
		st := C.brisk_tokenize(m.p, ctext, C.size_t(len(text)), (*C.int32_t)(unsafe.Pointer(&out[0])),
			C.size_t(len(out)), flags, &n)
		if st == C.BRISK_E_BUFFER_TOO_SMALL {
			out = make([]int32, int(n))
			continue
		}
		if err := check(st); err != nil {
			return nil, err
		}
		return out[:int(n)], nil
	}
}

// DetokenizeBytes returns the bytes of a token sequence (possibly not UTF-8).
func (m *Model) DetokenizeBytes(tokens []int32) ([]byte, error) {
	defer locked()()
	buf := make([]byte, 16*len(tokens)+16)
	var tp *C.int32_t
	if len(tokens) > 0 {
		tp = (*C.int32_t)(unsafe.Pointer(&tokens[0]))
	}
	for {
		var n C.size_t
		st := C.brisk_detokenize(m.p, tp, C.size_t(len(tokens)), 0, (*C.char)(unsafe.Pointer(&buf[0])),
			C.size_t(len(buf)), &n)
		if st == C.BRISK_E_BUFFER_TOO_SMALL {
			buf = make([]byte, int(n))
			continue
		}
		if err := check(st); err != nil {
			return nil, err
		}
		return buf[:int(n)], nil
	}
}

// Detokenize returns the text of a token sequence.
func (m *Model) Detokenize(tokens []int32) (string, error) {
	b, err := m.DetokenizeBytes(tokens)
	return string(b), err
}

// Message is one chat message; Role is "system", "user" or "assistant".
type Message struct {
	Role, Content string
}

// ApplyChat formats a conversation in the model's chat format, ending with
// the opening of the assistant's turn.
func (m *Model) ApplyChat(messages []Message) (string, error) {
	return m.ApplyChatTemplate("", messages)
}

// ApplyChatTemplate is ApplyChat in the named template family ("chatml",
// ...); "" means the one recognized in the model's template.
func (m *Model) ApplyChatTemplate(template string, messages []Message) (string, error) {
	defer locked()()
	n := len(messages)
	arr := (*[1 << 20]C.brisk_chat_message)(C.malloc(C.size_t(n+1) * C.sizeof_brisk_chat_message))[: n+1 : n+1]
	defer C.free(unsafe.Pointer(&arr[0]))
	for i, msg := range messages {
		arr[i].role = C.CString(msg.Role)
		arr[i].content = C.CString(msg.Content)
		defer C.free(unsafe.Pointer(arr[i].role))
		defer C.free(unsafe.Pointer(arr[i].content))
	}
	var tmpl *C.char
	if template != "" {
		tmpl = C.CString(template)
		defer C.free(unsafe.Pointer(tmpl))
	}
	var need C.size_t
	st := C.brisk_chat_apply(m.p, tmpl, &arr[0], C.size_t(n), 1, nil, 0, &need)
	if st != C.BRISK_E_BUFFER_TOO_SMALL {
		if err := check(st); err != nil {
			return "", err
		}
	}
	buf := make([]byte, int(need)+1)
	if err := check(C.brisk_chat_apply(m.p, tmpl, &arr[0], C.size_t(n), 1, (*C.char)(unsafe.Pointer(&buf[0])),
		C.size_t(len(buf)), &need)); err != nil {
		return "", err
	}
	return string(buf[:int(need)]), nil
}

// ---------------------------------------------------------------------------
// Sampler
// ---------------------------------------------------------------------------

// SamplerOptions: Temperature 0 is greedy. Use DefaultSampler for defaults.
type SamplerOptions struct {
	Temperature   float32
	TopK          int32
	TopP          float32
	MinP          float32
	RepeatPenalty float32
	Seed          uint64
}

// DefaultSampler samples from the model's own distribution.
func DefaultSampler() SamplerOptions {
	return SamplerOptions{Temperature: 1, TopP: 1, RepeatPenalty: 1}
}

// Greedy picks the most likely token.
func Greedy() SamplerOptions { s := DefaultSampler(); s.Temperature = 0; return s }

func (o SamplerOptions) raw() C.brisk_sampler_params {
	var p C.brisk_sampler_params
	C.brisk_sampler_params_init(&p)
	p.temperature = C.float(o.Temperature)
	p.top_k = C.int32_t(o.TopK)
	p.top_p = C.float(o.TopP)
	p.min_p = C.float(o.MinP)
	p.repeat_penalty = C.float(o.RepeatPenalty)
	p.seed = C.uint64_t(o.Seed)
	return p
}

// Sampler picks tokens from logits; not for concurrent use.
type Sampler struct {
	p *C.brisk_sampler
}

func NewSampler(m *Model, o SamplerOptions) (*Sampler, error) {
	defer locked()()
	p := o.raw()
	var s *C.brisk_sampler
	if err := check(C.brisk_sampler_create(m.p, &p, &s)); err != nil {
		return nil, err
	}
	return &Sampler{p: s}, nil
}

func (s *Sampler) Close() {
	if s.p != nil {
		C.brisk_sampler_free(s.p)
		s.p = nil
	}
}

// Sample picks a token from entry i of ctx's last decode (not accepted).
func (s *Sampler) Sample(ctx *Context, i int) (int32, error) {
	defer locked()()
	var t C.int32_t
	err := check(C.brisk_sampler_sample(s.p, ctx.p, C.int32_t(i), &t))
	return int32(t), err
}

func (s *Sampler) Accept(token int32) error {
	defer locked()()
	return check(C.brisk_sampler_accept(s.p, C.int32_t(token)))
}

// ---------------------------------------------------------------------------
// Context and batch
// ---------------------------------------------------------------------------

// ContextOptions: zero values take the library's defaults.
type ContextOptions struct {
	NThreads, KVTokens, MaxBatchTokens, NSeqMax int
}

// Context runs a model over a paged KV cache; not for concurrent use.
type Context struct {
	p      *C.brisk_context
	flag   *C.int
	nVocab int
}

func NewContext(m *Model, o ContextOptions) (*Context, error) {
	defer locked()()
	var p C.brisk_context_params
	C.brisk_context_params_init(&p)
	p.n_threads = C.int32_t(o.NThreads)
	p.kv_tokens = C.int32_t(o.KVTokens)
	if o.MaxBatchTokens > 0 {
		p.max_batch_tokens = C.int32_t(o.MaxBatchTokens)
	}
	if o.NSeqMax > 0 {
		p.n_seq_max = C.int32_t(o.NSeqMax)
	}
	flag := (*C.int)(C.calloc(1, C.sizeof_int))
	C.brisk_go_set_abort(&p, flag)
	var c *C.brisk_context
	if err := check(C.brisk_context_create(m.p, &p, &c)); err != nil {
		C.free(unsafe.Pointer(flag))
		return nil, err
	}
	return &Context{p: c, flag: flag, nVocab: m.NVocab()}, nil
}

func (c *Context) Close() {
	if c.p != nil {
		C.brisk_context_free(c.p)
		C.free(unsafe.Pointer(c.flag))
		c.p = nil
	}
}

// Decode runs the model on batch; on error the context is as before.
func (c *Context) Decode(b *Batch) error {
	defer locked()()
	return check(C.brisk_decode(c.p, b.p))
}

// DecodeContext is Decode that stops with ErrCancelled when ctx is done.
func (c *Context) DecodeContext(ctx context.Context, b *Batch) error {
	if ctx.Done() == nil {
		return c.Decode(b)
	}
	// Cancellation always goes through the library's abort callback, which
	// reads the flag between layers: set now if ctx is already done, else
	// by a watcher while the decode runs.
	select {
	case <-ctx.Done():
		C.brisk_go_set_flag(c.flag, 1)
	default:
	}
	stop := make(chan struct{})
	watch := make(chan struct{})
	go func() {
		defer close(watch)
		select {
		case <-ctx.Done():
			C.brisk_go_set_flag(c.flag, 1)
		case <-stop:
		}
	}()
	err := c.Decode(b)
	close(stop)
	<-watch
	C.brisk_go_set_flag(c.flag, 0)
	return err
}

// Logits of entry i of the last decode, without a copy: valid until the
// next Decode or Close. nil if that entry asked for none.
func (c *Context) Logits(i int) []float32 {
	p := C.brisk_get_logits(c.p, C.int32_t(i))
	if p == nil {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(p)), c.nVocab)
}

func (c *Context) SeqLen(seq int) int { return int(C.brisk_seq_len(c.p, C.int32_t(seq))) }
func (c *Context) SeqFree(seq int) error {
	defer locked()()
	return check(C.brisk_seq_free(c.p, C.int32_t(seq)))
}

// Batch holds the tokens of one decode.
type Batch struct {
	p *C.brisk_batch
}

func NewBatch(capacity int) (*Batch, error) {
	defer locked()()
	var b *C.brisk_batch
	if err := check(C.brisk_batch_create(C.int32_t(capacity), &b)); err != nil {
		return nil, err
	}
	return &Batch{p: b}, nil
}

func (b *Batch) Close() {
	if b.p != nil {
		C.brisk_batch_free(b.p)
		b.p = nil
	}
}

func (b *Batch) Add(token int32, pos, seq int, logits bool) error {
	defer locked()()
	l := 0
	if logits {
		l = 1
	}
	return check(C.brisk_batch_add(b.p, C.int32_t(token), C.int32_t(pos), C.int32_t(seq), C.int(l)))
}

// AddSequence adds tokens at positions start..; logits for the last one.
func (b *Batch) AddSequence(tokens []int32, start, seq int) error {
	for k, t := range tokens {
		if err := b.Add(t, start+k, seq, k == len(tokens)-1); err != nil {
			return err
		}
	}
	return nil
}

func (b *Batch) Clear()   { C.brisk_batch_clear(b.p) }
func (b *Batch) Len() int { return int(C.brisk_batch_size(b.p)) }
