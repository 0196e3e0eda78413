"""What starting a server imports, and where (issue 44): the HTTP stack (hypercorn,
Starlette, the application) in a worker thread, so that its imports do not hold the
event loop, the KV port and ``mockdcp serve``'s ready line; serve() itself imports the
scenario package only for a scenario; the TLS material (cryptography) on first use.
Each case runs in a fresh interpreter: this one has imported them already."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import pytest

from mockdcp.cli._commands import SERVE_COLLECTOR_THRESHOLDS

if TYPE_CHECKING:
    from collections.abc import Iterator


def _printed(script: str, timeout: float = 60) -> Any:  # noqa: ANN401 - the script's JSON
    """What ``script`` prints last, as JSON, run in a fresh interpreter."""
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, check=True, timeout=timeout
    ).stdout
    return json.loads(out.splitlines()[-1])


_SCRIPT = """
import json, sys, threading
import trio
import mockdcp

importers = {}


class Watch:
    def find_spec(self, name, path=None, target=None):
        if name in ("hypercorn", "starlette", "mockdcp.scenario", "cryptography"):
            importers.setdefault(name, threading.current_thread() is threading.main_thread())
        return None


sys.meta_path.insert(0, Watch())


async def main():
    async with mockdcp.serve(port=0, http_port=0) as server:
        stream = await trio.open_tcp_stream("127.0.0.1", server.http_port)
        await stream.send_all(b"GET /pools HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n")
        with trio.fail_after(60):
            head = await stream.receive_some()
        await stream.aclose()
    return head.split(b"\\r\\n")[0].decode()


status = trio.run(main)
print(json.dumps({"status": status, "on_main_thread": importers}))
"""


def test_the_http_stack_is_imported_off_the_event_loop_and_a_scenario_only_for_one() -> None:
    report = _printed(_SCRIPT, timeout=120)
    assert report["status"] == "HTTP/1.1 401 ", report  # answered (no credentials given)
    # first imported by a worker thread, not the event loop's (the scenario package too:
    # the HTTP application imports it; without a scenario, serve() itself does not)
    on_main_thread = report["on_main_thread"]
    assert {"hypercorn", "starlette"} <= set(on_main_thread)
    assert not any(on_main_thread.values()), on_main_thread
    # TLS is served (issue 42) but its material is made on a TLS client's first use
    assert "cryptography" not in on_main_thread


def test_import_mockdcp_leaves_the_server_until_it_is_used() -> None:
    # pytest imports mockdcp at every start (the plugin's pytest11 entry point)
    script = (
        "import json, sys, mockdcp\n"
        "before = sorted(m for m in ('trio', 'mockdcp.server') if m in sys.modules)\n"
        "from mockdcp.server import Server, serve\n"
        "print(json.dumps([before, mockdcp.serve is serve, mockdcp.Server is Server]))\n"
    )
    assert _printed(script) == [[], True, True]


_SERVE_SCRIPT = """
import builtins, gc, json, sys
import mockdcp.cli

HEAVY = {heavy!r}
LEFT = {left!r}
state = {{"ready": False}}


def collected(phase, info):
    if phase == "start":
        frozen = gc.get_freeze_count()
        young = gc.get_threshold()[0]
        said = f"collected {{frozen}} {{young}}" if state["ready"] else "collected before ready"
        print(said, file=sys.stderr, flush=True)


gc.callbacks.append(collected)
plain_print = builtins.print


def watch_print(*args, **kwargs):
    if args and '"ready"' in str(args[0]) and not state["ready"]:
        state["ready"] = True
        heavy = sorted(m for m in HEAVY if m in sys.modules)
        left = sorted(m for m in LEFT if m in sys.modules)
        said = {{"heavy_at_ready": heavy, "left_at_ready": left}}
        plain_print(json.dumps(said), file=sys.stderr, flush=True)
    plain_print(*args, **kwargs)


