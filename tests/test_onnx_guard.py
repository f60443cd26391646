"""onnx's checker/shape inference run out of process: a C++ abort inside onnx must not kill ofuzz."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import onnx
from onnx import TensorProto, helper

from ofuzz.core import onnx_guard

ABORTS = Path(__file__).parent / "data" / "onnx_checker_abort.onnx"  # a reduction candidate (attributes dropped)


def small() -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _aborts_in_process() -> bool:
    code = f"import onnx; onnx.checker.check_model(onnx.load({str(ABORTS)!r}), full_check=True)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    return r.returncode < 0 or "Assertion" in r.stderr


def test_guard_survives_the_abort_and_keeps_answering():
    before = onnx_guard.GUARD.crashes
    assert onnx_guard.valid(onnx.load(str(ABORTS))) is False
    if _aborts_in_process():  # onnx 1.23.2 aborts here (std::clamp assertion); a later onnx may just reject it
        assert onnx_guard.GUARD.crashes == before + 1
    else:
        assert onnx_guard.GUARD.crashes == before
    inferred = onnx_guard.inferred(small(), strict=True)
    assert inferred is not None
    assert [d.dim_value for d in inferred.graph.output[0].type.tensor_type.shape.dim] == [2, 3]
    assert onnx_guard.valid(small())


def test_a_crashing_child_is_replaced():
    """Whatever onnx version is installed: kill the child mid-call and the next call still answers."""
    onnx_guard.GUARD.run(small(), onnx_guard.CHECK)
    proc = onnx_guard.GUARD._proc
    assert proc is not None
    proc.kill()
    proc.wait()
    assert onnx_guard.valid(small())  # the dead child is noticed and replaced; the fresh one answers
    assert onnx_guard.GUARD._proc is not None and onnx_guard.GUARD._proc.pid != proc.pid


def test_guard_rejects_an_invalid_model_without_a_crash():
    m = small()
    m.graph.output[0].type.tensor_type.shape.dim[1].dim_value = 4  # declared [2, 4], inferred [2, 3]
    before = onnx_guard.GUARD.crashes
    assert onnx_guard.valid(m) is False
    assert onnx_guard.inferred(m, strict=True) is None
    assert onnx_guard.GUARD.crashes == before
