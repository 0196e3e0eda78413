"""mockdcp's pytest plugin, registered through the ``pytest11`` entry point.

Fixtures:

* ``mockdcp``: a fresh mock node for the test, on free ports. In a plain (synchronous)
  test it is a ``mockdcp.Server`` running in a background thread (``server.apply(...)``
  blocks until the steps are done); in a pytest-trio test it is the ``MockDcpServer`` of
  ``mockdcp.serve`` running in the test's own event loop (``await server.apply(...)``).
  Both have ``kv_port``, ``http_port``, ``connection_string``, ``apply``, ``wait``,
  ``oracle()``, ``state()`` and ``expectations()``.
* ``mockdcp_factory``: starts as many nodes as the test asks for, each stopped after the
  test: ``mockdcp_factory(vbuckets=8)`` in a synchronous test, ``await
  mockdcp_factory(vbuckets=8)`` in a trio test.

The marker ``@pytest.mark.mockdcp(scenario=..., vbuckets=..., docs=..., ...)`` configures
the ``mockdcp`` fixture: ``scenario`` is a ``Scenario``, a YAML file (relative to the
test file's directory) or the name of a bundled scenario (``mockdcp scenarios``);
the other keywords are ``mockdcp.serve``'s, the same set ``mockdcp.serve`` and
``mockdcp.Server`` take (``docs`` loads that many seeded Faker documents, as ``mockdcp
serve --docs``; ``bucket``, ``users``, ``seed``, ``collections``, ``flush_interval``,
``pcap``, ...); ``check_expectations=False`` keeps failed
``expect`` steps from failing the test at teardown. The ini option
``mockdcp_default_vbuckets`` sets the vbucket count when neither names one.

When a test fails, its report carries each of its servers' event log (what the server
observed of its consumers: connections, stream requests and their answers, acks, noops)
and the outcome of every ``expect`` step.

The module imports nothing of mockdcp or trio until a fixture is used: installing
mockdcp adds this plugin to every pytest run.
"""

from __future__ import annotations

import contextlib
import functools
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterator

    import trio

    from mockdcp.producer import ProducerEvent
    from mockdcp.scenario import ExpectationResult
    from mockdcp.server import MockDcpServer, Server

    #: a server's address, event log and expectation results, as read at one moment
    Snapshot = tuple[str, list[ProducerEvent], list[ExpectationResult]]

VBUCKETS_INI = "mockdcp_default_vbuckets"
#: the plugin's own keywords (the others are ``mockdcp.serve``'s: ``serve_options()``)
PLUGIN_OPTIONS = frozenset({"check_expectations"})
#: events shown in a failed test's report (the newest; the server keeps more)
REPORT_EVENTS = 400


# -- hooks ------------------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        VBUCKETS_INI,
        "vbuckets of the servers the mockdcp fixtures start (1..1024; default 1024)",
        default="1024",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "mockdcp(scenario=None, vbuckets=None, docs=0, **options): configure the server "
        "of the mockdcp fixture (options are mockdcp.serve's keywords)",
    )
    default_vbuckets(config)  # a bad ini value is a usage error at once


FIXTURES = frozenset({"mockdcp", "mockdcp_factory"})


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """An ``async def`` test that uses a mockdcp fixture runs on trio: the plugin marks it
    ``trio`` for pytest-trio (a project need not set ``trio_mode``). Without pytest-trio
    such a test fails, saying what to install."""
    import inspect

    trio_plugin = config.pluginmanager.hasplugin("trio")
    for item in items:
        if not isinstance(item, pytest.Function) or not inspect.iscoroutinefunction(item.obj):
            continue
        if not FIXTURES & set(item.fixturenames) or item.get_closest_marker("trio"):
            continue
        if trio_plugin:
            item.add_marker("trio")
        else:
            item.stash[_NEEDS_PYTEST_TRIO] = True


_NEEDS_PYTEST_TRIO = pytest.StashKey[bool]()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.stash.get(_NEEDS_PYTEST_TRIO, False):
        pytest.fail(
            "an async test with the mockdcp fixtures runs on trio: pip install pytest-trio "
            "(the mockdcp plugin then runs it; no trio_mode needed)",
            pytrace=False,
        )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed and report.when in ("call", "teardown"):
        for watched in item.stash.get(_WATCHED, []):
            report.sections.extend(watched.sections())
    return report


# -- configuration ----------------------------------------------------------------------


def default_vbuckets(config: pytest.Config) -> int:
    text = str(config.getini(VBUCKETS_INI))
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= 1024:
        raise pytest.UsageError(f"{VBUCKETS_INI} must be an integer in 1..1024, not {text!r}")
    return value


def serve_options() -> frozenset[str]:
    """The keywords of ``mockdcp.serve`` a marker or a factory call may give: all but
    ``bucket_obj`` (the fixture makes the bucket), the TLS ones included."""
    import inspect

    from mockdcp.server import TLS_KEYWORDS, serve

    named = {
        name
        for name, p in inspect.signature(serve).parameters.items()
        if p.kind is not inspect.Parameter.VAR_KEYWORD
    }
    return frozenset(named | TLS_KEYWORDS) - {"bucket_obj"}


