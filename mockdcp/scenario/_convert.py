"""One converter for every spelling of steps: YAML files, JSON (HTTP) and Python data.

``parse_steps(data)`` turns a list of ``{name: {fields}}`` mappings into step objects;
``parse_scenario(text, source)`` reads a whole scenario file. Every problem is collected
(not just the first) as a ``Problem`` naming the step, the field and, for YAML, the line;
``ScenarioError.problems`` carries them. Nothing is applied here.
"""

from __future__ import annotations

import enum
import re
from typing import TYPE_CHECKING, Any, Literal

import attrs

from mockdcp.protocol import history_unsupported, resolve_server_version
from mockdcp.scenario._check import parse_span
from mockdcp.scenario.steps import (
    STEPS_BY_NAME,
    SeqnoTarget,
    Span,
    Step,
    Value,
    Vbuckets,
)
from mockdcp.util import ScenarioError

if TYPE_CHECKING:
    from collections.abc import Callable

    import cattrs

#: Where a field sits: ("steps", 3, "persist", "upto") and so on.
Path = tuple[str | int, ...]


@attrs.frozen
class Problem:
    """One thing wrong with a scenario: where (step index, field, file line) and what."""

    message: str
    step: int | None = None
    field: str | None = None
    line: int | None = None
    source: str = "<steps>"

    def __str__(self) -> str:
        where = self.source
        if self.line is not None:
            where += f":{self.line}"
        if self.step is not None:
            where += f": step {self.step + 1}"
        if self.field:
            where += f" ({self.field})"
        return f"{where}: {self.message}"


class ScenarioProblems(ScenarioError):
    """A scenario or step list is invalid; ``problems`` says where and why."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("\n".join(map(str, problems)))
        self.problems = problems


@attrs.frozen(kw_only=True)
class BucketSpec:
    """A scenario's ``bucket:`` block."""

    name: str = "default"
    vbuckets: int = 16
    #: scope -> collection names (the ``_default`` scope and collection always exist;
    #: on magma they keep history unless a step says otherwise)
    collections: dict[str, list[str]] = attrs.field(factory=dict)
    #: ``couchstore`` or ``magma`` (which retains history: change streams)
    storage: Literal["couchstore", "magma"] = "couchstore"
    #: magma's history retention for the whole bucket (default 4 GiB when neither is
    #: given) and in seconds on the scenario clock
    history_retention_bytes: int | None = None
    history_retention_seconds: int | None = None
    #: backfills one DCP connection reads at once (kv_engine
    #: ``dcp_backfill_in_progress_per_connection_limit``, 1 since MB-57304; more stages
    #: an older node whose backfills of one connection interleave)
    backfills_per_connection: int = 1
    #: ``couchbase`` or ``ephemeral`` (no disk: backfills from memory, tombstones purged
    #: by age, the persistence steps refused; ``mockdcp.model._ephemeral``)
    type: Literal["couchbase", "ephemeral"] = "couchbase"
    #: an ephemeral bucket's eviction policy (ns_server ``evictionPolicy``): noEviction
    #: refuses writes when full, nruEviction deletes the oldest documents
    eviction_policy: Literal["noEviction", "nruEviction"] | None = None
    #: an ephemeral bucket's memory quota in bytes (None: no limit)
    memory_quota: int | None = None
    #: an ephemeral bucket's tombstone purge age in seconds (None: a day, as ns_server
    #: sets ``ephemeral_metadata_purge_age``)
    ephemeral_purge_age: int | None = None
    #: the bucket's virtual clock starts at this ISO 8601 time (default
    #: 2023-11-14T22:13:20Z); ``advance_clock`` moves it
    clock_start: str | None = None
    #: seconds between two expiry pager runs (kv_engine ``exp_pager_stime``), and the
    #: age past which compaction purges tombstones (``persistent_metadata_purge_age``)
    exp_pager_stime: int = 600
    metadata_purge_age: int = 259_200
    #: data nodes serving the bucket, and replica copies of each vbucket
    nodes: int = 1
    replicas: int = 0
    #: the Couchbase Server release the nodes behave as (``7.0``, ``7.2``, ``7.6``,
    #: ``8.0`` or a full version string; None: the newest, or ``serve``'s own)
    server_version: str | None = None

    def __attrs_post_init__(self) -> None:
        if self.server_version is not None:
            profile = resolve_server_version(self.server_version)  # ValueError naming it
            problem = history_unsupported(profile, retains_history=self._retains_history)
            if problem is not None:
                raise ValueError(f"bucket: {problem}")
        if self.clock_start is not None:
            from mockdcp.model import parse_time
            from mockdcp.util import ModelError

            try:
                parse_time(self.clock_start)
            except ModelError as exc:
                raise ValueError(f"bucket: clock_start: {exc}") from None
        if not 1 <= self.nodes <= MAX_NODES:
            raise ValueError(f"bucket: nodes is 1..{MAX_NODES}, not {self.nodes}")
        if not 0 <= self.replicas <= min(3, self.nodes - 1):
            raise ValueError(
                f"bucket: {self.replicas} replica(s) need {self.replicas + 1} nodes (at most 3"
                f" replicas): the scenario has {self.nodes}"
            )

    @property
    def _retains_history(self) -> bool:
        """Magma keeps history unless no retention is above 0 (``Bucket``'s rule: when
        neither is given, the default retention in bytes)."""
        if self.storage != "magma":
            return False
        sizes = (self.history_retention_bytes, self.history_retention_seconds)
        return all(v is None for v in sizes) or any(sizes)


