"""``mockdcp explore`` (issue 39): random schedules drawn from the step vocabulary
(``_generate``), written in the library's format (``_format``), judged into named
anomalies (``_judge``) and shrunk (``_shrink``); ``mockdcp.cli`` runs them against a
consumer."""

from __future__ import annotations

from mockdcp.explore._consumers import (
    ConsumerFactory as ConsumerFactory,
    InProcessConsumer as InProcessConsumer,
    held as held,
    is_spec as is_spec,
    load_factory as load_factory,
    reference_consumer as reference_consumer,
    settings_for as settings_for,
    takes_connect as takes_connect,
    takes_credentials as takes_credentials,
)
from mockdcp.explore._format import scenario_yaml as scenario_yaml, step_data as step_data
from mockdcp.explore._generate import (
    BUCKET_THEMES as BUCKET_THEMES,
    DRAWERS as DRAWERS,
    GROUPS as GROUPS,
    PATTERNS as PATTERNS,
    THEMES as THEMES,
    Drawer as Drawer,
    GenerateOptions as GenerateOptions,
    OptionError as OptionError,
    bucket_draw as bucket_draw,
    draw_steps as draw_steps,
    generate as generate,
    is_valid as is_valid,
    schedule_seed as schedule_seed,
    validate as validate,
)
from mockdcp.explore._judge import (
    Anomaly as Anomaly,
    Finding as Finding,
    anomalies as anomalies,
    headline as headline,
)
from mockdcp.explore._shrink import (
    ShrinkResult as ShrinkResult,
    candidates as candidates,
    shrink as shrink,
    size as size,
)

__all__ = [
    "DRAWERS",
    "GROUPS",
    "PATTERNS",
    "THEMES",
    "Anomaly",
    "ConsumerFactory",
    "Drawer",
    "Finding",
    "GenerateOptions",
    "InProcessConsumer",
    "OptionError",
    "ShrinkResult",
    "anomalies",
    "candidates",
    "draw_steps",
    "generate",
    "headline",
    "held",
    "is_spec",
    "is_valid",
    "load_factory",
    "reference_consumer",
    "scenario_yaml",
    "schedule_seed",
    "settings_for",
    "shrink",
    "size",
    "step_data",
    "takes_connect",
    "takes_credentials",
    "validate",
]
