"""onnx's C++ shape inference and checker, run on untrusted models in a child process.

Why: reduction builds models no solver vouched for (attributes dropped, input
shapes halved), and onnx's own shape inference can abort the whole process on
some of them (seen: a libstdc++ assertion `std::clamp ... !(__hi < __lo)`
killed a campaign's export phase). A crash or hang in the child only marks that
candidate invalid; the child is restarted for the next call.

The child is `python -m ofuzz.core.onnx_guard` speaking length-prefixed frames on
its stdin/stdout (not multiprocessing, whose spawn re-runs the caller's main
script). Calls are serialised by a lock; each is a few milliseconds.
"""
from __future__ import annotations

import os
import select
import struct
import subprocess
import sys
import threading

import onnx

TIMEOUT = 60.0
_HEAD = struct.Struct("<BI")  # flags / status, payload length
INFER, STRICT, CHECK = 1, 2, 4


def _serve() -> None:
    """Child side: read (flags, model) frames, answer (1, model) when it passes, (0, b'') when onnx rejects it."""
    inp, out = sys.stdin.buffer, os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything onnx prints goes to stderr, never into the frames
    while True:
        head = inp.read(_HEAD.size)
        if len(head) < _HEAD.size:
            return
        flags, n = _HEAD.unpack(head)
        m = onnx.load_from_string(inp.read(n))
        try:
            if flags & INFER:
                # check_type: onnx then also types the output of a context-dependent function operator
                # (GroupNormalization-21); without it the output and everything downstream stayed untyped, so the
                # localiser could not expose them, the reducer could cut nothing and strict inference failed at every
                # consumer (four onnx2tf repros of seeds 30 and 51 stayed at 3-6 nodes, hand triage 20 #24)
                m = onnx.shape_inference.infer_shapes(m, check_type=True, strict_mode=bool(flags & STRICT))
            if flags & CHECK:
                onnx.checker.check_model(m, full_check=True)
            data, ok = m.SerializeToString(), 1
        except Exception:
            data, ok = b"", 0
        out.write(_HEAD.pack(ok, len(data)) + data)
        out.flush()


class OnnxGuard:
    """One lazily started child; thread-safe; restarted after a crash or a hang."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self.crashes = 0

    def _child(self) -> subprocess.Popen[bytes]:
        if self._proc is None or self._proc.poll() is not None:
            self._proc = subprocess.Popen([sys.executable, "-m", "ofuzz.core.onnx_guard"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=subprocess.DEVNULL, start_new_session=True)
        return self._proc

    def _read(self, proc: subprocess.Popen[bytes], n: int) -> bytes:
        fd, buf = proc.stdout.fileno(), b""  # type: ignore[union-attr]
        while len(buf) < n:
            ready, _, _ = select.select([fd], [], [], TIMEOUT)
            if not ready:
                raise TimeoutError
            chunk = os.read(fd, n - len(buf))
            if not chunk:
                raise EOFError
            buf += chunk
        return buf

    def run(self, model: onnx.ModelProto, flags: int) -> onnx.ModelProto | None:
        """The inferred and/or checked model, or None if onnx rejects it, crashes on it or hangs."""
        data = model.SerializeToString()
        with self._lock:
            proc = self._child()
            try:
                proc.stdin.write(_HEAD.pack(flags, len(data)) + data)  # type: ignore[union-attr]
                proc.stdin.flush()  # type: ignore[union-attr]
                ok, n = _HEAD.unpack(self._read(proc, _HEAD.size))
                payload = self._read(proc, n)
            except (BrokenPipeError, EOFError, TimeoutError, OSError):
                self.crashes += 1
                proc.kill()
                proc.wait()
                self._proc = None
                return None
        return onnx.load_from_string(payload) if ok else None

    def close(self) -> None:
        with self._lock:
            if self._proc is not None:
                self._proc.kill()
                self._proc.wait()
                self._proc = None


GUARD = OnnxGuard()


def valid(model: onnx.ModelProto) -> bool:
    """Passes onnx's full checker (which includes strict shape inference), checked out of process."""
    return GUARD.run(model, CHECK) is not None


def inferred(model: onnx.ModelProto, strict: bool = False, check: bool = False) -> onnx.ModelProto | None:
    """onnx shape inference (and, with `check`, the full checker) out of process, in one round
    trip; None when it fails or crashes."""
    return GUARD.run(model, INFER | (STRICT if strict else 0) | (CHECK if check else 0))


if __name__ == "__main__":
    _serve()


def static_shapes(model: onnx.ModelProto, feeds: dict) -> dict[str, tuple[int, ...]] | None:
    """Every tensor's static shape as inference gives it, the feeds' own (None: inference rejects the model)."""
    import numpy as np

    done = inferred(model, strict=False, check=False)
    if done is None:
        return None
    shapes = {vi.name: tuple(d.dim_value for d in vi.type.tensor_type.shape.dim)
              for vi in [*done.graph.input, *done.graph.value_info, *done.graph.output]}
    shapes.update({k: tuple(np.shape(v)) for k, v in feeds.items()})
    return shapes
