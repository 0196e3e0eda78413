"""The ``mockdcp`` commands: the argument parser (``_main``), serving and tailing
(``_commands``), scenarios (``_scenario_commands``, the live view ``_live``), the Spark
pipeline's commands (``_pipeline_commands``) and the benchmark (the package ``bench``:
a module per mode, its consumer process ``bench._consumer``). The top layer: it imports
every other package, and none imports it.
"""

from __future__ import annotations

from mockdcp.cli._main import build_parser as build_parser, main as main

__all__ = ["build_parser", "main"]
