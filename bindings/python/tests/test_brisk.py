"""Tests of the Python bindings against the C API (bindings/tests/c_reference
and c_layout, built by meson). Run by `meson test python_binding`, or by hand:
    BRISK_LIBRARY=build/libbrisk.so BRISK_C_REFERENCE=build/bindings/c_reference \
    BRISK_C_LAYOUT=build/bindings/c_layout PYTHONPATH=bindings/python \
    python3 -m unittest discover -s bindings/python/tests -v
"""
import asyncio
import ctypes
import gc
import os
import re
import struct
import subprocess
import sys
import threading
import tracemalloc
import unittest

import brisk
from brisk import _ffi

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.environ.get("BRISK_TEST_MODEL") or os.path.join(
    HERE, "..", "..", "..", "..", "shared", "models", "stories260K.gguf")
PROMPT = "Once upon a time"
HAVE_MODEL = os.path.isfile(MODEL)


def c_reference():
    exe = os.environ.get("BRISK_C_REFERENCE")
    if not exe or not HAVE_MODEL:
        return None
    out = subprocess.run([exe, MODEL, PROMPT], check=True, capture_output=True, text=True).stdout
    ref = {}
    for line in out.splitlines():
        key, _, rest = line.partition(" ")
        ref[key] = rest
    return ref


REF = c_reference()


def f32(x):
    return struct.unpack("f", struct.pack("f", float(x)))[0]


def ints(s):
    return [int(x) for x in s.split()]


class Layout(unittest.TestCase):
    def test_structs_match_c(self):
        exe = os.environ.get("BRISK_C_LAYOUT")
        if not exe:
            self.skipTest("BRISK_C_LAYOUT (bindings/tests/c_layout) not given")
        out = subprocess.run([exe], check=True, capture_output=True, text=True).stdout
        sizes, fields = {}, {}
        for line in out.splitlines():
            kind, name, *nums = line.split()
            if kind == "struct":
                sizes[name] = int(nums[0])
            else:
                fields[name] = int(nums[0])
        for cname, cls in _ffi.STRUCTS.items():
            self.assertIn(cname, sizes, cname)
            declared = [f for f, _ in cls._fields_]
            c_fields = [k.split(".", 1)[1] for k in fields if k.startswith(cname + ".")]
            if declared[0] == "struct_size":
                # Fields appended to brisk.h after these declarations are fine:
                # the library gives an older, smaller struct its defaults.
                self.assertEqual(declared, c_fields[:len(declared)], cname)
                self.assertLessEqual(ctypes.sizeof(cls), sizes[cname], cname)
            else:  # no struct_size: the size is part of the ABI version
                self.assertEqual(declared, c_fields, cname)
                self.assertEqual(ctypes.sizeof(cls), sizes[cname], cname)
            for f in declared:
                self.assertEqual(getattr(cls, f).offset, fields[cname + "." + f], cname + "." + f)


