"""Export a finding as a directory a maintainer can act on (issue: minimal repros).

The directory holds the model and its inputs, the expected outputs (majority and
reference), every engine's actual outputs, a copy of the blamed engine's adapter
(it imports only that engine's library and numpy), `repro.py` that replays the
finding in a fresh process without ofuzz, and `REPORT.md` ready to paste.
"""
from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from ofuzz.core.vocab import REFERENCE
from ofuzz.store.campaign_dir import FINDING
from ofuzz.core.paths import CHECKOUT
from ofuzz.exec.engines.registry import EngineSpec
from ofuzz.core.npz import npz_bytes
from ofuzz.judge.judging import Judged, Policy, failed_nodes, judge_model
from ofuzz.triage.repro_check import check_repro
from ofuzz.judge import compare
from ofuzz.judge.compare import RULE
from ofuzz.exec.runner import EnginePool

REPRO_PY = '''"""Reproduce an ofuzz finding: {title}

Needs only {engine}'s Python package and numpy (no ofuzz):  python repro.py
Exit status 1 = the finding reproduces (a crash of the engine included: it runs in a child process), 0 = it does not,
2 = it could not run (the engine or its adapter could not be loaded here).
"""
import json
import os
import shutil
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
for _k, _v in {env}.items():  # the engine's settings as the campaign ran it (e.g. TensorFlow's TF_ENABLE_ONEDNN_OPTS)
    os.environ.setdefault(_k, _v)
try:
    from engine_adapter import {cls} as Engine  # the exact adapter ofuzz used (and any module beside it, copied here)
except ImportError as _exc:
    print(f"repro could not run: {{type(_exc).__name__}}: {{_exc}}")
    sys.exit(2)

from compare_rule import RULE  # the fuzzer's own comparison rule (its compare.py module, copied verbatim)

FINDING = json.load(open(os.path.join(HERE, "finding.json")))
SHOWN = FINDING.get("repro_failure") or {{}}  # what this repro showed when it was written: its status and failure kind
CRASH_KINDS = ("crash", "exit")  # the process died; "oom" may be either (MNN's converter reports its abort as an error)


def different(status):
    """The failure seen now (`status`: MCF, IF, DCF; None: the engine crashed the process) is not the finding's: a repro
    whose crash is gone may still fail some other way."""
    want, kind = SHOWN.get("status"), SHOWN.get("kind", "")
    if not want or FINDING.get("hang_after"):
        return False
    if status is None:
        same = kind in CRASH_KINDS or kind == "oom"
    else:
        same = want == status and (kind == "oom" or kind not in CRASH_KINDS)
    if not same:
        print(f"not reproduced: this finding is {{want}} ({{kind}}), and the model now "
              + ("crashes the engine" if status is None else f"gives {{status}}"))
    return not same


def main():
    if "--in-process" not in sys.argv:  # a crash kills the process running the engine: run it in a child and say so
        import signal
        import subprocess
        hang_after = FINDING.get("hang_after")  # a hang: the engine never answered within this many seconds
        verdict = os.path.join(tempfile.mkdtemp(prefix="ofuzz-verdict-"), "verdict")
        try:
            code = subprocess.run([sys.executable, os.path.abspath(__file__), "--in-process"], timeout=hang_after,
                                  env={{**os.environ, "OFUZZ_REPRO_VERDICT": verdict}}).returncode
        except subprocess.TimeoutExpired:
            print(f"REPRODUCED: the engine did not finish within {{hang_after:.0f}} s (hang)")
            return 1
        said = open(verdict).read().strip() if os.path.exists(verdict) else ""
        shutil.rmtree(os.path.dirname(verdict), ignore_errors=True)
        if code < 0 and said == "1":  # the check had its answer, then the engine brought the process down at teardown
            print(f"REPRODUCED (and then the engine crashed the process at exit: {{signal.Signals(-code).name}})")
            return 1
        if code < 0:
            if different(None):
                return 0
            print(f"REPRODUCED: the engine crashed the process ({{signal.Signals(-code).name}})")
            return 1
        return code
    with tempfile.TemporaryDirectory(prefix="ofuzz-repro-") as work:  # the engine's files (converted models) go with it
        code = check(work)
    if os.environ.get("OFUZZ_REPRO_VERDICT"):  # said before the interpreter's teardown, which a corrupted heap may not survive
        with open(os.environ["OFUZZ_REPRO_VERDICT"], "w") as f:
            f.write(str(code))
    sys.stdout.flush()
    return code


def check(work):
    try:
        engine = Engine(**FINDING["options"])
        print("engine:", FINDING["repro_engine"], engine.version())
    except ImportError as exc:  # the engine's own package is missing here
        print(f"repro could not run: {{type(exc).__name__}}: {{exc}}")
        return 2
    feeds = dict(np.load(os.path.join(HERE, "inputs.npz")))
    expected = dict(np.load(os.path.join(HERE, "expected.npz")))
    try:
        engine.prepare(os.path.join(HERE, "model.onnx"), work, FINDING["inputs"], FINDING["outputs"])
    except (Exception, SystemExit) as exc:  # onnx2tf gives up with sys.exit(1)
        if different("MCF"):
            return 0
        print("REPRODUCED: conversion failed (MCF):", type(exc).__name__, str(exc)[:500])
        return 1
    try:
        outs = engine.run(feeds)
    except (Exception, SystemExit) as exc:
        if different("IF"):
            return 0
        print("REPRODUCED: inference failed (IF):", type(exc).__name__, str(exc)[:500])
        return 1
    if not isinstance(outs, dict):
        outs = dict(zip(FINDING["outputs"], outs))
    found = False
    for name in FINDING["outputs"]:
        if name not in outs:
            print(f"REPRODUCED: output {{name}} missing")
            return 1
        c = RULE.compare(outs[name], expected[name], name)
        if not c.ok:
            print(f"REPRODUCED: output {{name}} differs from the expected ({{FINDING['expected_from']}}): {{c.describe()}}")
            found = True
    if not found:
        print("not reproduced: all outputs match the expected values")
    elif different("DCF"):
        return 0
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
'''


