package brisk

// Tests against the C API: the c_reference program (built by meson, path in
// $BRISK_C_REFERENCE) prints tokens, logits and generated tokens for
// stories260K; the Go package must give exactly the same.

import (
	"context"
	"encoding/hex"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const prompt = "Once upon a time"

func modelPath(t *testing.T) string {
	p := os.Getenv("BRISK_TEST_MODEL")
	if p == "" {
		p = "../../../shared/models/stories260K.gguf"
	}
	if _, err := os.Stat(p); err != nil {
		t.Skip("needs ../shared/models/stories260K.gguf")
	}
	return p
}

func reference(t *testing.T) (string, map[string]string) {
	path := modelPath(t)
	exe := os.Getenv("BRISK_C_REFERENCE")
	if exe == "" {
		t.Skip("needs BRISK_C_REFERENCE (bindings/tests/c_reference)")
	}
	out, err := exec.Command(exe, path, prompt).Output()
	if err != nil {
		t.Fatal(err)
	}
	ref := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		k, v, _ := strings.Cut(line, " ")
		ref[k] = v
	}
	return path, ref
}

func ints(s string) []int32 {
	var out []int32
	for _, f := range strings.Fields(s) {
		v, _ := strconv.Atoi(f)
		out = append(out, int32(v))
	}
	return out
}

func equal(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestAgainstC(t *testing.T) {
	path, ref := reference(t)
	m, err := LoadModel(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	toks, err := m.Tokenize(prompt, true, false)
	if err != nil || !equal(toks, ints(ref["tokens"])) {
		t.Fatalf("tokens %v, want %s (%v)", toks, ref["tokens"], err)
	}
	want, _ := hex.DecodeString(ref["text"])
	if b, _ := m.DetokenizeBytes(ints(ref["greedy"])); string(b) != string(want) {
		t.Fatalf("detokenize %q, want %q", b, want)
	}

	c, err := NewContext(m, ContextOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewBatch(len(toks))
	b.AddSequence(toks, 0, 0)
	if err := c.Decode(b); err != nil {
		t.Fatal(err)
	}
	logits := c.Logits(len(toks) - 1)
	wantLogits := strings.Fields(ref["logits"])
	if len(logits) != len(wantLogits) {
		t.Fatalf("%d logits, want %d", len(logits), len(wantLogits))
	}
	for i, s := range wantLogits {
		v, _ := strconv.ParseFloat(s, 32)
		if math.Float32bits(float32(v)) != math.Float32bits(logits[i]) {
			t.Fatalf("logit %d: %v, want %v", i, logits[i], v)
		}
	}
	if c.Logits(0) != nil {
		t.Fatal("entry 0 asked for no logits")
	}
	b.Close()
	c.Close()

	for key, so := range map[string]SamplerOptions{
		"greedy":  Greedy(),
		"sampled": {Temperature: 0.8, TopP: 0.9, RepeatPenalty: 1, Seed: 42},
	} {
		c, _ := NewContext(m, ContextOptions{})
		s, err := NewSampler(m, so)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := NewBatch(len(toks))
		b.AddSequence(toks, 0, 0)
		c.Decode(b)
		var out []int32
		at := len(toks) - 1
		for len(out) < 16 {
			tok, err := s.Sample(c, at)
			if err != nil {
				t.Fatal(err)
			}
			s.Accept(tok)
			out = append(out, tok)
			b.Clear()
			b.Add(tok, len(toks)+len(out)-1, 0, true)
			if err := c.Decode(b); err != nil {
				t.Fatal(err)
			}
			at = 0
		}
		if !equal(out, ints(ref[key])) {
			t.Fatalf("%s: %v, want %s", key, out, ref[key])
		}
		s.Close()
		b.Close()
		c.Close()
	}

	o := DefaultGenerate()
	o.MaxTokens = 16
	o.Sampler = Greedy()
	g, err := m.Generate(context.Background(), prompt, o)
	if err != nil {
		t.Fatal(err)
	}
	var pieces []string
	for g.Next() {
		pieces = append(pieces, g.Text())
	}
	g.Close()
	if g.Err() != nil || len(pieces) < 2 || strings.Join(pieces, "") != strings.ToValidUTF8(string(want), "\uFFFD") {
		t.Fatalf("generate %q (%v), want %q", pieces, g.Err(), want)
	}
}

func TestChatAgainstC(t *testing.T) {
	path, ref := reference(t)
	m, _ := LoadModel(path, nil)
	defer m.Close()
	conv := []Message{{"system", "Be brief."}, {"user", "Hi there!"}}
	text, err := m.ApplyChatTemplate("chatml", conv)
	want, _ := hex.DecodeString(ref["chat"])
	if err != nil || text != string(want) {
		t.Fatalf("chat %q (%v), want %q", text, err, want)
	}
	if _, err := m.ApplyChat(conv); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("stories260K has no chat template: %v", err)
	}
	collect := func(g *Generation, err error) string {
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		var sb strings.Builder
		for g.Next() {
			sb.WriteString(g.Text())
		}
		return sb.String()
	}
	o := DefaultGenerate()
	o.MaxTokens, o.Sampler, o.Template = 8, Greedy(), "chatml"
	got := collect(m.Chat(context.Background(), conv, o))
	o.ParseSpecial = true
	if plain := collect(m.Generate(context.Background(), text, o)); got != plain {
		t.Fatalf("chat %q, generate %q", got, plain)
	}
}

func TestEngineAgainstC(t *testing.T) {
	path, ref := reference(t)
	m, _ := LoadModel(path, nil)
	defer m.Close()
	e, err := NewEngine(m, EngineOptions{KVTokens: 1024})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	r := NewRequest("")
	r.Tokens = ints(ref["tokens"])
	r.MaxTokens = 16
	r.Sampler = Greedy()
	r.NoStopEOG = true
	// Submitted from several goroutines at once.
	ids := make([]uint64, 4)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			rr := r
			if i%2 == 1 {
				rr.Tokens, rr.Prompt = nil, prompt
			}
			id, err := e.Submit(rr)
			if err != nil {
				t.Error(err)
			}
			ids[i] = id
		}(i)
	}
	wg.Wait()
	for _, id := range ids {
		s := e.Stream(context.Background(), id)
		var got []int32
		var last Event
		for s.Next() {
			last = s.Event()
			if last.Token >= 0 {
				got = append(got, last.Token)
			}
		}
		if s.Err() != nil || !equal(got, ints(ref["engine"])) || last.Reason != FinishLength {
			t.Fatalf("request %d: %v (%v, %v), want %s", id, got, last.Reason, s.Err(), ref["engine"])
		}
	}
	// Cancelling the stream's context cancels the request.
	ctx, cancel := context.WithCancel(context.Background())
	id, _ := e.Submit(NewRequest(prompt))
	s := e.Stream(ctx, id)
	s.Next()
	cancel()
	var last Event
	for s.Next() {
		last = s.Event()
	}
	if last.Reason != FinishCancelled && last.Reason != FinishEOG && last.Reason != FinishLength {
		t.Fatalf("after cancel: %+v %v", last, s.Err())
	}
	if err := e.Cancel(987654); !errors.Is(err, ErrNotFound) {
		t.Fatalf("cancel of an unknown id: %v", err)
	}
}

