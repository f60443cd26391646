"""The project's words, defined once: a model's status on an engine, a finding's class, a step's outcome kind.

Every stage speaks these; a literal spelled anywhere else drifts (a list of classes once forgot `mode-only` and the
summary line dropped those findings). They are plain strings, so stores and JSON written before stay readable.
"""
from __future__ import annotations

from typing import Final

# A model's status on one engine (the paper's four): conversion failure, inference failure, disagreement, agreement.
MCF: Final = "MCF"
IF: Final = "IF"
DCF: Final = "DCF"
DCP: Final = "DCP"
STATUSES: Final = (MCF, IF, DCF, DCP)
FAILED: Final = (MCF, IF)  # the engine produced no output

# A finding's class: what triage makes of it. Only BUG is reported as a defect of the blamed engine.
BUG: Final = "bug"
DRIFT: Final = "drift"  # diverges only where errors accumulate; every node agrees alone
UNSUPPORTED: Final = "unsupported"  # a capability gap the engine documents
UNDEFINED: Final = "undefined"  # the ONNX spec does not define the result
SPLIT: Final = "split"  # no majority among the engines: nobody to blame
UNCONFIRMED: Final = "unconfirmed"  # did not come back on re-run, or its repro does not show it
MODE_ONLY: Final = "mode-only"  # only in a mode of the engine its users do not run
PENDING: Final = "pending"  # attached to a representative whose export has not finished
FINDING_CLASSES: Final = (BUG, DRIFT, UNSUPPORTED, UNDEFINED, SPLIT, UNCONFIRMED, MODE_ONLY, PENDING)

# A failed step's outcome kind (client.Outcome.kind), and the failure classes of root keys built from them.
CRASH: Final = "crash"  # killed by a signal
EXIT: Final = "exit"  # the process ended without answering
OOM: Final = "oom"
TIMEOUT: Final = "timeout"  # a hang
EXCEPTION: Final = "exception"  # the engine raised: a refusal, not a crash
PROCESS_DIED: Final = (CRASH, EXIT, OOM)


def crash_like(failure: str) -> bool:
    """A failure class ("crash:SIGSEGV", "oom", "exception:FooCrash") in which the engine's process died."""
    head, _, etype = failure.partition(":")
    return head in PROCESS_DIED or etype.endswith("Crash")


def hang(failure: str) -> bool:
    return failure == TIMEOUT


def crash_or_hang(failure: str) -> bool:
    """A failure that is a defect wherever it happens: never merged into another root cause as a mere symptom."""
    return hang(failure) or crash_like(failure)


# The reference evaluator's engine name: it breaks ties between cliques and never stands for a majority alone.
REFERENCE: Final = "reference"