def _options(request: pytest.FixtureRequest, given: dict[str, Any]) -> dict[str, Any]:
    """``serve`` keywords and the plugin's own, checked, with the defaults filled in."""
    known = serve_options() | PLUGIN_OPTIONS
    unknown = set(given) - known
    if unknown:
        allowed = ", ".join(sorted(known))
        message = f"mockdcp: unknown option(s) {sorted(unknown)}; known: {allowed}"
        pytest.fail(message, pytrace=False)
    options: dict[str, Any] = {"port": 0, "http_port": 0, "check_expectations": True}
    options["vbuckets"] = default_vbuckets(request.config)
    if given.get("tls"):
        options.update(tls_port=0, https_port=0)  # free ports, as for the plain ones
    options.update(given)
    if options.get("scenario") is not None:
        if options.get("docs"):
            pytest.fail("mockdcp: a scenario seeds its own data; drop docs=", pytrace=False)
        options["scenario"] = _scenario(options["scenario"], request.path.parent)
    return options


def _scenario(scenario: object, here: Path) -> object:
    """A file relative to the test's directory, else a bundled scenario's name."""
    if not isinstance(scenario, str | os.PathLike):
        return scenario  # a Scenario object
    path = Path(scenario)
    if path.is_absolute() or (here / path).exists():
        return here / path
    from importlib import resources

    bundled = resources.files("mockdcp") / "scenarios" / f"{path.name.removesuffix('.yaml')}.yaml"
    if path.parent == Path() and bundled.is_file():
        return Path(str(bundled))
    return here / path  # the server reports it cannot be read, with the path


def _marker_options(request: pytest.FixtureRequest) -> dict[str, Any]:
    marker = request.node.get_closest_marker("mockdcp")
    if marker is None:
        return _options(request, {})
    if marker.args:
        pytest.fail("mockdcp marker: give keywords, e.g. mockdcp(vbuckets=64)", pytrace=False)
    return _options(request, dict(marker.kwargs))


