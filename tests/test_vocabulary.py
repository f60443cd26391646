"""One vocabulary: the status words and the finding classes are spelled only in ofuzz/core/vocab.py.

A list of classes spelled in place once forgot `mode-only`, and the summary line dropped those findings. Standalone
files that run without ofuzz (the engine worker, the repro runner, the repro.py template) keep their own literals.
"""
from __future__ import annotations

import io
import tokenize
from pathlib import Path

import ofuzz
from ofuzz.core import vocab

ROOT = Path(ofuzz.__file__).parent
STANDALONE = {"core/vocab.py", "exec/engines/worker_main.py", "exec/engines/repro_runner_main.py"}
STATUS_WORDS = {f'"{s}"' for s in vocab.STATUSES} | {f"'{s}'" for s in vocab.STATUSES}


def template_lines(text: str) -> set[int]:
    """The lines of a module-level template of a standalone script (repro.py's REPRO_PY)."""
    if "REPRO_PY = '''" not in text:
        return set()
    a = text.index("REPRO_PY = '''")
    b = text.index("'''", a + 14)
    return set(range(text[:a].count("\n") + 1, text[:b].count("\n") + 2))


def status_literals() -> list[str]:
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel in STANDALONE:
            continue
        text = path.read_text()
        skip = template_lines(text)
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.STRING and tok.string in STATUS_WORDS and tok.start[0] not in skip:
                found.append(f"{rel}:{tok.start[0]} {tok.string}")
    return found


def test_status_words_are_spelled_only_in_the_vocabulary():
    assert not status_literals(), "use ofuzz.core.vocab's names: " + ", ".join(status_literals())


def test_every_finding_class_is_in_the_vocabulary_list():
    assert set(vocab.FINDING_CLASSES) >= {vocab.BUG, vocab.DRIFT, vocab.UNSUPPORTED, vocab.UNDEFINED, vocab.SPLIT, vocab.UNCONFIRMED,
                                         vocab.MODE_ONLY, vocab.PENDING}
    assert len(set(vocab.FINDING_CLASSES)) == len(vocab.FINDING_CLASSES)


def test_failure_kind_predicates():
    assert vocab.crash_like("crash:SIGSEGV") and vocab.crash_like("oom") and vocab.crash_like("exception:ConverterCrash")
    assert not vocab.crash_like("exception:ValueError") and not vocab.crash_like("timeout")
    assert vocab.hang("timeout") and vocab.crash_or_hang("timeout") and not vocab.crash_or_hang("value")


# where a class's word is another vocabulary's: the noise files' section names, the oracle's JSON field `split`, the
# isolation verdict `drift`, and Split's input named "split" in the solver
OTHER_MEANINGS = {"judge/noise/base.py", "judge/noise/loader.py", "judge/oracle.py", "judge/isolate.py"}


def test_finding_classes_are_spelled_only_in_the_vocabulary():
    words = {f'"{c}"' for c in vocab.FINDING_CLASSES} | {f"'{c}'" for c in vocab.FINDING_CLASSES}
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel in STANDALONE or rel in OTHER_MEANINGS or rel.startswith("gen/solver/"):
            continue
        for tok in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
            if tok.type == tokenize.STRING and tok.string in words:
                found.append(f"{rel}:{tok.start[0]} {tok.string}")
    assert not found, "use ofuzz.core.vocab's names: " + ", ".join(found)