#: nodes a scenario's cluster may have (``mockdcp serve --nodes`` allows as many)
MAX_NODES = 64


class Need(enum.StrEnum):
    """What a consumer must support for a scenario to apply to it (``mockdcp check
    --capabilities`` leaves out the scenarios that need anything else)."""

    #: HELLO collections: collection-aware frames, system events, filters
    COLLECTIONS = "collections"
    #: a flow-control buffer (``connection_buffer_size``) and buffer acknowledgements
    FLOW_CONTROL = "flow_control"
    #: ``enable_noop``: it answers DCP_NOOPs
    NOOPS = "noops"
    #: ``change_streams``: history snapshots of a magma bucket
    CHANGE_STREAMS = "change_streams"
    #: ``enable_sync_writes``: prepares, commits and aborts
    SYNC_WRITES = "sync_writes"
    #: a cluster of several nodes: the vbucket map, NOT_MY_VBUCKET with a new map
    SEVERAL_NODES = "several_nodes"
    #: HELLO clustermap change notification (and DUPLEX): configs pushed to it, also
    #: between the frames of its DCP streams
    CLUSTERMAP_NOTIFICATION = "clustermap_notification"


@attrs.frozen(kw_only=True)
class FailureMode:
    """The failure a scenario reproduces, in one line, and the public page (a kv_engine
    document, an issue) that describes what a consumer must do."""

    summary: str
    source: str


@attrs.frozen(kw_only=True)
class ConsumerUser:
    """The user a consumer runs as: made with its ``roles`` (comma separated, as
    ``create_user``'s) when the scenario's server starts, beside the administrator, and
    given to the consumer as ``MOCKDCP_USER`` and ``MOCKDCP_PASSWORD``."""

    name: str
    password: str
    roles: str = ""

    def __attrs_post_init__(self) -> None:
        from mockdcp.model import Users, parse_roles

        Users.default().put(self.name, password=self.password, roles=parse_roles(self.roles))


@attrs.frozen(kw_only=True)
class ConsumerSettings:
    """Settings under which a consumer meets the scenario in seconds rather than minutes:
    a consumer command gets them as ``MOCKDCP_BUFFER_SIZE`` (bytes) and
    ``MOCKDCP_NOOP_INTERVAL`` (seconds), ``MOCKDCP_CLUSTERMAP_NOTIFICATION`` (1: ask
    HELLO for config pushes) and ``MOCKDCP_CHANGE_STREAMS`` (1: ask for change streams,
    the ``change_streams`` control), and ``mockdcp tail`` takes them as defaults;
    ``user``, the user it runs as (``MOCKDCP_USER``, ``MOCKDCP_PASSWORD``)."""

    buffer_size: int | None = None
    noop_interval: float | None = None
    clustermap_notification: bool | None = None
    change_streams: bool | None = None
    #: the user it runs as (default: the administrator)
    user: ConsumerUser | None = None

    def environment(self) -> dict[str, str]:
        """The ``MOCKDCP_*`` variables of the settings given."""
        env = {}
        if self.user is not None:
            env["MOCKDCP_USER"] = self.user.name
            env["MOCKDCP_PASSWORD"] = self.user.password
        if self.buffer_size is not None:
            env["MOCKDCP_BUFFER_SIZE"] = str(self.buffer_size)
        if self.noop_interval is not None:
            env["MOCKDCP_NOOP_INTERVAL"] = f"{self.noop_interval:g}"
        if self.clustermap_notification is not None:
            env["MOCKDCP_CLUSTERMAP_NOTIFICATION"] = str(int(self.clustermap_notification))
        if self.change_streams is not None:
            env["MOCKDCP_CHANGE_STREAMS"] = str(int(self.change_streams))
        return env


