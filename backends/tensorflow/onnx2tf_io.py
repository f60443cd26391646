"""What both onnx2tf adapters need around a conversion: where it failed, and its layouts in and out.

Shared by `adapter.py` (onnx2tf 1.x through TensorFlow) and `flatbuffer_adapter.py` (onnx2tf 2.x writing the TFLite
flatbuffer itself): one converter, one way of naming the node and source line it failed at, and one reading of
NCHW↔NHWC. Imported as a module beside the adapter (the worker and repro.py put the adapter's folder on the path).
"""
from __future__ import annotations

import os
import re
from typing import Any, Callable

import numpy as np


def failed_node(exc: BaseException) -> str | None:
    """The ONNX node onnx2tf was converting when it raised: the deepest frame holding its `graph_node`."""
    name, tb = None, exc.__traceback__
    while tb is not None:
        node = tb.tb_frame.f_locals.get("graph_node")
        if isinstance(getattr(node, "name", None), str) and node.name:
            name = re.sub("^wa/", "/", node.name)  # onnx2tf's own renaming of names that start with '/'
        tb = tb.tb_next
    return name


def where(exc: BaseException) -> str:
    """The onnx2tf source line the failure came from, and its function (its deepest frame inside onnx2tf:
    "ops/Max.py:86:make_node"). A converter maintainer's unit of a defect is that line: two operators failing in one
    shared helper are one defect, and one handler failing with two messages at one line is one too."""
    found, handler, last, tb = "", "", "", exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        path = code.co_filename.replace(os.sep, "/")
        last = path
        if "/onnx2tf/" in path:
            found = f"{path.rsplit('/onnx2tf/', 1)[1]}:{tb.tb_lineno}:{code.co_name}"
            if found.startswith("ops/"):
                handler = found
        tb = tb.tb_next
    # a shared helper whose own line failed a lookup or an assertion (convert_axis indexing a list with the axis it was
    # handed) rejects what its caller passed: the caller's line is the defect, so it is named too ("... via
    # ops/Squeeze.py:80:make_node"); a library call failing inside the helper (numpy's transpose, tf.norm) is the
    # helper's own misuse, named by the helper alone
    if found.startswith("utils/") and "/onnx2tf/" in last and handler and isinstance(exc, (LookupError, AssertionError)):
        return f"{found} via {handler}"
    return found


def name_failed_nodes(raised: BaseException, *failures: BaseException) -> None:
    """Tell ofuzz which nodes each conversion mode failed on (the worker forwards `failed_nodes`): the message names
    a TensorFlow layer, not the ONNX node, and a model both modes fail on may fail at a different node in each.
    Also where in onnx2tf the reported failure happened (`where`)."""
    nodes: list[str] = []
    for exc in failures:
        n = failed_node(exc)
        if n and n not in nodes:
            nodes.append(n)
    try:
        raised.failed_nodes = nodes  # type: ignore[attr-defined]
        raised.where = where(raised)  # type: ignore[attr-defined]
    except (AttributeError, TypeError):
        pass


def name_layer_node(exc: BaseException, node_of_output: dict[str, str]) -> None:
    """At run time TensorFlow names the Keras layer that failed, and onnx2tf names a layer after the ONNX tensor it
    computes ("calling layer 't31_Greater'"): the node with that output is where it failed, which lets the fuzzer's
    reducer cut to that node's cone instead of searching the whole model."""
    m = re.search(r"calling layer ['\"]([^'\"]+)['\"]", str(exc))
    node = node_of_output.get(m.group(1)) if m else None
    if node:
        try:
            exc.failed_nodes = [node]  # type: ignore[attr-defined]
        except (AttributeError, TypeError):
            pass


def channel_last_inputs(inputs: list[str], onnx_inputs: dict[str, tuple[int, ...]], got: list[tuple[int, ...]]) -> set[str]:
    """Inputs a default-mode conversion takes as the channel-last permutation of their ONNX shape (`got`: the converted
    model's input shapes, in `inputs` order, -1 for an unknown dimension)."""
    out, kept, ambiguous = set(), 0, []
    for name, shape in zip(inputs, got):
        want = onnx_inputs.get(name, ())
        if not 3 <= len(want) <= 5:
            continue
        if len(set(want[1:])) == 1 and want[1] > 1:
            ambiguous.append(name)  # [1,2,2,2]: both layouts have this shape
        elif shape != want and shape == tuple(want[p] for p in (0, *range(2, len(want)), 1)):
            out.add(name)
        elif shape == want:
            kept += 1
    if ambiguous and not kept:  # onnx2tf's default turns every 3-5-D input channel-last; unless it visibly did not
        out.update(ambiguous)
    return out


def to_channel_last(x: np.ndarray) -> np.ndarray:
    return np.transpose(x, (0, *range(2, x.ndim), 1))


def restore_layout(ys: list[np.ndarray], onnx_shapes: list[tuple[int, ...]]) -> list[np.ndarray]:
    """Undo onnx2tf's NCHW→NHWC on an output whose shape shows it unambiguously: an output whose shape is the
    channel-last permutation of its ONNX shape (and not the ONNX shape itself) is transposed back; anything else is
    returned as the converted model produced it, for the oracle to judge."""
    out = []
    for y, want in zip(ys, list(onnx_shapes) + [None] * len(ys)):
        y = np.asarray(y)
        if want is not None and 3 <= y.ndim <= 5 and y.shape != want:
            perm = (0, *range(2, y.ndim), 1)  # NCHW -> NHWC
            if y.shape == tuple(want[p] for p in perm):
                y = np.transpose(y, np.argsort(perm))
        out.append(y)
    return out


def set_litert_input(interp: Any, detail: dict, x: np.ndarray) -> None:
    """Feed one LiteRT interpreter input, resizing it first when the model's static shape differs from the feed's."""
    if tuple(detail["shape"]) != x.shape:
        interp.resize_tensor_input(detail["index"], list(x.shape))
        interp.allocate_tensors()
    interp.set_tensor(detail["index"], x.astype(detail["dtype"]))


def litert_outputs(interp: Any, outputs: list[str], matchers: list[Callable[[str, str], bool]]) -> list[np.ndarray]:
    """The invoked interpreter's outputs in the order of the ONNX `outputs`, each found by the first of `matchers`
    (interpreter name, ONNX name) that finds one; every output in the interpreter's order when some is not found."""
    details = interp.get_output_details()
    by_name = {}
    for d in details:
        name = next((n for match in matchers for n in outputs if match(d["name"], n)), None)
        by_name[name or d["name"]] = interp.get_tensor(d["index"])
    if all(n in by_name for n in outputs):
        return [by_name[n] for n in outputs]
    return [interp.get_tensor(d["index"]) for d in details]
