package brisk

/*
#include <stdlib.h>
#include "brisk.h"
*/
import "C"

import (
	"context"
	"unsafe"
)

// GenerateOptions of Model.Generate and Model.Chat; see DefaultGenerate.
type GenerateOptions struct {
	MaxTokens    int
	Sampler      SamplerOptions
	Stop         []string
	ParseSpecial bool
	// Template is the chat template family for Chat ("chatml", ...); "":
	// the one recognized in the model's template.
	Template string
	NThreads int
}

// DefaultGenerate: 128 tokens at temperature 0.8, top-p 0.95.
func DefaultGenerate() GenerateOptions {
	s := DefaultSampler()
	s.Temperature = 0.8
	s.TopP = 0.95
	return GenerateOptions{MaxTokens: 128, Sampler: s}
}

// Generation streams text pieces, scanner style:
//
//	for g.Next() { fmt.Print(g.Text()) }
//	if err := g.Err(); err != nil { ... }
//	g.Close()
//
// Cancelling its context.Context stops the running decode (Err then is
// ErrCancelled). Not for concurrent use.
type Generation struct {
	ctx     context.Context
	c       *Context
	s       *Sampler
	stopper *C.brisk_stopper
	b       *Batch
	pos     int
	at      int
	text    string
	err     error
	done    bool
}

// Generate starts generating from prompt (tokenized with BOS).
func (m *Model) Generate(ctx context.Context, prompt string, o GenerateOptions) (*Generation, error) {
	toks, err := m.Tokenize(prompt, true, o.ParseSpecial)
	if err != nil {
		return nil, err
	}
	return m.GenerateTokens(ctx, toks, o)
}

// Chat streams the assistant's answer to a conversation.
func (m *Model) Chat(ctx context.Context, messages []Message, o GenerateOptions) (*Generation, error) {
	text, err := m.ApplyChatTemplate(o.Template, messages)
	if err != nil {
		return nil, err
	}
	o.ParseSpecial = true
	return m.Generate(ctx, text, o)
}

// GenerateTokens starts generating from prompt token ids.
func (m *Model) GenerateTokens(ctx context.Context, toks []int32, o GenerateOptions) (g *Generation, err error) {
	defer locked()()
	if len(toks) == 0 {
		return nil, &Error{Status: StatusInvalidArgument, Message: "empty prompt"}
	}
	if o.MaxTokens < 1 {
		o.MaxTokens = 1
	}
	g = &Generation{ctx: ctx, pos: len(toks), at: len(toks) - 1}
	defer func() {
		if err != nil {
			g.Close()
			g = nil
		}
	}()
	if g.c, err = NewContext(m, ContextOptions{NThreads: o.NThreads, KVTokens: len(toks) + o.MaxTokens + 1,
		MaxBatchTokens: len(toks), NSeqMax: 1}); err != nil {
		return
	}
	if g.s, err = NewSampler(m, o.Sampler); err != nil {
		return
	}
	var p C.brisk_stopper_params
	C.brisk_stopper_params_init(&p)
	p.max_tokens = C.int32_t(o.MaxTokens)
	p.detokenize_flags = C.BRISK_DETOKENIZE_REPLACE_INVALID
	n := len(o.Stop)
	strs := (*[1 << 20]*C.char)(C.malloc(C.size_t(n+1) * C.size_t(unsafe.Sizeof((*C.char)(nil)))))[: n+1 : n+1]
	defer C.free(unsafe.Pointer(&strs[0]))
	for i, s := range o.Stop {
		strs[i] = C.CString(s)
		defer C.free(unsafe.Pointer(strs[i]))
	}
	p.stop_strings = &strs[0]
	p.n_stop_strings = C.size_t(n)
	if err = check(C.brisk_stopper_create(m.p, &p, &g.stopper)); err != nil {
		return
	}
	if g.b, err = NewBatch(len(toks)); err != nil {
		return
	}
	if err = g.b.AddSequence(toks, 0, 0); err != nil {
		return
	}
	err = g.c.DecodeContext(ctx, g.b)
	return
}

// Next produces the next non-empty piece of text; false at the end or on error.
func (g *Generation) Next() bool {
	defer locked()()
	for !g.done {
		tok, err := g.s.Sample(g.c, g.at)
		if err == nil {
			err = g.s.Accept(tok)
		}
		var text *C.char
		var n C.size_t
		var reason C.brisk_stop_reason
		if err == nil {
			err = check(C.brisk_stopper_push(g.stopper, C.int32_t(tok), &text, &n, &reason))
		}
		if err != nil {
			g.err, g.done = err, true
			return false
		}
		g.text = C.GoStringN(text, C.int(n))
		if reason != C.BRISK_STOP_NONE {
			g.done = true
			if reason != C.BRISK_STOP_STRING {
				// Ended otherwise: release what was held back as a
				// possible stop string.
				if err = check(C.brisk_stopper_flush(g.stopper, &text, &n)); err != nil {
					g.err = err
					return false
				}
				g.text += C.GoStringN(text, C.int(n))
			}
			return g.text != ""
		}
		g.b.Clear()
		if err = g.b.Add(tok, g.pos, 0, true); err == nil {
			err = g.c.DecodeContext(g.ctx, g.b)
		}
		if err != nil {
			g.err, g.done = err, true
			return false
		}
		g.pos++
		g.at = 0
		if g.text != "" {
			return true
		}
	}
	return false
}

// Text is the piece Next produced.
func (g *Generation) Text() string { return g.text }

// Err is the error that ended the generation, nil at a normal end.
func (g *Generation) Err() error { return g.err }

// Close frees the generation's context, sampler and stopper.
func (g *Generation) Close() {
	if g.stopper != nil {
		C.brisk_stopper_free(g.stopper)
		g.stopper = nil
	}
	if g.b != nil {
		g.b.Close()
	}
	if g.s != nil {
		g.s.Close()
	}
	if g.c != nil {
		g.c.Close()
	}
}