@attrs.frozen(kw_only=True)
class Scenario:
    """A scenario file: what it reproduces, its seed, its bucket, its steps; and for
    ``mockdcp check`` its tags, what a consumer needs for it, and consumer settings."""

    name: str
    description: str = ""
    seed: int = 0
    bucket: BucketSpec = BucketSpec()
    steps: tuple[Step, ...] = ()
    source: str = "<scenario>"
    tags: tuple[str, ...] = ()
    needs: tuple[Need, ...] = ()
    reproduces: FailureMode | None = None
    consumer: ConsumerSettings = ConsumerSettings()

    def collections(self) -> tuple[str, ...]:
        """The collections (``scope.name``) the scenario's data steps write documents
        to, sorted (a ``load`` step's corpus is not read: its collections are not
        known before it runs). A consumer configured for named collections of one scope
        (go-dcp's ``scopeName`` and ``collectionNames``, Trendyol/go-dcp
        ``config/dcp.go``; java-dcp-client's ``scopeName``/``collectionNames``) is told
        which by ``mockdcp check`` (``MOCKDCP_COLLECTIONS``, ``MOCKDCP_SCOPE``)."""
        names = set()
        for step in self.steps:
            collection = getattr(step, "collection", None)
            if step.GROUP == "data" and isinstance(collection, str):
                names.add(_full_name(collection))
        return tuple(sorted(names))

    def scope(self) -> str:
        """The one scope every collection of ``collections()`` is in ("" if they span
        several, or there is none)."""
        scopes = {name.partition(".")[0] for name in self.collections()}
        return scopes.pop() if len(scopes) == 1 else ""


def _full_name(collection: str) -> str:
    """``scope.name`` of a step's collection (a bare name is in ``_default``)."""
    return collection if "." in collection else f"_default.{collection}"


# -- the converter -----------------------------------------------------------------------

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m)?\s*$")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, None: 1.0}


def parse_duration(value: object) -> float:
    """Seconds from a number or ``"500ms"``, ``"10s"``, ``"2m"``; ``ValueError`` else."""
    if isinstance(value, bool):
        raise ValueError(f"a duration is seconds or a string like '10s', not {value!r}")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str) and (m := _DURATION.match(value)):
        seconds = float(m.group(1)) * _UNITS[m.group(2)]
    else:
        raise ValueError(f"a duration is seconds or a string like '10s', not {value!r}")
    if not 0 <= seconds < 86_400 * 365:
        raise ValueError(f"a duration must be between 0 and a year, not {value!r}")
    return seconds


def _strict(kind: type, what: str) -> Callable[[object, object], object]:
    def structure(value: object, _: object) -> object:
        if isinstance(value, bool) and kind is not bool:
            raise ValueError(f"expected {what}, not {value!r}")
        if not isinstance(value, kind):
            raise ValueError(f"expected {what}, not {value!r}")
        return value

    return structure


def _vbuckets(value: object, _: object) -> Vbuckets:
    if value == "all":
        return "all"
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise ValueError(f"a vbucket is >= 0, not {value}")
        return value
    if isinstance(value, list) and value and all(_is_vbid(v) for v in value):
        return tuple(value)
    raise ValueError(f"vbuckets is 'all', a vbucket or a list of them, not {value!r}")


def _is_vbid(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _value(value: object, _: object) -> Value:
    if isinstance(value, str | dict | list):
        return value
    raise ValueError(f"a value is a JSON object, a list or a string, not {value!r}")


def _seqno_target(value: object, _: object) -> int | Literal["high"] | None:
    if value is None or value == "high":
        return value
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise ValueError(f"seqno is a number or 'high', not {value!r}")


def make_converter() -> cattrs.Converter:
    """The one converter (cattrs) for steps: strict types, no unknown fields."""
    import cattrs

    conv = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)
    conv.register_structure_hook(int, _strict(int, "an integer"))
    conv.register_structure_hook(str, _strict(str, "a string"))
    conv.register_structure_hook(bool, _strict(bool, "true or false"))
    conv.register_structure_hook(float, lambda v, _: parse_duration(v))
    conv.register_structure_hook(Vbuckets, _vbuckets)
    conv.register_structure_hook(Value, _value)
    conv.register_structure_hook(SeqnoTarget, _seqno_target)
    conv.register_structure_hook(Span, lambda v, _: parse_span(v))
    conv.register_structure_hook(Need, _need)
    return conv


