"""Command-line interface (typer): one module per command group, each command a few lines over a library call."""
from __future__ import annotations

import sys

from ofuzz.cli import generation, engines_cmd, campaign_cmd, bugs_cmd, replay_cmd  # noqa: F401,I001  (each registers its commands, in this order)
from ofuzz.cli.common import app, console
from ofuzz.gen.corpus import CorpusError


def main() -> None:
    from ofuzz.campaign.conformance import ConformanceError
    from ofuzz.campaign.distributed import DistributedError
    from ofuzz.store.known import KnownError
    from ofuzz.judge.noise import NoiseError
    from ofuzz.judge.precision import ToleranceError
    from ofuzz.store.campaign_store import StoreError

    try:
        app()
    except BrokenPipeError:
        sys.exit(0)
    except (StoreError, KnownError, NoiseError, ToleranceError, CorpusError, DistributedError, ConformanceError) as exc:  # bad input: one line, no traceback
        console.print(f"[red]error:[/red] {exc}", highlight=False, soft_wrap=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
