"""Root causes: findings clustered by what their reduced repro holds, ranked by severity.

A signature says how a failure looked; a root cause says what triggers it.
Localisation naming another node, or a message differing by a word, used to
split one defect into many findings, while one message could hide repros with
different operators.  After reduction the repro is small and every part of it
matters, so its content is the key: blamed engine, failure class, the reduced
operator(s), the non-default attributes that remain (names; string-valued modes
with their value) and the input-value traits the finding still needs.
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import onnx

from ofuzz.core.vocab import DCF, IF, PROCESS_DIED, TIMEOUT, crash_like, crash_or_hang  # noqa: F401  (crash predicates re-exported for triage's users)

# Severity: lower is worse.  crash/hang > wrong shape or dtype > wrong values > NaN/Inf handling > failures to run/convert.
SEVERITY = {"crash": 0, "hang": 0, "shape": 1, "dtype": 1, "missing": 1, "value": 2, "nan": 3, "inf": 3, "failure": 4, "inference": 4, "conversion": 5}
SEVERITY_NAMES = {0: "crash/hang", 1: "wrong shape/dtype", 2: "wrong values", 3: "NaN/Inf handling", 4: "inference failure", 5: "conversion failure"}


_MODE = re.compile(r"[A-Za-z_]{1,32}")


@dataclass(frozen=True)
class RootKey:
    engine: str
    status: str  # MCF | IF | DCF
    failure: str  # crash:SIGSEGV | hang | exception:RuntimeError | value | nan | shape ...
    ops: tuple[str, ...]
    attrs: tuple[str, ...]
    traits: tuple[str, ...]
    message: str = ""  # only for failures whose repro could not be reduced: then the message is all we know

    def id(self) -> str:
        return "rc-" + hashlib.sha1(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:8]

    def severity(self) -> int:
        head = self.failure.split(":")[0]
        if head in PROCESS_DIED:
            return 0
        if head == TIMEOUT:
            return 0
        if self.status == DCF:
            return SEVERITY.get(head, 2)
        return SEVERITY["inference"] if self.status == IF else SEVERITY["conversion"]

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "id": self.id(), "severity": self.severity()}

    @staticmethod
    def from_json(d: dict[str, Any]) -> "RootKey":
        return RootKey(d["engine"], d["status"], d["failure"], tuple(d["ops"]), tuple(d["attrs"]), tuple(d["traits"]), d.get("message", ""))


def failure_of(status: str, category: str = "", kind: str = "", etype: str = "") -> str:
    """The failure class part of a key: DCF category, or outcome kind with exception type / signal."""
    if status == DCF:
        return category or "value"
    if kind in PROCESS_DIED:
        return f"{kind}:{etype}" if etype else kind
    if kind == TIMEOUT:
        return TIMEOUT
    return f"{kind or 'exception'}:{etype}" if etype else (kind or "exception")


def attr_marks(model: onnx.ModelProto) -> tuple[str, ...]:
    """Attributes left after reduction (each was tried back at its default and the finding needed it).
    Names only, except string-valued modes whose value is the point (auto_pad=SAME_UPPER, mode=cubic)."""
    marks = set()
    for n in model.graph.node:
        for a in n.attribute:
            value = a.s.decode(errors="replace") if a.type == onnx.AttributeProto.STRING else ""
            if value and _MODE.fullmatch(value):  # a mode (SAME_UPPER, cubic, half_pixel), not free text like an Einsum equation
                marks.add(f"{n.op_type}.{a.name}={value}")
            elif a.type in (onnx.AttributeProto.TENSOR, onnx.AttributeProto.GRAPH):
                continue
            else:
                marks.add(f"{n.op_type}.{a.name}")
    return tuple(sorted(marks))


def value_traits(feeds: dict[str, np.ndarray]) -> tuple[str, ...]:
    """Input-value traits of a repro: the ones a reduced repro still has are the ones its finding needs."""
    t: set[str] = set()
    for a in feeds.values():
        a = np.asarray(a)
        if a.size == 0:
            t.add("empty")
            continue
        if np.issubdtype(a.dtype, np.floating):
            if np.isnan(a).any():
                t.add("nan")
            if np.isposinf(a).any() or np.isneginf(a).any():
                t.add("inf")
            fin = a[np.isfinite(a)]
            if fin.size and (np.abs(fin) > 1e4).any():
                t.add("large")
            if (fin < 0).any():
                t.add("negative")
            if (fin == 0).any():
                t.add("zero")
    return tuple(sorted(t))


def key_of(engine: str, status: str, failure: str, model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> RootKey:
    ops = tuple(sorted({n.op_type for n in model.graph.node}))
    return RootKey(engine, status, failure, ops, attr_marks(model), value_traits(feeds))


WELL_REDUCED = 3  # nodes
UPSTREAM = "upstream"


def upstream_of(key: RootKey, culprits: onnx.ModelProto) -> RootKey:
    """The key of a failure whose failing operator runs fine alone (`witness`): what feeds it, and nothing of how the
    consumer complained (its message and exception type vary with the consumer, not with the defect)."""
    marks = tuple(a for a in attr_marks(culprits) if "=" in a)
    return RootKey(key.engine, key.status, UPSTREAM, tuple(sorted({n.op_type for n in culprits.graph.node})), marks, (), "")


PATTERN = "pattern"


def pattern_key(key: RootKey, culprits: onnx.ModelProto, edges: list[str]) -> RootKey:
    """The key of an upstream failure that needs its culprit to feed the consumer directly (`edges`: "Reshape>Squeeze";
    with an Identity between them the engine is right): the converter rewrites that pair as a pattern, which is another
    defect than a bad tensor handed to any consumer (hand triage 25: onnx2tf's Reshape skipped when all its consumers
    are Squeezes, and its folding of two Adds' constants, sat under `upstream Reshape` and `upstream Add`)."""
    ops = sorted({op for e in edges for op in e.split(">")})
    marks = tuple(a for a in attr_marks(culprits) if "=" in a)
    return RootKey(key.engine, key.status, PATTERN, tuple(ops), marks, (), ", ".join(sorted(edges)))


OMITTED_DEFAULT = "leaves out an attribute the spec defaults in prose"
ANY_STAGE = "MCF/IF"  # a crash keyed by its trigger: at conversion or at run time, whichever consumer the repro kept


def omitted_default_key(key: RootKey, wrote: list[str]) -> RootKey:
    """The key of a failure that goes away when the omitted prose defaults (`wrote`: "MaxPool.strides", see
    prose_defaults) are written out: the engine and the attribute, not the operator or the stage. MNN's pools
    without strides came back as five root causes in the seed-76 campaign: a run-time SIGFPE per operator, and a
    converter SIGILL whenever a consumer made the converter compute shapes."""
    return _shown_trigger_key(key, {f"{w.split('.', 1)[1]} omitted" for w in wrote}, OMITTED_DEFAULT)


def _shown_trigger_key(key: RootKey, attrs: set[str], message: str) -> RootKey:
    """A key by the trigger alone: engine, failure (any crash alike, at whichever stage) and the trigger's marks."""
    crash = crash_like(key.failure)
    return RootKey(key.engine, ANY_STAGE if crash else key.status, "crash" if crash else key.failure, (), tuple(sorted(attrs)), (), message)


SPELLED_OUT = "gets a shorthand wrong that it gets right spelled out"
SCHEMA_DEFAULT = "leaves out an attribute at the default its schema gives"
IGNORED_ATTRIBUTE = "gives the same output whatever value the spec's attribute takes"
SHOWN_TRIGGERS = (OMITTED_DEFAULT, SPELLED_OUT, SCHEMA_DEFAULT, IGNORED_ATTRIBUTE)  # keys whose trigger the triage showed by rewriting the repro


def schema_default_key(key: RootKey, wrote: list[str]) -> RootKey:
    """The key of a wrong shape that goes away when an attribute the node left out is written at its schema default
    (`wrote`: "ReduceSumSquare.keepdims"): the engine and the attribute, not the operator. MNN's one Reduce transform
    (OnnxReduceL2.cpp) starts from keepDims = false for ReduceL1, L2, LogSum, LogSumExp and SumSquare alike, while its
    other Reduce operators default right (hand triage 18 #3)."""
    return _shown_trigger_key(key, {f"{w.split('.', 1)[1]} omitted" for w in wrote}, SCHEMA_DEFAULT)


def ignored_attribute_key(key: RootKey, ignored: list[str]) -> RootKey:
    """The key of a wrong output that an attribute the engine does not read explains (`ignored`: "Resize.nearest_mode",
    see triggers.ignored_attribute_trigger): the engine and the attribute, not the value the repro happened to give it.
    onnx2tf's Resize never reads nearest_mode (ops/Resize.py), and hand triage 28 found it as two root causes, one with
    nearest_mode=floor and one with the default round_prefer_floor."""
    return _shown_trigger_key(key, {f"{w} ignored" for w in ignored}, IGNORED_ATTRIBUTE)


def spelled_out_key(key: RootKey, wrote: list[str]) -> RootKey:
    """The key of a failure that goes away when a shorthand is spelled out (`wrote`: "AveragePool.auto_pad=SAME_LOWER",
    see prose_defaults.auto_pad_written_out): the engine, the operator and the shorthand, not the stage or how it
    failed. onnx2tf's AveragePool with SAME_LOWER came back as four root causes in the seed-76 campaign: wrong values
    in one mode, two conversion errors and an upstream failure in the other."""
    # SAME_UPPER and SAME_LOWER alike: a handler that mishandles one mishandles the other (hand triage 12: onnx2tf's
    # AveragePool reads its pool size from the absent pads under either; onnxruntime's MaxPool ignores dilations)
    return _shown_trigger_key(key, {f"{w.split('=', 1)[0]} spelled out" for w in wrote}, SPELLED_OUT)


def coarsen(key: RootKey, nodes: int, message: str, failed_op: str | None = None) -> RootKey:
    """The key of a failure (IF/MCF) is what fails and how, not every attribute its repro kept.

    A repro that stayed large is keyed by its normalised message alone: an unreduced repro's operator set is mostly
    bystanders, and keying on it split one converter defect into dozens of 'root causes' (217 for TensorFlow in a
    30-minute campaign). A well-reduced one is keyed by its operators, its string modes (mode=bicubic is often the
    point) and its normalised message; numeric attributes and value traits are left out, since a converter that
    crashes on LSTM crashes with or without `direction` (hand triage #3 found such pairs as duplicates).

    When the engine named the operator it failed in (`failed_op`), that operator is the key, whatever else the repro
    had to keep: the same converter handler failing the same way behind a BatchNormalization or a Reshape is one
    defect (hand triage #5: Pow, GatherND, GridSample and OneHot each came back as two or three root causes)."""
    if key.status == DCF or key.failure in (UPSTREAM, PATTERN) or key.message in SHOWN_TRIGGERS:
        return key
    crash = crash_like(key.failure)
    # a crash's signal and last log line vary between runs of one defect (MNN's LSTM converter: SIGSEGV, SIGABRT or
    # bad_alloc after different lines, or a ConverterCrash its adapter reports): the crash and where it happens are
    # the key, not how it looked this time
    failure, message = ("crash", "") if crash else (key.failure, first_sentence(message))
    layerless = _KERAS_LAYER.sub(r"\1", message).strip()  # where the key names the operator, the layer it failed in adds nothing
    if failed_op:  # a crash's modes vary like its signal (MNN's LSTM converter crash: forward and reverse)
        modes = () if crash else tuple(a for a in key.attrs if "=" in a and a.startswith(f"{failed_op}."))
        return RootKey(key.engine, key.status, failure, (failed_op,), modes, (), layerless)
    if crash:
        return RootKey(key.engine, key.status, failure, key.ops if nodes <= WELL_REDUCED else (), (), (), "")
    if nodes > WELL_REDUCED:
        return RootKey(key.engine, key.status, failure, (), (), (), message)
    return RootKey(key.engine, key.status, failure, key.ops, tuple(a for a in key.attrs if "=" in a), (), layerless)


_SENTENCE_END = re.compile(r"\.\s+(?=[A-Z])")
# Keras wraps an error inside a converted TF op as 'Exception encountered when calling layer "tf.math.minimum" (type
# TFOpLambda).': the layer is whichever TF call the handler's branch made, not the defect (hand triage 9: onnx2tf's
# IsInf builds a bool zero tensor and fails in tf.math.maximum or tf.math.minimum depending on detect_negative)
_KERAS_LAYER = re.compile(r'(calling layer )["\'][^"\']*["\'] ?')


def first_sentence(message: str, at_least: int = 20) -> str:
    """What a failure says, without the details it goes on to print: Keras's "An `initial_state` was passed that is not
    compatible with `cell.state_size`. Received `state_spec`=ListWrapper([...])" names the same defect whatever the
    spec it received (two root causes of one onnx2tf LSTM defect in the 20-minute campaign)."""
    m = _SENTENCE_END.search(message, at_least)
    return message[: m.start()] if m else message


# No key joins failures by *how* an optional input was left out (onnx2tf's RNN gave KeyError '' for a B named '' and
# TypeError 'NoneType' for an absent B, once keyed alike): the hand triage found them fixed at different lines
# (RNN.py:377 and :587), hand triage 22 an LSTM without B (:492) and one without initial_h (:801) under that one key.
# The source line a failure raised at (merge rule `same-source-line`) is what joins them when they are one defect.
