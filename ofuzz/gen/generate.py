"""The generation pipeline: seed → graph → mutations → blocks → solver → ONNX.

One seeded numpy Generator per model (derived from the campaign seed and the
model's index) drives every random choice, so the same seed and options give
byte-identical models regardless of what was generated before.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from ofuzz import __version__
from ofuzz.gen.blocks import Corpus
from ofuzz.gen.coverage import OpRecord
from ofuzz.gen.emit import check_model, emit_model
from ofuzz.gen.genome import Genome, assign_blocks, single_block_genome
from ofuzz.gen.graphs import DEFAULT_P, K_CHOICES, make_graph
from ofuzz.gen.mutations import apply_mutations, random_input_shape, select_mutations
from ofuzz.core.npz import npz_bytes
from ofuzz.gen.solver.builder import DTYPE_BY_CODE, INT32, INT64, Builder
from ofuzz.gen.solver.realise import realise
from ofuzz.gen.solver.rules import OPSET
from ofuzz.gen.values import ValuePolicy

DEFAULT_CAP = 1 << 20


@dataclass(frozen=True)
class GenerateOptions:
    blocks: tuple[int, int] = (10, 10)  # inclusive range, drawn uniformly per model
    graph: str = "mixed"
    mutations: bool = True
    opset: int = OPSET
    opsets: tuple[int, int] | None = None  # a range: each model's ONNX version drawn from it (its own random stream)
    cap: int = DEFAULT_CAP
    values: ValuePolicy = field(default_factory=ValuePolicy)
    check: bool = False  # run the full onnx checker on every model
    prefer: float = 1.0  # probability that a node takes a chooser-preferred block when one fits
    int_inputs: float = 0.0  # share of models whose graph inputs are integers (int32 or int64) where the block takes them
    input_dtype: int | None = None  # that model's integer input type (drawn from `int_inputs` per model)


@dataclass
class GeneratedModel:
    id: str
    model: onnx.ModelProto
    inputs: dict[str, np.ndarray]
    provenance: dict[str, Any]
    genome: Genome

    @property
    def records(self) -> list["OpRecord"]:
        return [OpRecord.from_json(r) for r in self.provenance["coverage_records"]]

    def save(self, out_dir: Path) -> Path:
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / f"{self.id}.onnx"
        path.write_bytes(self.model.SerializeToString(deterministic=True))
        (out_dir / f"{self.id}.inputs.npz").write_bytes(npz_bytes(self.inputs))
        (out_dir / f"{self.id}.json").write_text(json.dumps(self.provenance, indent=1, sort_keys=True))
        return path


def model_id(seed: int, index: int) -> str:
    return f"s{seed}-{index:06d}"


def generate_one(
    corpus: Corpus, seed: int, index: int, opts: GenerateOptions, preferred: list[str] | None = None, candidate: int = 0
) -> GeneratedModel:
    """`candidate` k > 0: the k-th alternative model for this index, on a stream of its own (a campaign that picks the
    most novel of several candidates, ofuzz.gen.novelty); candidate 0 is the model the index has always given."""
    tail = [] if candidate == 0 else [1000 + candidate]
    if opts.opsets is not None:  # drawn apart from the model's stream, so a single version gives today's models
        lo_v, hi_v = opts.opsets
        opts = replace(opts, opset=int(np.random.default_rng([seed, index, 18, *tail]).integers(lo_v, hi_v + 1)), opsets=None)
    if opts.int_inputs > 0:  # its own stream too: a share of 0 gives today's float models, byte for byte
        r = np.random.default_rng([seed, index, 19, *tail])
        opts = replace(opts, input_dtype=(INT32, INT64)[int(r.integers(2))] if r.random() < opts.int_inputs else None)
    corpus = corpus.at(opts.opset)
    if preferred:
        preferred = [b for b in preferred if b in corpus.blocks]  # a block of a later version waits for a model of it
    rng = np.random.default_rng([seed, index, *tail])
    lo, hi = opts.blocks
    n = int(rng.integers(lo, hi + 1))
    gm = opts.graph if opts.graph != "mixed" else ("ws" if index % 2 == 0 else "rn")
    k = int(K_CHOICES[int(rng.integers(len(K_CHOICES)))])
    graph = make_graph(gm, n, k, None, rng)
    names, r = select_mutations(rng) if opts.mutations else ([], 0.0)
    genome = Genome(graph, random_input_shape(rng, 4), gm, k, DEFAULT_P[gm])
    apply_mutations(genome, corpus, names, r, rng, "graph")
    genome.notes.extend(assign_blocks(genome.graph, corpus, rng, preferred, opts.prefer))
    apply_mutations(genome, corpus, names, r, rng, "blocks")
    apply_mutations(genome, corpus, names, r, rng, "source")
    mid = model_id(seed, index)
    gm = build(genome, corpus, mid, seed, index, opts, rng)
    if candidate:
        gm.provenance["candidate"] = candidate
    return gm


def build(genome: Genome, corpus: Corpus, mid: str, seed: int, index: int, opts: GenerateOptions, rng: np.random.Generator) -> GeneratedModel:
    """Solve shapes/parameters for a genome and emit the model."""
    b = Builder(rng, opts.values, opts.opset, opts.cap)
    b.input_dtype = opts.input_dtype
    res = realise(genome, corpus, b)
    blocks = [genome.gene(n).block for n in sorted(genome.graph.nodes)]
    prov: dict[str, Any] = {
        "id": mid,
        "seed": seed,
        "index": index,
        "ofuzz_version": __version__,
        "opset": opts.opset,
        "graph_model": genome.graph_model,
        "n_blocks": genome.graph.number_of_nodes(),
        "blocks": blocks,
        "mutations": genome.mutations,
        "genome": genome.to_json(),
        "used_params": {str(k): v for k, v in res.used_params.items()},
        "degraded": res.degraded,
        "node_count": len(b.nodes),
        "ops": sorted({n.proto.op_type for n in b.nodes}),
        "inputs": {t.name: list(t.shape) for t in b.inputs},
        "input_dtypes": {t.name: DTYPE_BY_CODE.get(t.dtype, str(t.dtype)) for t in b.inputs},
        "coverage_records": [r.to_json() for r in res.records],
    }
    prov = json.loads(json.dumps(prov, default=_default))
    model = emit_model(b, res.outputs, f"ofuzz_{mid}", prov)
    if opts.check:
        check_model(model)
    return GeneratedModel(mid, model, dict(b.input_arrays), prov, genome)


def _default(v: Any) -> Any:
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, (tuple, set)):
        return list(v)
    raise TypeError(type(v).__name__)


def single_block_model(corpus: Corpus, name: str, input_shape: tuple[int, ...] = (1, 3, 6, 5)) -> GeneratedModel:
    """One block in its common configuration on U[-1, 1] inputs (C, H, W distinct so layouts show)."""
    genome = single_block_genome(corpus, name, input_shape)
    opts = GenerateOptions(values=ValuePolicy(uniform_only=True))
    return build(genome, corpus, f"block-{name}", 0, 0, opts, np.random.default_rng(0))