def _need(value: object, _: object) -> Need:
    if isinstance(value, str) and value in Need.__members__.values():
        return Need(value)
    known = ", ".join(n.value for n in Need)
    raise ValueError(f"unknown need {value!r} (known: {known})")


_TAG = re.compile(r"^[a-z0-9][a-z0-9-]*$")


def _tags(tags: list[str]) -> tuple[str, ...]:
    bad = [t for t in tags if not _TAG.match(t)]
    if bad:
        raise ValueError(f"a tag is lower-case letters, digits and dashes, not {bad[0]!r}")
    return tuple(tags)


_CONVERTER: cattrs.Converter | None = None


def converter() -> cattrs.Converter:
    global _CONVERTER
    if _CONVERTER is None:
        _CONVERTER = make_converter()
    return _CONVERTER


def _messages(exc: Exception) -> list[tuple[str, str]]:
    """(field path, message) pairs from a cattrs structuring error."""
    import cattrs

    def describe(err: BaseException, kind: object) -> str:
        if isinstance(err, ValueError) and not isinstance(err, cattrs.BaseValidationError):
            return str(err)
        if isinstance(err, cattrs.ForbiddenExtraKeysError):
            return f"unknown fields: {', '.join(sorted(err.extra_fields))}"
        if isinstance(err, KeyError):
            return "required field missing"
        return cattrs.v.format_exception(err, kind)  # type: ignore[arg-type]

    out = []
    for text in cattrs.transform_error(exc, path="$", format_exception=describe):
        message, _, path = text.rpartition(" @ ")
        field = path.removeprefix("$").lstrip(".") or None
        out.append((field or "", message or text))
    return out


def parse_step(data: object, index: int = 0, source: str = "<steps>") -> Step:
    """One step from ``{name: {fields}}``; ``ScenarioProblems`` if it is not one."""
    return parse_steps([data], source=source)[0]


def parse_steps(
    data: object, *, source: str = "<steps>", lines: dict[Path, int] | None = None
) -> list[Step]:
    """Steps from a list of ``{name: {fields}}`` mappings (step objects pass through).

    Raises ``ScenarioProblems`` naming every bad step and field; ``lines`` maps a path
    (index, name, field...) to its line in the source file.
    """
    lines = lines or {}
    if not isinstance(data, list):
        raise ScenarioProblems([Problem("steps must be a list", source=source)])
    steps: list[Step] = []
    problems: list[Problem] = []
    for i, item in enumerate(data):
        if isinstance(item, Step):
            steps.append(item)
            continue
        line = lines.get((i,))
        if not isinstance(item, dict) or len(item) != 1:
            problems.append(
                Problem("a step is a mapping of one step name to its fields", i, None, line, source)
            )
            continue
        ((name, fields),) = item.items()
        cls = STEPS_BY_NAME.get(name) if isinstance(name, str) else None
        if cls is None:
            known = ", ".join(sorted(STEPS_BY_NAME))
            problems.append(
                Problem(f"unknown step {name!r} (known: {known})", i, None, line, source)
            )
            continue
        if fields is None:
            fields = {}
        if not isinstance(fields, dict):
            problems.append(
                Problem(f"the fields of {name} must be a mapping", i, name, line, source)
            )
            continue
        conv = converter()
        try:
            steps.append(conv.structure(fields, cls))
        except Exception as exc:  # cattrs' ClassValidationError and friends
            for field, message in _messages(exc):
                path = (i, name, *field.split(".")) if field else (i, name)
                problems.append(
                    Problem(
                        message,
                        i,
                        f"{name}.{field}" if field else name,
                        _nearest_line(lines, path),
                        source,
                    )
                )
    if problems:
        raise ScenarioProblems(problems)
    return steps


def _read_yaml(text: str) -> tuple[Any, Any]:
    """The composed document (its nodes carry the lines) and its data. libyaml's parser
    (PyYAML's ``CSafeLoader``, ten times faster: ``check`` and ``explore`` read a
    scenario per run) where PyYAML has it; bad YAML is read again by the pure-Python
    parser, whose messages the errors keep."""
    import yaml

    fast = getattr(yaml, "CSafeLoader", None)
    if fast is not None:
        try:
            return yaml.compose(text, Loader=fast), yaml.load(text, Loader=fast)
        except yaml.YAMLError:
            pass
    return yaml.compose(text, Loader=yaml.SafeLoader), yaml.safe_load(text)