def write_repro(out: Path, pool: EnginePool, spec_by_name: dict[str, EngineSpec], finding: dict[str, Any], model: onnx.ModelProto,
                inputs: dict[str, np.ndarray], reduction: dict[str, Any], policy: Policy, extra: dict[str, Any],
                judged: Judged | None = None) -> dict[str, Any]:
    """Write model, inputs, every engine's outputs, expected outputs, repro.py and REPORT.md; return finding.json's content.
    `judged`: this model's verdict on every engine if the reducer's final check already has it (saves a TensorFlow
    conversion per finding)."""
    engine = finding["engine"]
    onnx.save(model, str(out / "model.onnx"))
    (out / "inputs.npz").write_bytes(npz_bytes(inputs))
    if judged is None:
        judged = judge_model(pool, model, out / "model.onnx", inputs, policy=policy)
    versions = pool.versions()
    v = judged.verdict
    outs: dict[str, dict[str, np.ndarray]] = {}
    for eng, r in v.results.items():
        if r.outcome is not None and r.outcome.ok and r.outcome.outputs:
            outs[eng] = r.outcome.outputs
            (out / f"{eng}.outputs.npz").write_bytes(npz_bytes(r.outcome.outputs))
    expected_from = v.expected_from or (REFERENCE if REFERENCE in outs else next(iter(outs), ""))
    if expected_from == engine or expected_from in v.excluded:  # never the blamed engine (its repro would compare it
        # with itself), nor one excluded from the vote on this model (a known reference gap)
        expected_from = next((e for e in [*v.majority, *sorted(outs)] if e != engine and e in outs and e not in v.excluded), expected_from)
    (out / "expected.npz").write_bytes(npz_bytes(outs.get(expected_from, {})))
    repro_engine = engine if engine in spec_by_name else split_repro_engine(engine, expected_from, set(outs), spec_by_name)
    spec = spec_by_name.get(repro_engine or "")
    names = [o.name for o in model.graph.output]
    status_now = v.results[repro_engine].status if repro_engine in v.results else "?"
    now = v.results.get(repro_engine)
    div_now = ((v.diverging or {}).get(repro_engine) or {})
    repro_failure = {"status": status_now, "category": div_now.get("category") or (now.versus.category if now is not None and now.versus else ""),
                     "kind": getattr(now.outcome, "kind", "") if now is not None else "",
                     "etype": (getattr(now.outcome, "etype", "") or getattr(now.outcome, "signal", "")) if now is not None else "",
                     "failed_ops": [op for _, op in failed_nodes(model, now.outcome)] if now is not None else [],
                     "where": getattr(now.outcome, "where", "") if now is not None else ""}
    # the headline says what the repro shows, not what the campaign's larger model showed ("value mismatch on t9_GRU_1"
    # over a one-node ReduceLogSumExp repro misled hand triage 10); the campaign's stays beside it
    shown = next((f.summary for f in judged.findings if f.engine == repro_engine and f.status == status_now), "") or finding["summary"]
    info = {
        "engine": engine, "repro_engine": repro_engine, "status": finding["status"], "status_on_rerun": status_now, "signature": finding["signature"],
        "op": finding.get("op"), "options": spec.options if spec else {},
        "inputs": list(inputs), "outputs": names, "expected_from": expected_from, "versions": versions, "reduction": reduction,
        "reduced_ops": sorted({n.op_type for n in model.graph.node}), "repro_failure": repro_failure, **extra,
        "summary": shown, "campaign_summary": finding["summary"],
    }
    (out / FINDING).write_text(json.dumps(info, indent=1, default=str))
    if spec is not None:
        adapter_file, _, cls = spec.adapter.rpartition(":")
        shutil.copyfile(adapter_file, out / "engine_adapter.py")
        copy_adapter_siblings(Path(adapter_file), out)
        shutil.copyfile(compare.__file__, out / "compare_rule.py")
        if spec.env != "core" and Path(spec.env).is_file():
            shutil.copyfile(spec.env, out / "requirements.txt")  # the engine's exact pins (a version's own, for mnn@3.5.0)
        (out / "repro.py").write_text(REPRO_PY.format(title=shown[:100].replace('"', "'"), engine=repro_engine, cls=cls,
                                                    env=repr(dict(sorted(spec.env_vars.items())))))
    _write_report(out, info, model, inputs, v, spec)
    t0 = time.perf_counter()
    info["repro_check"] = check_repro(out, spec, hang_after=info.get("hang_after"))
    info["repro_check_seconds"] = round(time.perf_counter() - t0, 2)
    return info


