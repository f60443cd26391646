from __future__ import annotations

from pathlib import Path

import pytest

from ofuzz.gen.blocks import subgraph_entries
from ofuzz.gen.corpus import CorpusError, load_corpus

PAPER_50 = {
    "Add", "ArgMax", "AvgPool", "BatchToSpaceND", "BiasAdd", "Cast", "Ceil", "ConcatV2", "Conv2D", "CropAndResize",
    "Conv2DBackpropInput", "DepthwiseConv2dNative", "Exp", "ExpandDims", "Fill", "FusedBatchNorm", "GatherV2", "Greater",
    "LRN", "Maximum", "MaxPool", "Minimum", "Mul", "RealDiv", "Max", "Mean", "Prod", "Sum", "Relu", "Relu6", "Reshape",
    "ResizeBilinear", "ResizeNearestNeighbor", "Rsqrt", "Selu", "Shape", "Sigmoid", "Slice", "Softmax", "SpaceToBatchND",
    "Sqrt", "Square", "Squeeze", "StridedSlice", "Sub", "Tanh", "Tile", "TopKV2", "Transpose",
}


def test_default_corpus_size(corpus):
    assert len(corpus.operator_types) >= 90
    assert len(corpus) >= 130


def test_paper_operators_all_mapped(corpus):
    mapped = {b.paper for b in corpus if b.paper}
    assert PAPER_50 <= mapped, sorted(PAPER_50 - mapped)


def test_paper_worked_examples(corpus):
    a = corpus["Conv2d+Relu+Pow+Concat"]
    b = corpus["Conv2d+Conv2d+Add+Add"]
    assert a.edges == ((0, 1), (1, 3), (2, 3)) and a.in_degree == {2}
    assert b.edges == ((0, 2), (1, 2), (2, 3), (2, 3)) and b.in_degree == {2}
    assert subgraph_entries(corpus["SSD-FeatureConcat"]) == 3


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "bad.yaml"
    p.write_text(text)
    return p


@pytest.mark.parametrize(
    "text, needle",
    [
        ("blocks: [ {name: X, op: Relu, in_degree: [1}", "not valid YAML"),
        ("nothing: 1", "'blocks:' list"),
        ("blocks:\n  - {name: X}", "block X: field op"),
        ("blocks:\n  - {name: X, op: NoSuchOp}", "block X: field op: 'NoSuchOp' is not an ONNX operator"),
        ("blocks:\n  - {name: X, op: Relu, rule: nope}", "block X: field rule: unknown rule 'nope'"),
        ("blocks:\n  - {name: X, op: Elu, params: {alpha: {range: [2, 1]}}}", "block X: field params.alpha: lower bound"),
        ("blocks:\n  - {name: X, op: Elu, params: {alhpa: [1.0]}}", "block X: field params.alhpa: Elu has no attribute"),
        ("blocks:\n  - {name: X, op: Conv, rule: conv, params: {kernal: [3]}}", "block X: field params.kernal: rule 'conv' does not read"),
        ("blocks:\n  - {name: X, op: Relu, in_degree: [0]}", "block X: field in_degree"),
        ("blocks:\n  - {name: X, op: Relu, colour: red}", "block X: unknown field"),
        ("blocks:\n  - {name: X, ops: [Relu, Relu], edges: [[1, 0]]}", "block X: field edges: [1, 0] must point forward"),
        ("blocks:\n  - {name: X, ops: [Relu, Relu, Relu], edges: [[0, 1]]}", "exactly one output op"),
        ("blocks:\n  - {name: X, ops: [Relu, Nope], edges: [[0, 1]]}", "block X: field ops[1]: 'Nope' is not an operator block"),
        ("blocks:\n  - {name: X, op: OneHot, rule: onehot, params: {on: [1]}}", "is not a string"),
        ("blocks:\n  - {name: X, op: Elu, params: {alpha: [1.0]}, constraints: ['alpha >']}", "field constraints"),
        ("blocks:\n  - {name: X, op: Elu, params: {alpha: [1.0]}, constraints: ['beta > 0']}", "field constraints"),
        ("blocks:\n  - {name: X, op: Elu, params: {alpha: [1.0]}, constraints: ['alpha > 5']}", "no parameter draw satisfies"),
        ("blocks:\n  - {name: Relu, op: Relu}", "already defined"),
    ],
)
def test_validation_errors_name_file_block_field(tmp_path, text, needle):
    bad = _write(tmp_path, text)
    paths = [bad] if "Relu, Relu" not in text and "Nope" not in text and "name: Relu," not in text else [Path("opsets"), bad]
    with pytest.raises(CorpusError) as ei:
        load_corpus(paths)
    msg = str(ei.value)
    assert needle in msg, msg
    assert "\n" not in msg
    if "block" in needle:
        assert str(bad) in msg


def test_cli_reports_bad_corpus_in_one_line(tmp_path):
    import subprocess
    import sys

    bad = _write(tmp_path, "blocks:\n  - {name: X, op: NoSuchOp}")
    r = subprocess.run([sys.executable, "-m", "ofuzz.cli", "corpus", "--corpus", str(bad)], capture_output=True, text=True)
    assert r.returncode == 2
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "NoSuchOp" in lines[0], r.stderr


def test_user_block_extends_corpus_without_code(tmp_path):
    extra = _write(tmp_path, "blocks:\n  - name: MyElu\n    op: Elu\n    params: {alpha: {range: [0.5, 0.6]}}\n")
    c = load_corpus([Path("opsets"), extra])
    assert "MyElu" in c.blocks