builtins.print = watch_print
sys.exit(mockdcp.cli.main(["serve", "--port", "0", "--http-port", "0", "--docs", "0", "--json"]))
"""


@contextlib.contextmanager
def _serve_watched() -> Iterator[tuple[subprocess.Popen[str], list[str]]]:
    """``mockdcp serve --docs 0`` watched: the process and its stderr lines up to its
    ready line; stopped when the block ends."""
    from mockdcp.cli.bench._startup import HEAVY_MODULES

    script = _SERVE_SCRIPT.format(heavy=HEAVY_MODULES, left=SERVE_LEAVES)
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        assert proc.stderr is not None
        assert '"ready"' in proc.stdout.readline()
        lines: list[str] = []
        while not lines or not lines[-1].startswith("{"):
            lines.append(proc.stderr.readline().strip())
        yield proc, lines
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


#: what ``mockdcp serve --docs 0`` leaves until it is used (issue 44): the other commands'
#: options (its parser stops after ``serve``), the document generator (no documents to
#: load) and the role table (the default administrator is looked at on a first login)
SERVE_LEAVES = (
    "mockdcp.cli._explore_parser",
    "mockdcp.cli._pipeline_commands",
    "mockdcp.cli.bench",
    "mockdcp.data._dataset",
    "mockdcp.model._rbac",
)


def test_serve_without_documents_is_ready_before_what_it_does_not_use() -> None:
    """``mockdcp serve --docs 0`` reaches its ready line without ``SERVE_LEAVES``."""
    with _serve_watched() as (_, before):
        assert json.loads(before[-1])["left_at_ready"] == []


#: CPython's first collector threshold (``gc.get_threshold()[0]`` in a fresh process;
#: this process's may have been changed by what ran in it before)
CPYTHON_THRESHOLD = 700


def test_serve_runs_no_collection_before_its_ready_line_and_collects_after() -> None:
    """Nothing ``mockdcp serve`` makes before its ready line is garbage: the collector
    waits for it (a sixth of the start went to its passes), then runs on what is made
    after it (the start's objects frozen: each full collection walked them again), at
    serve's thresholds (``SERVE_COLLECTOR_THRESHOLDS``: rarer than CPython's)."""
    with _serve_watched() as (proc, before):
        assert "collected before ready" not in before
        assert proc.stderr is not None
        # the HTTP stack's imports after the ready line allocate: a collection follows,
        # of what is made after the ready line only (the start's objects frozen)
        line = proc.stderr.readline().strip()
        while not line.startswith("collected "):
            assert line, "serve exited"
            line = proc.stderr.readline().strip()
        _, frozen, young = line.split()
        assert int(frozen) > 50_000  # the modules, the 1,024 vbuckets
        assert int(young) == SERVE_COLLECTOR_THRESHOLDS[0] > CPYTHON_THRESHOLD


@pytest.mark.full
def test_serve_is_ready_without_numpy_pyarrow_hypercorn_or_cryptography() -> None:
    """``mockdcp serve``'s path to its ready line imports none of the heavy modules: the
    codec and numpy load after it, the HTTP stack in a worker thread, TLS on first use."""
    with _serve_watched() as (_, before):
        assert json.loads(before[-1])["heavy_at_ready"] == []


def test_serve_makes_its_vbuckets_with_the_collector_paused() -> None:
    """``serve()`` (a fixture's server) makes its 1,024 vbuckets and the cluster's map with
    the collector paused: about sixty collections, each walking them, went into it."""
    import gc

    import trio

    import mockdcp

    starts: list[int] = []

    def collected(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            starts.append(info["generation"])

    async def start_one() -> None:
        async with mockdcp.serve(port=0, http_port=0, vbuckets=1024):
            pass

    trio.run(start_one)  # the imports and first-use work of a process, apart
    gc.callbacks.append(collected)
    try:
        trio.run(start_one)
    finally:
        gc.callbacks.remove(collected)
    assert len(starts) <= 10, starts


def test_the_server_leaves_the_document_commands_until_they_are_used() -> None:
    """``import mockdcp.server`` (what serving needs) does not make the KV document
    commands (sub-document paths, the request classes: about 0.02 s of CPU); the
    shell's preload after ready (the connection machinery a DCP consumer runs) makes the
    request classes (decoding needs them) but not the model's ``Documents``, which loads
    at the first document command: a DCP consumer never sends one, and its start paid
    18 ms of the server's CPU for it."""
    lazy = ("mockdcp.model._documents", "mockdcp.protocol._document_requests")
    script = (
        "import json, sys, mockdcp.server\n"
        f"before = [m for m in {lazy!r} if m in sys.modules]\n"
        "from mockdcp.producer import preload\n"
        "preload()\n"
        f"preloaded = [m for m in {lazy!r} if m in sys.modules]\n"
        "from mockdcp.model import Bucket\n"
        "from mockdcp.producer import Node\n"
        "from mockdcp.protocol import Hello, HelloFeature, SaslAuth, Set, SelectBucket\n"
        "node = Node(bucket=Bucket('default', 4, clock=lambda: 0.0), users={'a': 'pw'})\n"
        "conn = node.open_connection(0.0)\n"
        "for m in (Hello(opaque=1, agent=b'x', features=(HelloFeature.XERROR,)),\n"
        "          SaslAuth(opaque=2, mechanism='PLAIN', payload=b'\\0a\\0pw'),\n"
        "          SelectBucket(opaque=3, bucket='default'),\n"
        "          Set(opaque=4, vbucket=0, key=b'k', value=b'v')):\n"
        "    conn.receive_data(m.encode(), 0.0)\n"
        "reply = bytes(conn.data_to_send(0.0))\n"
        f"used = [m for m in {lazy!r} if m in sys.modules]\n"
        "print(json.dumps([before, preloaded, used, reply[-24:][6:8].hex()]))\n"
    )
    # the SET's answer is the last frame: SUCCESS
    assert _printed(script) == [[], [lazy[1]], list(lazy), "0000"]


#: what ``import mockdcp.server`` leaves for first use (issue 44): the heavy modules (the
#: codec's numpy, the pipeline's pyarrow, the HTTP stack, TLS), the scenario package, the
#: connection machinery, and the model's and producer's parts a start does not run
SERVER_LEAVES = (
    "numpy",
    "pyarrow",
    "hypercorn",
    "starlette",
    "cryptography",
    "mockdcp.scenario",
    "mockdcp.producer._connection",
    # its frozen records (about 5 ms: a node that imported it for their kinds' table
    # made bench compare's import_server 0.70 of 14df38a, from 0.85)
    "mockdcp.producer.events",
    "mockdcp.producer._checker",
    "mockdcp.producer._checker_rules",
    "mockdcp.producer._bucket_move",
    "mockdcp.producer._data_nodes",
    "mockdcp.model._rbac",
    "mockdcp.model._loader",
    "mockdcp.model._oracle",
    "mockdcp.model._compaction",
    "mockdcp.model._documents",
)


def test_import_mockdcp_server_leaves_what_a_start_does_not_run_for_first_use() -> None:
    """``import mockdcp.server`` loads none of ``SERVER_LEAVES``; a node made as ``serve``
    makes it (its bucket, the default users) loads neither the role table nor the
    checker's rules: the first look at a user (a client's authentication) loads the
    roles, the first checker (a DCP connection) the rules."""
    script = (
        "import json, sys\n"
        "import mockdcp.server\n"
        f"leaves = {SERVER_LEAVES!r}\n"
        "imported = [m for m in leaves if m in sys.modules]\n"
        "from mockdcp.model import Bucket, Users\n"
        "from mockdcp.producer import Node\n"
        "bucket = Bucket('default', 4, clock=lambda: 0.0)\n"
        "node = Node(bucket=bucket, users={'Administrator': 'password'})\n"
        "started = [m for m in leaves if m in sys.modules]\n"
        "names = sorted(node.users), len(node.users), node.users['Administrator']\n"
        "as_mapping = [m for m in leaves if m in sys.modules]\n"
        "from mockdcp.model import Privilege\n"
        "granted = node.users.allowed('Administrator', Privilege.DCP_PRODUCER, 'default')\n"
        "limits = node.checker_limits.reopen_within\n"
        "used = [m for m in leaves if m in sys.modules]\n"
        "print(json.dumps([imported, started, as_mapping, list(names), granted, limits, used]))\n"
    )
    imported, started, as_mapping, names, granted, limits, used = _printed(script)
    assert imported == [], "import mockdcp.server loaded what it leaves for first use"
    assert started == []
    assert as_mapping == []  # names and passwords are what authentication reads
    assert names == [["Administrator"], 1, "password"]
    assert granted is True
    assert limits == 5.0
    assert {"mockdcp.model._rbac", "mockdcp.producer._checker_rules"} <= set(used)


_STOPPED_WHILE_IMPORTING = """
import json, sys, threading
import trio
import mockdcp

# the HTTP stack's import is held at hypercorn.trio.run until released: the server is
# stopped while its worker thread imports, whatever the machine's speed
entered, release = threading.Event(), threading.Event()


class Hold:
    def find_spec(self, name, path=None, target=None):
        if name == "hypercorn.trio.run" and not release.is_set():
            entered.set()
            release.wait(60)
        return None


sys.meta_path.insert(0, Hold())


def importing():
    for ident, frame in sys._current_frames().items():
        while frame is not None and ident != threading.get_ident():
            if frame.f_code.co_name == "_import_all":
                return True
            frame = frame.f_back
    return False


async def in_loop():
    async with mockdcp.serve(port=0, http_port=0):
        await trio.to_thread.run_sync(entered.wait, 60)
        threading.Timer(0.3, release.set).start()


def in_thread():
    with mockdcp.Server(port=0, http_port=0):
        entered.wait(60)
        threading.Timer(0.3, release.set).start()


trio.run(in_loop) if {mode!r} == "serve" else in_thread()
run = sys.modules.get("hypercorn.trio.run")
print(json.dumps([entered.is_set(), importing(), hasattr(run, "worker_serve")]))
"""


@pytest.mark.parametrize("mode", ["serve", "Server"])
def test_a_server_stopped_while_it_imports_the_http_stack_waits_for_the_import(
    mode: str,
) -> None:
    """Once ``serve()`` has exited (a trio test's fixture) or ``Server.stop()`` returned
    (a plain test's), nothing of the server imports on: its worker thread importing the
    HTTP stack was abandoned, and went on importing while pytester's in-process run
    (tests/plugin) took its modules back out of ``sys.modules``, a segmentation fault
    or an ImportError (``worker_serve``, ``H2Protocol``) in that run or a later one."""
    held, importing, imported = _printed(_STOPPED_WHILE_IMPORTING.format(mode=mode))
    assert held, "the server stopped before its thread imported the HTTP stack"
    assert not importing, "the thread importing the HTTP stack outlived the server"
    assert imported