REPRO_OWN = {"repro.py", "engine_adapter.py", "compare_rule.py"}
SIBLINGS_MAX_BYTES = 4 << 20  # a plug-in's own modules, not a vendored library


def copy_adapter_siblings(adapter_file: Path, out: Path) -> list[str]:
    """The Python modules and packages beside a plug-in's adapter file, copied into the repro folder so that an adapter
    split in two files (`from helpers import ...`) loads there as it did in the campaign. Not for a folder holding more
    than SIBLINGS_MAX_BYTES of Python: repro.py then says it could not load the adapter rather than ship a library."""
    folder = adapter_file.resolve().parent
    items = [p for p in sorted(folder.iterdir()) if p != adapter_file.resolve() and p.name not in REPRO_OWN and not p.name.startswith((".", "_"))
             and ((p.is_file() and p.suffix == ".py") or (p.is_dir() and (p / "__init__.py").is_file()))]
    size = sum(f.stat().st_size for p in items for f in ([p] if p.is_file() else p.rglob("*.py")))
    if not items or size > SIBLINGS_MAX_BYTES:
        return []
    for p in items:
        if p.is_file():
            shutil.copyfile(p, out / p.name)
        else:
            shutil.copytree(p, out / p.name, ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True)
    return [p.name for p in items]


def split_repro_engine(split: str, expected_from: str, ran: set[str], spec_by_name: dict[str, EngineSpec]) -> str | None:
    """For a no-majority split ("a+b+c"), the engine repro.py runs: the first member that
    differs from the engine whose outputs are stored as expected (the report says so)."""
    members = [e for e in split.split("+") if e in spec_by_name and e in ran]
    return next((e for e in members if e != expected_from), members[0] if members else None)