@unittest.skipUnless(REF, "needs ../shared/models/stories260K.gguf and BRISK_C_REFERENCE")
class AgainstC(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.model = brisk.Model(MODEL)

    @classmethod
    def tearDownClass(cls):
        cls.model.close()

    def test_tokenize_detokenize(self):
        toks = self.model.tokenize(PROMPT)
        self.assertEqual(toks, ints(REF["tokens"]))
        self.assertEqual(self.model.detokenize(toks, remove_special=True), PROMPT)
        self.assertEqual(self.model.n_vocab, int(REF["n_vocab"]))
        greedy = ints(REF["greedy"])
        self.assertEqual(self.model.detokenize(greedy).encode(), bytes.fromhex(REF["text"]))

    def test_chat(self):
        conv = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there!"}]
        text = self.model.apply_chat(conv, template="chatml")
        self.assertEqual(text.encode(), bytes.fromhex(REF["chat"]))
        with self.assertRaises(brisk.UnsupportedError):
            self.model.apply_chat(conv)  # stories260K has no chat template
        got = "".join(self.model.chat(conv, template="chatml", max_tokens=8, temperature=0))
        want = "".join(self.model.generate(text, max_tokens=8, temperature=0, parse_special=True))
        self.assertEqual(got, want)

    def test_logits(self):
        toks = self.model.tokenize(PROMPT)
        with brisk.Context(self.model) as ctx:
            b = brisk.Batch(len(toks))
            b.add_sequence(toks)
            ctx.decode(b)
            logits = ctx.logits(len(toks) - 1)
            want = [f32(x) for x in REF["logits"].split()]
            self.assertEqual(len(logits), len(want))
            self.assertEqual([float(x) for x in logits], want)  # bit for bit
            # No copy: the array is the library's buffer.
            addr = ctypes.cast(brisk._lib.brisk_get_logits(ctx._h, len(toks) - 1), ctypes.c_void_p)
            if hasattr(logits, "ctypes"):
                self.assertEqual(logits.ctypes.data, addr.value)
                self.assertEqual(str(logits.dtype), "float32")
            with self.assertRaises(brisk.InvalidArgumentError):
                ctx.logits(0)  # no logits asked for entry 0

    def test_seq_set_window(self):
        # Until the first eviction a windowed sequence's logits equal a
        # plain one's, bit for bit; past it the sequence holds a bounded
        # number of tokens and its length keeps counting positions.
        toks = self.model.tokenize(PROMPT)
        with brisk.Context(self.model) as ctx:
            ctx.seq_set_window(1, 4, 16)
            with self.assertRaises(brisk.InvalidArgumentError):
                ctx.seq_set_window(2, 4, 0)
            b = brisk.Batch(1)
            for p, t in enumerate((toks * 8)[:64]):
                got = []
                for seq in (0, 1):
                    b.clear()
                    b.add(t, p, seq, True)
                    ctx.decode(b)
                    got.append([float(x) for x in ctx.logits(0)])
                if p + 1 < 4 + 16 + ctx.kv_stats()["block_size"]:
                    self.assertEqual(got[0], got[1])
            self.assertEqual(ctx.seq_len(1), 64)

    def _decode_loop(self, **sampling):
        toks = self.model.tokenize(PROMPT)
        out = []
        with brisk.Context(self.model) as ctx:
            s = brisk.Sampler(self.model, **sampling)
            b = brisk.Batch(len(toks))
            b.add_sequence(toks)
            ctx.decode(b)
            i = len(toks) - 1
            for _ in range(16):
                t = s.sample(ctx, i)
                s.accept(t)
                out.append(t)
                b.clear()
                b.add(t, len(toks) + len(out) - 1, 0, True)
                ctx.decode(b)
                i = 0
            s.close()
        return out

    def test_greedy_and_sampled_tokens(self):
        self.assertEqual(self._decode_loop(temperature=0), ints(REF["greedy"]))
        self.assertEqual(self._decode_loop(temperature=0.8, top_p=0.9, seed=42),
                         ints(REF["sampled"]))

    def test_generate_streams_the_greedy_text(self):
        pieces = list(self.model.generate(PROMPT, max_tokens=16, temperature=0))
        self.assertGreater(len(pieces), 1)
        want = bytes.fromhex(REF["text"]).decode("utf-8", "replace")
        self.assertEqual("".join(pieces), want)
        # A stop string ends the stream before it.
        stop = want[5:8]
        text = "".join(self.model.generate(PROMPT, max_tokens=16, temperature=0, stop=[stop]))
        self.assertEqual(text, want[:want.index(stop)])
        # The end of the text may start a stop string: held back, then
        # released when generation ends otherwise, and never twice.
        almost = want[-3:] + "\u2603"
        text = "".join(self.model.generate(PROMPT, max_tokens=16, temperature=0, stop=[almost]))
        self.assertEqual(text, want)

    def test_engine_stream_and_events(self):
        with brisk.Engine(self.model, kv_tokens=1024) as e:
            a = e.submit(ints(REF["tokens"]), max_tokens=16, temperature=0, stop_at_eog=False)
            b = e.submit(PROMPT, max_tokens=16, temperature=0, stop_at_eog=False)
            got = [ev.token for ev in e.stream(a) if ev.token >= 0]
            self.assertEqual(got, ints(REF["engine"]))
            rest = [ev for ev in e.stream(b)]
            self.assertEqual([ev.token for ev in rest if ev.token >= 0], ints(REF["engine"]))
            self.assertTrue(rest[-1].finished)
            self.assertEqual(rest[-1].reason, "length")
            self.assertEqual(e.stats()["n_finished"], 2)
            # step/poll by hand, and a cancellation.
            c = e.submit(PROMPT, max_tokens=100)
            e.step()
            e.cancel(c)
            evs = list(e.events())
            self.assertTrue(evs[-1].finished)
            self.assertEqual(evs[-1].reason, "cancelled")
            with self.assertRaises(brisk.NotFoundError):
                e.cancel(12345)
            # Cancelled from another thread while this one steps.
            d = e.submit(PROMPT, max_tokens=200, stop_at_eog=False)
            e.step()
            t = threading.Thread(target=e.cancel, args=(d,))
            t.start()
            t.join()
            evs = list(e.stream(d))
            self.assertEqual(evs[-1].reason, "cancelled")
            self.assertLess(len(evs), 200)

    def test_engine_asyncio(self):
        async def main(e):
            ids = [e.submit(PROMPT, max_tokens=16, temperature=0, stop_at_eog=False)
                   for _ in range(3)]

            async def collect(i):
                return [ev.token async for ev in e.astream(i) if ev.token >= 0]

            return await asyncio.gather(*(collect(i) for i in ids))

        with brisk.Engine(self.model, kv_tokens=1024) as e:
            results = asyncio.run(main(e))
        for r in results:
            self.assertEqual(r, ints(REF["engine"]))

    def test_leaving_a_stream_cancels_its_request(self):
        with brisk.Engine(self.model, kv_tokens=1024) as e:
            a = e.submit(PROMPT, max_tokens=100, stop_at_eog=False)
            for ev in e.stream(a):
                break
            rest = list(e.events())
            self.assertEqual([ev.reason for ev in rest if ev.finished], ["cancelled"])

            async def first_then_cancel():
                b = e.submit(PROMPT, max_tokens=100, stop_at_eog=False)

                async def consume():
                    async for _ in e.astream(b):
                        await asyncio.sleep(10)

                task = asyncio.ensure_future(consume())
                await asyncio.sleep(0.2)
                task.cancel()
                with self.assertRaises(asyncio.CancelledError):
                    await task

            asyncio.run(first_then_cancel())
            rest = list(e.events())
            self.assertEqual([ev.reason for ev in rest if ev.finished], ["cancelled"])
            self.assertEqual(e.stats()["n_cancelled"], 2)

    def test_older_and_newer_structs(self):
        """The struct_size rule seen from a binding: declarations older than
        the library (fewer fields) get defaults, newer ones (more fields) are
        accepted while the fields the library lacks are zero."""
        class OldSampler(ctypes.Structure):  # without n_logprobs and logit bias
            _fields_ = _ffi.SamplerParams._fields_[:11]

        class NewSampler(ctypes.Structure):  # a field this library lacks
            _fields_ = _ffi.SamplerParams._fields_ + [("future", ctypes.c_uint64)]

        lib, h = brisk._lib, ctypes.c_void_p()
        old = OldSampler(struct_size=ctypes.sizeof(OldSampler), temperature=0.5, top_p=1,
                         typical_p=1, repeat_penalty=1)
        self.assertEqual(lib.brisk_sampler_create(self.model.handle, ctypes.cast(
            ctypes.byref(old), ctypes.POINTER(_ffi.SamplerParams)), ctypes.byref(h)), 0)
        lib.brisk_sampler_free(h)
        new = NewSampler()
        lib.brisk_sampler_params_init(ctypes.cast(ctypes.byref(new),
                                                  ctypes.POINTER(_ffi.SamplerParams)))
        new.struct_size = ctypes.sizeof(NewSampler)
        ptr = ctypes.cast(ctypes.byref(new), ctypes.POINTER(_ffi.SamplerParams))
        self.assertEqual(lib.brisk_sampler_create(self.model.handle, ptr, ctypes.byref(h)), 0)
        lib.brisk_sampler_free(h)
        new.future = 7
        self.assertEqual(lib.brisk_sampler_create(self.model.handle, ptr, ctypes.byref(h)), 1)
        self.assertIn("not zero", lib.brisk_last_error().decode())
        # An output struct: an older KVStats is filled up to its size.
        class OldKV(ctypes.Structure):
            _fields_ = _ffi.KVStats._fields_[:-1]

        with brisk.Context(self.model) as ctx:
            kv = OldKV(struct_size=ctypes.sizeof(OldKV))
            self.assertEqual(lib.brisk_context_kv_stats(ctx._h, ctypes.cast(
                ctypes.byref(kv), ctypes.POINTER(_ffi.KVStats))), 0)
            self.assertEqual(kv.struct_size, ctypes.sizeof(OldKV))
            self.assertEqual(kv.n_blocks, ctx.kv_stats()["n_blocks"])

    def test_errors_carry_the_message(self):
        with self.assertRaises(brisk.IOError) as cm:
            brisk.Model("/nonexistent/model.gguf")
        self.assertIn("/nonexistent/model.gguf", str(cm.exception))
        self.assertEqual(cm.exception.status, 3)
        with self.assertRaises(brisk.InvalidArgumentError) as cm:
            brisk.Sampler(self.model, temperature=-1)
        self.assertIn("temperature", str(cm.exception))
        self.assertIsInstance(cm.exception, ValueError)
        with self.assertRaises(brisk.InvalidArgumentError):
            self.model.detokenize([10 ** 6])

    def test_progress_cancels_the_load(self):
        seen = []

        def progress(f):
            seen.append(f)
            return False

        with self.assertRaises(brisk.CancelledError):
            brisk.Model(MODEL, progress=progress)
        self.assertTrue(seen)

    def test_abort_from_another_thread(self):
        stop = threading.Event()
        calls = []

        def abort():
            calls.append(1)
            return stop.is_set()

        toks = self.model.tokenize(PROMPT)
        with brisk.Context(self.model, abort=abort) as ctx:
            b = brisk.Batch(len(toks))
            b.add_sequence(toks)
            t = threading.Thread(target=stop.set)
            t.start()
            t.join()
            with self.assertRaises(brisk.CancelledError):
                ctx.decode(b)
            self.assertEqual(ctx.seq_len(0), 0)  # rolled back
            stop.clear()
            ctx.decode(b)
            self.assertEqual(ctx.seq_len(0), len(toks))
        self.assertTrue(calls)

    def test_model_outlives_its_users(self):
        m = brisk.Model(MODEL)
        ctx = brisk.Context(m)
        with self.assertRaises(brisk.InvalidStateError):
            m.close()
        ctx.close()
        m.close()
        gen = self.model.generate(PROMPT, max_tokens=4)
        next(gen)  # a generation in progress holds its own context
        gen.close()

    def test_default_model_path(self):
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            os.symlink(os.path.abspath(MODEL), os.path.join(d, "SmolLM2-135M-Instruct.Q4_1.gguf"))
            old = os.environ.get("BRISK_CACHE_DIR")
            os.environ["BRISK_CACHE_DIR"] = d
            try:
                with brisk.Model() as m:
                    self.assertEqual(m.tokenize(PROMPT), ints(REF["tokens"]))
            finally:
                if old is None:
                    del os.environ["BRISK_CACHE_DIR"]
                else:
                    os.environ["BRISK_CACHE_DIR"] = old

    def test_log_callback(self):
        lines = []
        brisk.set_log_callback(lambda level, msg: lines.append((level, msg)), 0)
        try:
            brisk.Model(MODEL).close()
        finally:
            brisk.set_log_callback(None)
        self.assertTrue(all(isinstance(m, str) for _, m in lines))

    def test_readme_examples(self):
        with open(os.path.join(HERE, "..", "README.md")) as f:
            readme = f.read()
        blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
        self.assertEqual(len(blocks), 2)
        code = blocks[1].replace('"stories260K.gguf"', repr(MODEL))
        exec(compile(code, "README.md", "exec"), {"__name__": "readme"})
        try:
            brisk.default_model_path()
        except brisk.NotFoundError:
            self.skipTest("the default model is not fetched (run `brisk run` once)")
        exec(compile(blocks[0], "README.md", "exec"), {"__name__": "readme"})


@unittest.skipUnless(HAVE_MODEL, "needs ../shared/models/stories260K.gguf")
class NoLeaks(unittest.TestCase):
    def test_everything_freed(self):
        gc.collect()
        base = brisk.memory_allocated()
        tracemalloc.start()
        for _ in range(3):
            m = brisk.Model(MODEL)
            "".join(m.generate(PROMPT, max_tokens=8, temperature=0))
            with brisk.Engine(m, kv_tokens=256) as e:
                rid = e.submit(PROMPT, max_tokens=4)
                list(e.stream(rid))
            m.close()
        gc.collect()
        snap1 = tracemalloc.take_snapshot()
        for _ in range(3):
            m = brisk.Model(MODEL)
            "".join(m.generate(PROMPT, max_tokens=8, temperature=0))
            m.close()
        gc.collect()
        snap2 = tracemalloc.take_snapshot()
        tracemalloc.stop()
        growth = sum(s.size_diff for s in snap2.compare_to(snap1, "filename"))
        self.assertLess(growth, 64 * 1024)
        self.assertEqual(brisk.memory_allocated(), base)


class Abi(unittest.TestCase):
    def test_abi_version_checked(self):
        self.assertEqual(brisk._lib.brisk_abi_version(), _ffi.ABI_VERSION)
        self.assertRegex(brisk.version(), r"^\d+\.\d+\.\d+$")

    def test_other_abi_refused(self):
        fake = os.environ.get("BRISK_FAKE_ABI_LIBRARY")
        if not fake:
            self.skipTest("BRISK_FAKE_ABI_LIBRARY (bindings/tests/fake_abi.c) not given")
        env = dict(os.environ, BRISK_LIBRARY=fake)
        r = subprocess.run([sys.executable, "-c", "import brisk"], env=env, capture_output=True,
                           text=True)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("ImportError", r.stderr)
        self.assertIn("ABI version 1, these bindings need 0", r.stderr)


if __name__ == "__main__":
    unittest.main()