def _split(options: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    serve = {k: v for k, v in options.items() if k not in PLUGIN_OPTIONS}
    return serve, bool(options["check_expectations"])


def _is_trio_test(request: pytest.FixtureRequest) -> bool:
    # pytest-trio marks the tests it runs (all async tests in trio_mode)
    return request.node.get_closest_marker("trio") is not None


# -- what a failed test's report shows ---------------------------------------------------


class _Watched:
    """One server of a test: how to read its event log and expectations now, and what
    was read when it stopped (a trio test's servers stop before its report is made)."""

    def __init__(self, label: str, read: Callable[[], Snapshot]) -> None:
        self.label = label
        self._read = read
        self._final: Snapshot | None = None

    def freeze(self) -> Snapshot:
        """Read the server as it stops, then let go of it: the test's item keeps this
        for the whole session, and through ``read`` it kept every server of every test
        alive (each test's collections walked all their buckets, slower test by test)."""
        try:
            self._final = self._read()
        except Exception as exc:
            self._read = functools.partial(_unreadable, repr(exc))
            raise
        self._read = _unreadable
        return self._final

    def sections(self) -> list[tuple[str, str]]:
        try:
            address, events, expectations = self._final or self._read()
        except Exception as exc:  # the server died: say so rather than hide the failure
            return [(self.label, f"cannot read the server: {exc!r}")]
        return [
            (f"{self.label} ({address}): event log", format_events(events)),
            (f"{self.label}: expectations", format_expectations(expectations)),
        ]


def _unreadable(why: str = "it has stopped") -> Snapshot:
    """A stopped server's reader: the server is gone (what it said was kept)."""
    raise RuntimeError(why)


_WATCHED = pytest.StashKey[list[_Watched]]()


def _watch(request: pytest.FixtureRequest, watched: _Watched) -> _Watched:
    request.node.stash.setdefault(_WATCHED, []).append(watched)
    return watched


def _snapshot(server: MockDcpServer) -> Snapshot:
    """Read in the server's own thread (or task)."""
    address = f"kv {server.host}:{server.kv_port}, http {server.http_port}"
    return address, list(server.node.events), server.expectations()


def format_events(events: list[ProducerEvent]) -> str:
    """One line an event, times relative to the first: ``+0.012s conn 1 'name' kind k=v``
    (the name is the connection's DCP_OPEN name, once it has one)."""
    if not events:
        return "(no events: no client connected)\n"
    shown = events[-REPORT_EVENTS:]
    lines = [f"... {len(events) - len(shown)} earlier events\n"] if len(shown) < len(events) else []
    start = events[0].time
    for event in shown:
        fields = {k: v for k, v in vars_of(event).items() if k not in ("time", "conn_id", "name")}
        detail = " ".join(f"{k}={v}" for k, v in fields.items() if v is not None)
        who = f"conn {event.conn_id}" + (f" {event.name!r}" if event.name else "")
        lines.append(f"+{event.time - start:.3f}s {who} {event.kind} {detail}")
    return "\n".join(line.rstrip() for line in lines) + "\n"


def vars_of(event: ProducerEvent) -> dict[str, Any]:
    import attrs

    return attrs.asdict(event, recurse=False)


def format_expectations(results: list[ExpectationResult]) -> str:
    if not results:
        return "(no expect steps)\n"
    return "".join(
        f"{'PASS' if r.passed else 'FAIL'} step {r.step} {r.name}: {r.detail}\n" for r in results
    )


def _check(label: str, results: list[ExpectationResult]) -> str | None:
    failed = [r for r in results if not r.passed]
    if not failed:
        return None
    return f"{label}: {len(failed)} expectation(s) failed\n" + format_expectations(failed)


# -- synchronous tests: servers in background threads ----------------------------------


def _start_thread_server(
    request: pytest.FixtureRequest, label: str, options: dict[str, Any]
) -> tuple[Server, _Watched, bool]:
    from mockdcp import Server

    serve_options, check = _split(options)
    server = Server(**serve_options).start()
    watched = _watch(request, _Watched(label, lambda: server.call(_snapshot, server.server)))
    return server, watched, check


def _stop_thread_servers(started: list[tuple[Server, _Watched, bool]]) -> None:
    """Stop every server; then raise what killed one after it was ready (``ServerError``),
    else fail if one recorded a failed expectation."""
    from mockdcp.util import ServerError

    problems, died = [], []
    for server, watched, check in started:
        try:
            _, _, expectations = watched.freeze()
        except Exception:  # a dead server has nothing to check: its stop says why
            expectations = None
        try:
            server.stop()
        except ServerError as exc:
            died.append(exc)
            continue
        problem = _check(watched.label, expectations) if check and expectations else None
        if problem:
            problems.append(problem)
    if died:
        raise died[0]
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


@pytest.fixture
def mockdcp(request: pytest.FixtureRequest) -> Iterator[object]:
    """A fresh mock node (see the module docstring); configured by the ``mockdcp``
    marker."""
    if _is_trio_test(request):
        # a pytest-trio fixture object: pytest-trio runs it in the test's event loop and
        # hands the test its value (the MockDcpServer)
        yield request.getfixturevalue("_mockdcp_trio")
        return
    started = [_start_thread_server(request, "mockdcp", _marker_options(request))]
    try:
        yield started[0][0]
    finally:
        _stop_thread_servers(started)


@pytest.fixture
def mockdcp_factory(request: pytest.FixtureRequest) -> Iterator[object]:
    """Starts mock nodes on demand: ``factory(**options)`` returns a started
    ``mockdcp.Server`` (``await factory(**options)`` a ``MockDcpServer`` in a trio
    test); options as the marker's."""
    if _is_trio_test(request):
        yield request.getfixturevalue("_mockdcp_factory_trio")
        return
    started: list[tuple[Server, _Watched, bool]] = []

    def start(**options: Any) -> Server:  # noqa: ANN401 - serve()'s keywords
        label = f"mockdcp_factory #{len(started) + 1}"
        started.append(_start_thread_server(request, label, _options(request, options)))
        return started[-1][0]

    try:
        yield start
    finally:
        _stop_thread_servers(started)


# -- trio tests: servers in the test's own event loop ------------------------------------


async def _run_in_loop(
    request: pytest.FixtureRequest,
    label: str,
    options: dict[str, Any],
    stop: trio.Event,
    problems: list[str],
    *,
    task_status: trio.TaskStatus[MockDcpServer],
) -> None:
    from mockdcp import serve

    serve_options, check = _split(options)
    async with serve(**serve_options) as server:
        watched = _watch(request, _Watched(label, lambda: _snapshot(server)))
        task_status.started(server)
        try:
            await stop.wait()
        finally:
            _, _, expectations = watched.freeze()
            problem = _check(label, expectations) if check else None
            if problem:
                problems.append(problem)


@contextlib.asynccontextmanager
async def _servers_in_loop() -> AsyncIterator[
    Callable[[pytest.FixtureRequest, str, dict[str, Any]], Awaitable[MockDcpServer]]
]:
    import trio

    stop = trio.Event()
    problems: list[str] = []
    async with trio.open_nursery() as nursery:

        async def start(
            request: pytest.FixtureRequest, label: str, options: dict[str, Any]
        ) -> MockDcpServer:
            server: MockDcpServer = await nursery.start(
                _run_in_loop, request, label, options, stop, problems
            )
            return server

        try:
            yield start
        finally:
            stop.set()
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


@pytest.fixture
async def _mockdcp_trio(request: pytest.FixtureRequest) -> AsyncIterator[MockDcpServer]:
    async with _servers_in_loop() as start:
        yield await start(request, "mockdcp", _marker_options(request))


@pytest.fixture
async def _mockdcp_factory_trio(
    request: pytest.FixtureRequest,
) -> AsyncIterator[Callable[..., Awaitable[MockDcpServer]]]:
    async with _servers_in_loop() as start:
        count = 0

        async def factory(**options: Any) -> MockDcpServer:  # noqa: ANN401 - serve()'s
            nonlocal count
            count += 1
            return await start(request, f"mockdcp_factory #{count}", _options(request, options))

        yield factory