func TestServeChannel(t *testing.T) {
	path, ref := reference(t)
	m, _ := LoadModel(path, nil)
	defer m.Close()
	e, _ := NewEngine(m, EngineOptions{KVTokens: 1024})
	defer e.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := e.Serve(ctx)
	r := NewRequest(prompt)
	r.MaxTokens, r.Sampler, r.NoStopEOG = 16, Greedy(), true
	time.Sleep(10 * time.Millisecond) // Serve is idle: Submit must wake it
	a, _ := e.Submit(r)
	b, _ := e.Submit(r)
	got := map[uint64][]int32{}
	finished := 0
	for ev := range events {
		if ev.Token >= 0 {
			got[ev.ID] = append(got[ev.ID], ev.Token)
		}
		if ev.Finished {
			finished++
			if finished == 2 {
				cancel()
			}
		}
	}
	for _, id := range []uint64{a, b} {
		if !equal(got[id], ints(ref["engine"])) {
			t.Fatalf("request %d: %v", id, got[id])
		}
	}
}

func TestErrors(t *testing.T) {
	_, err := LoadModel("/nonexistent/model.gguf", nil)
	var be *Error
	if !errors.As(err, &be) || be.Status != StatusIO || !strings.Contains(be.Message, "/nonexistent/model.gguf") {
		t.Fatalf("load error %v", err)
	}
	if !errors.Is(err, ErrIO) || errors.Is(err, ErrNotFound) {
		t.Fatal("errors.Is compares statuses")
	}
	m, err := LoadModel(modelPath(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	_, err = NewSampler(m, SamplerOptions{Temperature: -1, TopP: 1, RepeatPenalty: 1})
	if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "temperature") {
		t.Fatalf("sampler error %v", err)
	}
}

func TestCallbacksAndCancellation(t *testing.T) {
	path := modelPath(t)
	calls := 0
	_, err := LoadModel(path, &LoadOptions{Progress: func(f float32) bool { calls++; return false }})
	if !errors.Is(err, ErrCancelled) || calls == 0 {
		t.Fatalf("progress cancel: %v after %d calls", err, calls)
	}
	_, err = LoadModel(path, &LoadOptions{Progress: func(float32) bool { panic("no") }})
	if !errors.Is(err, ErrCancelled) {
		t.Fatalf("a panicking progress callback cancels: %v", err)
	}
	m, _ := LoadModel(path, nil)
	defer m.Close()
	// A done context stops generation with ErrCancelled.
	ctx, cancel := context.WithCancel(context.Background())
	o := DefaultGenerate()
	o.MaxTokens = 200
	g, err := m.Generate(ctx, prompt, o)
	if err != nil {
		t.Fatal(err)
	}
	g.Next()
	cancel()
	for g.Next() {
	}
	g.Close()
	if !errors.Is(g.Err(), ErrCancelled) || !strings.Contains(g.Err().Error(), "abort") {
		t.Fatalf("generation after cancel: %v", g.Err())
	}
	var mu sync.Mutex
	var lines []string
	SetLogCallback(func(level int, msg string) { mu.Lock(); lines = append(lines, msg); mu.Unlock() }, 0)
	m2, _ := LoadModel(path, nil)
	m2.Close()
	SetLogCallback(nil, 2)
}

func TestCloseFreesEverything(t *testing.T) {
	path := modelPath(t)
	before := MemoryAllocated()
	m, _ := LoadModel(path, nil)
	o := DefaultGenerate()
	o.MaxTokens = 8
	g, _ := m.Generate(context.Background(), prompt, o)
	g.Next() // closed half-way
	g.Close()
	e, _ := NewEngine(m, EngineOptions{KVTokens: 256})
	e.Submit(NewRequest(prompt))
	e.Step()
	e.Close() // with a request still running
	m.Close()
	// No garbage collection and no finalizers: Close alone frees it.
	if after := MemoryAllocated(); after != before {
		t.Fatalf("%d bytes still allocated", after-before)
	}
}

func TestLayoutsMatchC(t *testing.T) {
	exe := os.Getenv("BRISK_C_LAYOUT")
	if exe == "" {
		t.Skip("needs BRISK_C_LAYOUT")
	}
	out, err := exec.Command(exe).Output()
	if err != nil {
		t.Fatal(err)
	}
	// cgo reads brisk.h itself; check that the sizes it sees are the C
	// compiler's (a header mismatch would show here).
	sizes := map[string]uintptr{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && f[0] == "struct" {
			v, _ := strconv.Atoi(f[2])
			sizes[f[1]] = uintptr(v)
		}
	}
	for name, got := range cSizes() {
		if sizes[name] != got {
			t.Errorf("%s: cgo size %d, C %d", name, got, sizes[name])
		}
	}
}

func TestReadmeExample(t *testing.T) {
	path := modelPath(t)
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllSubmatch(readme, -1)
	if len(blocks) != 2 {
		t.Fatalf("%d go examples in README.md, want 2", len(blocks))
	}
	abs, _ := filepath.Abs(".")
	run := func(code []byte) string {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "main.go"), code, 0o644)
		os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example\n\ngo 1.19\n\nrequire brisk v0.0.0\n\nreplace brisk => "+abs+"\n"), 0o644)
		cmd := exec.Command("go", "run", ".")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "BRISK_MODEL="+path)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("README example: %v\n%s", err, out)
		}
		return string(out)
	}
	if out := run(blocks[1][1]); !strings.Contains(out, "map[") {
		t.Fatalf("README engine example printed %q", out)
	}
	if _, err := DefaultModelPath(); err != nil {
		t.Skip(err)
	}
	if out := run(blocks[0][1]); !strings.Contains(out, "Paris") {
		t.Fatalf("README chat example printed %q", out)
	}
}

// A library of another ABI version (a stand-in preloaded over libbrisk's
// brisk_abi_version) is refused with a message, in a child process.
func TestOtherABIRefused(t *testing.T) {
	if os.Getenv("BRISK_ABI_CHILD") != "" {
		_, err := LoadModel("/nonexistent", nil)
		if err == nil || !strings.Contains(err.Error(), "ABI version 1, this package needs 0") {
			t.Fatalf("load with another ABI: %v", err)
		}
		return
	}
	fake := os.Getenv("BRISK_FAKE_ABI_LIBRARY")
	if fake == "" {
		t.Skip("BRISK_FAKE_ABI_LIBRARY not given")
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestOtherABIRefused$")
	cmd.Env = append(os.Environ(), "BRISK_ABI_CHILD=1", "LD_PRELOAD="+fake)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
}