def _nearest_line(lines: dict[Path, int], path: Path) -> int | None:
    """The line of ``path`` or of its nearest parent that has one."""
    while path:
        if path in lines:
            return lines[path]
        path = path[:-1]
    return None


# -- scenario files ----------------------------------------------------------------------


def parse_scenario(text: str, source: str = "<scenario>") -> Scenario:
    """A scenario from YAML (or JSON) text; ``ScenarioProblems`` with lines if bad."""
    import yaml

    try:
        node, data = _read_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise ScenarioProblems(
            [Problem(f"not valid YAML: {exc}", line=line, source=source)]
        ) from None
    if not isinstance(data, dict):
        raise ScenarioProblems([Problem("a scenario is a mapping", source=source)])
    lines = _step_lines(node)
    allowed = {"name", "description", "seed", "bucket", "steps", *_META_KEYS}
    known = ", ".join(sorted(allowed))
    problems = [
        Problem(f"unknown key {key!r} (known: {known})", source=source)
        for key in data
        if key not in allowed
    ]
    head: dict[str, Any] = {k: data[k] for k in ("name", "description", "seed") if k in data}
    if "name" not in head:
        problems.append(Problem("a scenario needs a name", field="name", source=source))
    bucket = BucketSpec()
    conv = converter()
    try:
        if "bucket" in data:
            spec = data["bucket"]  # ``bucket:`` with nothing: the defaults
            bucket = conv.structure({} if spec is None else spec, BucketSpec)
        conv.structure({"name": "", **head}, _Head)
    except Exception as exc:
        problems += [Problem(m, field=f or None, source=source) for f, m in _messages(exc)]
    meta = _Meta()
    try:
        meta = conv.structure({k: data[k] for k in _META_KEYS if k in data}, _Meta)
        _tags(meta.tags)
    except ValueError as exc:
        problems.append(Problem(str(exc), field="tags", source=source))
    except Exception as exc:
        problems += [Problem(m, field=f or None, source=source) for f, m in _messages(exc)]
    steps: list[Step] = []
    try:
        raw = data.get("steps")  # absent or empty (``steps:``): none; ``{}`` is an error
        steps = parse_steps([] if raw is None else raw, source=source, lines=lines)
    except ScenarioProblems as exc:
        problems += exc.problems
    if problems:
        raise ScenarioProblems(problems)
    return Scenario(
        name=str(data.get("name", "")),
        description=str(data.get("description", "")),
        seed=int(data.get("seed", 0)),
        bucket=bucket,
        steps=tuple(steps),
        source=source,
        tags=tuple(meta.tags),
        needs=tuple(meta.needs),
        reproduces=meta.reproduces,
        consumer=meta.consumer,
    )


@attrs.frozen(kw_only=True)
class _Head:
    name: str
    description: str = ""
    seed: int = 0


@attrs.frozen(kw_only=True)
class _Meta:
    """A scenario's metadata for ``mockdcp check`` (the schema's properties too)."""

    #: words to select scenarios by (``mockdcp check --tag rollback``)
    tags: list[str] = attrs.field(factory=list)
    #: what a consumer must support for the scenario to apply to it
    needs: list[Need] = attrs.field(factory=list)
    #: the failure it reproduces and its public source
    reproduces: FailureMode | None = None
    #: settings under which a consumer meets it quickly
    consumer: ConsumerSettings = ConsumerSettings()


_META_KEYS = ("tags", "needs", "reproduces", "consumer")


def load_scenario(path: str) -> Scenario:
    """Read and parse a scenario file; ``ScenarioError`` if it cannot be read."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioProblems([Problem(f"cannot read: {exc}", source=str(path))]) from None
    return parse_scenario(text, str(path))


def _step_lines(root: object) -> dict[Path, int]:
    """(step index[, name[, field...]]) -> 1-based line, from the composed YAML."""
    import yaml

    out: dict[Path, int] = {}
    if not isinstance(root, yaml.MappingNode):
        return out
    for key, value in root.value:
        if key.value != "steps" or not isinstance(value, yaml.SequenceNode):
            continue
        for i, item in enumerate(value.value):
            out[(i,)] = item.start_mark.line + 1
            if isinstance(item, yaml.MappingNode):
                for name, fields in item.value:
                    _walk(fields, (i, name.value), out)
    return out


def _walk(node: object, path: Path, out: dict[Path, int]) -> None:
    import yaml

    if isinstance(node, yaml.Node):
        out.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            out[(*path, key.value)] = key.start_mark.line + 1
            if isinstance(value, yaml.MappingNode):
                _walk(value, (*path, key.value), out)
