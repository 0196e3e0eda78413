"""``mockdcp bench MODE``: streaming throughput, startup time and memory, one mode a
module over a shared harness (``_harness``: loading, serving and streaming to the bench
consumer process ``_consumer``, and the report every mode writes).

Modes: ``stream`` (the default), ``cold``, ``written``, ``docs``, ``corpus``, ``cluster``,
``rebalance``, ``history``, ``durable``, ``startup`` and ``compare`` (a git ref against
the working tree, side by side). The options of the bench before the modes
(``--docs N``, ``--cold``, ``--corpus DIR --on-disk``, ``--nodes N``, ``--rebalance``,
``--history N``, ``--durable F``) select their mode (``_args``).
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING

from mockdcp.cli.bench._args import MODES, add_bench_parser, resolve

if TYPE_CHECKING:
    import argparse

__all__ = ["MODES", "NEEDS_PSUTIL", "add_bench_parser", "psutil_missing", "run_bench"]

#: what ``mockdcp bench`` says when psutil, its extra, is not installed
NEEDS_PSUTIL = (
    "mockdcp bench: measures memory with psutil, which `pip install mockdcp` leaves out: "
    "pip install 'mockdcp[bench]'"
)


def psutil_missing() -> bool:
    """Whether psutil (the ``bench`` extra: the bench alone reads process memory with it)
    cannot be imported."""
    try:
        import psutil  # noqa: F401
    except ImportError:
        return True
    return False


def run_bench(args: argparse.Namespace) -> int:
    """Run the mode the options select; 2 (with the reason on stderr) when they do not
    make one, or the mode refuses them."""
    if psutil_missing():
        print(NEEDS_PSUTIL, file=sys.stderr)
        return 2
    try:
        mode = resolve(args)
    except ValueError as e:
        print(f"mockdcp bench: {e}", file=sys.stderr)
        return 2
    module = importlib.import_module(f"mockdcp.cli.bench._{mode}")
    refusal = getattr(module, "refusal", None)
    reason = refusal(args) if refusal is not None else None
    if reason is not None:
        print(f"mockdcp bench {mode}: {reason}", file=sys.stderr)
        return 2
    status: int = module.run(args)
    return status