def _write_report(out: Path, info: dict[str, Any], model: onnx.ModelProto, inputs: dict[str, np.ndarray], v: Any, spec: EngineSpec | None) -> None:
    eng = info["repro_engine"] or info["engine"]
    r = v.results.get(eng)
    ops: dict[str, int] = {}
    for n in model.graph.node:
        ops[n.op_type] = ops.get(n.op_type, 0) + 1
    div = (v.diverging or {}).get(eng) or {}
    lines = [
        f"# {info['engine']}: {info['status']} — {info['summary']}",
        "",
        *([f"No majority: these engines disagree and none can be blamed. `repro.py` runs **{eng}** and compares it with the "
           f"stored outputs of **{info['expected_from']}**; every engine's outputs are in `<engine>.outputs.npz`.", ""]
          if info["engine"] != eng else []),
        f"- engine: **{eng}** ({info['versions'].get(eng, '?')})",
        f"- status: {info['status']} (on re-run: {info['status_on_rerun']}); expected outputs from: {info['expected_from']}",
        f"- operator(s): {info.get('op') or '?'}" + (f" — node `{div.get('node')}`, attributes `{json.dumps(div.get('attrs', {}))}`" if div.get("node") else ""),
        f"- model: {len(model.graph.node)} nodes ({', '.join(f'{k}×{n}' for k, n in sorted(ops.items()))}), opset {model.opset_import[0].version}",
        f"- inputs: {', '.join(f'{k} {list(a.shape)} {a.dtype}' for k, a in inputs.items())}",
        f"- reduced from {info['reduction']['nodes_before']} to {info['reduction']['nodes_after']} nodes "
        f"({info['reduction']['checks']} checks, {info['reduction']['seconds']}s); the original is `original.onnx`",
    ]
    if r is not None and r.versus is not None and not r.versus.ok:
        c = r.versus
        lines.append(f"- mismatch: {c.category} on `{c.output}`, max abs {c.max_abs:.4g}, max rel {c.max_rel:.4g}, {100 * c.bad_fraction:.2f}% of elements {c.detail}")
    if r is not None and r.outcome is not None and not r.outcome.ok:
        if r.outcome.where:
            lines.append(f"- failed in the engine's source at: `{r.outcome.where}`")
        lines += ["", "```", r.outcome.summary(), r.outcome.log_tail[-2000:], "```"]
    pins = "requirements.txt" if spec and spec.env != "core" else ""  # copied beside repro.py by write_repro
    lines += [
        "",
        "## Reproduce",
        "",
        *([f"    pip install -r {pins}      # {eng}'s pinned packages (in a fresh virtualenv)"] if pins else []),
        "    python repro.py      # exit 1 = reproduced",
        "",
        f"`repro.py` needs only {eng}'s package and numpy; it loads `model.onnx` and `inputs.npz`, runs the engine",
        "through `engine_adapter.py` (the adapter the fuzzer used) and compares with `expected.npz`",
        f"(relative error > {RULE.rel_tol:g} on more than {RULE.max_bad_fraction:.1%} of elements, NaN/Inf exactly; the rule is",
        "`compare_rule.py`, the fuzzer's own comparison module, copied verbatim).",
        "Each engine's own outputs are in `<engine>.outputs.npz`. The model opens in Netron.",
        *([f"The engine ran with {', '.join(f'`{k}={v}`' for k, v in sorted(spec.env_vars.items()))} (repro.py sets them unless they are set)."]
          if spec is not None and spec.env_vars else []),
    ]
    (out / "REPORT.md").write_text(public_paths("\n".join(lines) + "\n"))


def public_paths(text: str) -> str:
    """A report is pasted into public trackers: no home folder, user name or checkout location of this machine."""
    here = str(CHECKOUT)
    for local, shown in ((here, "<ofuzz>"), (str(Path.home()), "~")):
        text = text.replace(local, shown)
    return text
