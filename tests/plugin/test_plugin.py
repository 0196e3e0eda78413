from __future__ import annotations

import importlib
import pkgutil
from typing import TYPE_CHECKING

import pytest

import mockdcp
from mockdcp.util._numpy import load_numpy

if TYPE_CHECKING:
    from pathlib import Path

pytest_plugins = ["pytester"]

# pytester's in-process runs forget the modules a run imported, and the next run imports
# them afresh, beside the copies this process's plugin keeps (their classes would differ).
# Import all of mockdcp, and numpy (which cannot load twice), before any run.
for _module in pkgutil.walk_packages(mockdcp.__path__, "mockdcp."):
    if not _module.name.endswith("__main__"):
        importlib.import_module(_module.name)
load_numpy()

# The tests below run pytest on a test file in a fresh directory with no project
# configuration (pytester's): only the mockdcp plugin (its entry point) and pytest-trio.
TRIO_INI = "[pytest]\ntrio_mode = true\n"

SYNC_STREAMING = """
import json, subprocess, sys

import pytest


@pytest.mark.mockdcp(vbuckets=4, docs=20)
def test_sync(mockdcp):
    assert len(mockdcp.state()["vbuckets"]) == 4
    assert len(mockdcp.oracle()) == 20
    tail = [sys.executable, "-m", "mockdcp", "tail", "--port", str(mockdcp.kv_port)]
    out = subprocess.run(
        [*tail, "--json", "--limit", "20"], capture_output=True, text=True, timeout=60
    ).stdout
    keys = {json.loads(line).get("key") for line in out.splitlines()} - {None}
    assert keys == {key.decode() for _, key in mockdcp.oracle()}
    assert mockdcp.connection_string == f"couchbase://127.0.0.1:{mockdcp.kv_port}"
"""

TRIO_STREAMING = """
import pytest
import trio

from mockdcp.client import ConsumerState, DcpConsumer
from mockdcp.server import MockDcpServer


@pytest.mark.trio
@pytest.mark.mockdcp(vbuckets=8)
async def test_trio(mockdcp):
    assert isinstance(mockdcp, MockDcpServer)
    await mockdcp.apply(*({"set": {"key": f"k{i}", "value": {"i": i}}} for i in range(30)))
    state = ConsumerState()
    consumer = DcpConsumer(mockdcp.host, mockdcp.kv_port, vbuckets=range(8), state=state)
    async with trio.open_nursery() as nursery:
        await nursery.start(consumer.run)
        with trio.fail_after(30):
            while state.items < 30:
                await trio.sleep(0.01)
        nursery.cancel_scope.cancel()
    assert set(state.documents()) == set(mockdcp.oracle())
"""


def test_mockdcp_fixture_in_a_sync_test_serves_a_consumer(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(SYNC_STREAMING)
    pytester.runpytest().assert_outcomes(passed=1)


def test_mockdcp_fixture_in_a_trio_test_runs_in_the_test_loop(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(TRIO_STREAMING)
    pytester.runpytest().assert_outcomes(passed=1)


def test_trio_mode_tests_get_the_in_loop_server(pytester: pytest.Pytester) -> None:
    pytester.makeini(TRIO_INI)
    pytester.makepyfile(TRIO_STREAMING.replace("@pytest.mark.trio\n", ""))
    pytester.runpytest().assert_outcomes(passed=1)


def test_an_async_test_of_the_fixtures_runs_on_trio_without_trio_mode(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        """
        import trio

        from mockdcp.server import MockDcpServer


        async def test_unmarked(mockdcp):
            assert isinstance(mockdcp, MockDcpServer)
            await mockdcp.apply({"set": {"key": "k", "value": {"v": 1}}})
            await trio.sleep(0)
            assert len(mockdcp.oracle()) == 1
        """
    )
    pytester.runpytest().assert_outcomes(passed=1)


def test_without_pytest_trio_an_async_test_of_the_fixtures_says_what_to_install(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile("async def test_unmarked(mockdcp):\n    pass\n")
    result = pytester.runpytest("-p", "no:trio")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*pip install pytest-trio*"])


def test_plugin_loads_from_its_entry_point_in_a_fresh_process(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(SYNC_STREAMING)
    # one fresh interpreter (the costly part): the test passes only if the entry point
    # gave it the fixture; the marker's help is read in this process
    pytester.runpytest_subprocess().assert_outcomes(passed=1)
    result = pytester.runpytest("--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.mockdcp(scenario=None, vbuckets=None, docs=0*"])


def test_each_test_gets_a_fresh_server(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        seen = []

        def test_first(mockdcp):
            mockdcp.apply({"set": {"key": "only-here", "value": "x"}})
            seen.append(mockdcp.kv_port)

        def test_second(mockdcp):
            assert mockdcp.oracle() == {}
            assert mockdcp.kv_port not in seen
        """
    )
    pytester.runpytest().assert_outcomes(passed=2)


def test_ini_sets_the_default_vbuckets_and_the_marker_overrides_it(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini(TRIO_INI + "mockdcp_default_vbuckets = 8\n")
    pytester.makepyfile(
        """
        import pytest

        def test_default(mockdcp):
            assert len(mockdcp.state()["vbuckets"]) == 8

        @pytest.mark.mockdcp(vbuckets=2)
        def test_marker(mockdcp):
            assert len(mockdcp.state()["vbuckets"]) == 2

        async def test_trio_default(mockdcp):
            assert len(mockdcp.state()["vbuckets"]) == 8
        """
    )
    pytester.runpytest().assert_outcomes(passed=3)


def test_the_marker_gives_a_virtual_clock_that_steps_advance(pytester: pytest.Pytester) -> None:
    pytester.makeini(TRIO_INI)
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.mockdcp(vbuckets=2, clock="virtual", clock_start="2024-01-01T00:00:00Z")
        async def test_clock(mockdcp):
            await mockdcp.apply(
                {"set": {"key": "k", "value": "1", "expiry": 1704067230}},
                {"advance_clock": {"seconds": "10m"}},
            )
            assert mockdcp.oracle() == {}
            assert mockdcp.state()["clock"]["now"] == "2024-01-01T00:10:00Z"
        """
    )
    pytester.runpytest().assert_outcomes(passed=1)


def test_bad_ini_vbuckets_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nmockdcp_default_vbuckets = lots\n")
    pytester.makepyfile("def test_nothing(): pass")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*mockdcp_default_vbuckets must be an integer in 1..1024*"])


def test_unknown_marker_option_is_reported(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.mockdcp(vbucket=4)
        def test_typo(mockdcp):
            pass
        """
    )
    result = pytester.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*mockdcp: unknown option(s) *'vbucket'*; known: auth_timeout, backfills_*, bucket, *"]
    )
    result.stdout.no_fnmatch_line("*pytest_plugin.py*")  # the message, not a traceback


def test_factory_starts_several_servers_in_a_sync_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import socket

        def test_two(mockdcp_factory):
            a = mockdcp_factory(vbuckets=2)
            b = mockdcp_factory(vbuckets=4, docs=5)
            assert a.kv_port != b.kv_port
            assert len(a.state()["vbuckets"]) == 2 and a.oracle() == {}
            assert len(b.state()["vbuckets"]) == 4 and len(b.oracle()) == 5
            socket.create_connection(("127.0.0.1", b.kv_port)).close()
        """
    )
    pytester.runpytest().assert_outcomes(passed=1)


def test_factory_starts_several_servers_in_a_trio_test(pytester: pytest.Pytester) -> None:
    pytester.makeini(TRIO_INI)
    pytester.makepyfile(
        """
        import trio

        async def test_two(mockdcp_factory):
            a = await mockdcp_factory(vbuckets=2)
            b = await mockdcp_factory(vbuckets=4)
            await b.apply({"set": {"key": "k", "value": "v"}})
            assert a.kv_port != b.kv_port
            assert a.oracle() == {} and len(b.oracle()) == 1
            stream = await trio.open_tcp_stream("127.0.0.1", a.kv_port)
            await stream.aclose()
        """
    )
    pytester.runpytest().assert_outcomes(passed=1)


def test_servers_stop_after_the_test(pytester: pytest.Pytester) -> None:
    pytester.makeini(TRIO_INI)
    pytester.makepyfile(
        """
        import socket

        import pytest

        ports = []

        def test_sync(mockdcp, mockdcp_factory):
            ports.extend([mockdcp.kv_port, mockdcp_factory().kv_port])

        async def test_trio(mockdcp, mockdcp_factory):
            ports.extend([mockdcp.kv_port, (await mockdcp_factory()).kv_port])

        def test_all_closed():
            assert len(ports) == 4
            for port in ports:
                with pytest.raises(ConnectionRefusedError):
                    socket.create_connection(("127.0.0.1", port), timeout=5)
        """
    )
    pytester.runpytest().assert_outcomes(passed=3)


def test_no_server_outlives_its_test(pytester: pytest.Pytester) -> None:
    """The report's reader of each server let go of it when it stopped: the test items
    (kept for the session) kept every bucket alive, each test slower than the last."""
    pytester.makeini(TRIO_INI)
    pytester.makepyfile(
        """
        import gc
        import weakref

        import pytest

        buckets = []

        @pytest.mark.mockdcp(vbuckets=4)
        def test_sync(mockdcp, mockdcp_factory):
            buckets.extend([weakref.ref(mockdcp.bucket), weakref.ref(mockdcp_factory().bucket)])

        @pytest.mark.mockdcp(vbuckets=4)
        async def test_trio(mockdcp, mockdcp_factory):
            other = await mockdcp_factory()
            buckets.extend([weakref.ref(mockdcp.bucket), weakref.ref(other.bucket)])

        def test_all_gone():
            gc.collect()
            assert len(buckets) == 4
            assert [ref() for ref in buckets] == [None] * 4
        """
    )
    pytester.runpytest().assert_outcomes(passed=3)


FAILING = """
import socket

def test_fails(mockdcp):
    client = socket.create_connection(("127.0.0.1", mockdcp.kv_port))
    mockdcp.apply({"wait": {"consumer": {"connections": 1}, "timeout": 10}})
    client.close()
    mockdcp.apply({"label": {"name": "before the failure"}})
    assert False, "the consumer got it wrong"
"""


@pytest.mark.parametrize("variant", ["sync", "trio"])
def test_a_failed_test_reports_the_server_event_log(
    pytester: pytest.Pytester, variant: str
) -> None:
    source = FAILING
    if variant == "trio":
        pytester.makeini(TRIO_INI)
        source = source.replace("def test_fails", "async def test_fails")
        source = source.replace("    mockdcp.apply", "    await mockdcp.apply")
    pytester.makepyfile(source)
    result = pytester.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*AssertionError: the consumer got it wrong*",
            "*- mockdcp (kv 127.0.0.1:*, http *): event log -*",
            "+0.000s conn 1 connection_opened peer=127.0.0.1",
            "*- mockdcp: expectations -*",
            "(no expect steps)",
        ]
    )


def test_a_failed_trio_test_reports_every_factory_server(pytester: pytest.Pytester) -> None:
    pytester.makeini(TRIO_INI)
    pytester.makepyfile(
        """
        async def test_fails(mockdcp_factory):
            await mockdcp_factory()
            await mockdcp_factory(vbuckets=2)
            raise RuntimeError("consumer crashed")
        """
    )
    result = pytester.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*RuntimeError: consumer crashed",
            "*- mockdcp_factory #1 (kv 127.0.0.1:*): event log -*",
            "*- mockdcp_factory #1: expectations -*",
            "*- mockdcp_factory #2 (kv 127.0.0.1:*): event log -*",
        ]
    )


def test_a_passing_test_reports_nothing(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_passes(mockdcp):\n    pass\n")
    result = pytester.runpytest("-rA")
    result.assert_outcomes(passed=1)
    result.stdout.no_fnmatch_line("*event log*")


EXPECTING = """
import pytest

{marker}
def test_expects_noops(mockdcp):
    mockdcp.apply({{"expect": {{"noops_answered": 1, "within": 0.05, "name": "noops"}}}})
"""


def test_a_failed_expectation_fails_the_test_with_the_expectations_report(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(EXPECTING.format(marker=""))
    result = pytester.runpytest()
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "mockdcp: 1 expectation(s) failed",
            "FAIL step 1 noops: 0 noops answered",
            "*- mockdcp: expectations -*",
            "FAIL step 1 noops: 0 noops answered",
        ]
    )


def test_check_expectations_false_leaves_them_to_the_test(pytester: pytest.Pytester) -> None:
    marker = "@pytest.mark.mockdcp(check_expectations=False)"
    pytester.makepyfile(EXPECTING.format(marker=marker))
    pytester.runpytest().assert_outcomes(passed=1)


def test_marker_scenario_file_is_found_beside_the_test(pytester: pytest.Pytester) -> None:
    pytester.makefile(
        ".yaml",
        small="""
        name: small
        bucket: {name: orders, vbuckets: 4}
        steps:
          - set: {key: "order::1", value: {total: 3}}
        """,
    )
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.mockdcp(scenario="small.yaml")
        def test_scenario(mockdcp):
            state = mockdcp.state()
            assert state["bucket"] == "orders" and len(state["vbuckets"]) == 4
            assert [key for _, key in mockdcp.oracle()] == [b"order::1"]
        """
    )
    pytester.runpytest().assert_outcomes(passed=1)


def test_marker_scenario_names_a_bundled_scenario(pytester: pytest.Pytester) -> None:
    pytester.makeini(TRIO_INI)
    pytester.makepyfile(
        """
        import pytest

        # stall.yaml: a 4-vbucket bucket, 40 documents, then waits for a consumer
        @pytest.mark.mockdcp(scenario="stall")
        def test_sync(mockdcp):
            assert len(mockdcp.state()["vbuckets"]) == 4
            assert len(mockdcp.oracle()) == 40

        @pytest.mark.mockdcp(scenario="stall")
        async def test_trio(mockdcp):
            assert len(mockdcp.oracle()) == 40
        """
    )
    pytester.runpytest().assert_outcomes(passed=2)


def test_the_factory_serves_a_corpus_on_disk(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.pipeline.test_ondisk import _write

    corpus = _write(tmp_path / "corpus")
    monkeypatch.setenv("MOCKDCP_CACHE", str(tmp_path / "cache"))
    pytester.makepyfile(
        f"""
        def test_on_disk(mockdcp_factory):
            server = mockdcp_factory(vbuckets=16, corpus={str(corpus)!r}, on_disk=True)
            corpus = server.state()["corpus"]
            assert corpus["on_disk"] is True
            assert len(server.oracle()) == corpus["documents"] > 0
        """
    )
    pytester.runpytest().assert_outcomes(passed=1)


def test_a_server_that_died_during_a_test_errors_its_teardown_with_the_cause(
    pytester: pytest.Pytester,
) -> None:
    """The fixture's server dies of an error of its own after it was ready (its flusher
    raises): the teardown reports that error, not nothing (the thread kept it) or a
    ``RunFinishedError`` of a later call."""
    pytester.makepyfile(
        """
        import time

        from mockdcp.util import ServerError


        def test_breaks_it(mockdcp):
            def broken(now):
                raise RuntimeError("the disk is on fire")

            def break_the_flusher_and_write():  # returns before the flusher runs
                mockdcp.bucket.flusher.flush = broken
                mockdcp.bucket.set("a", "x")

            mockdcp.call(break_the_flusher_and_write)
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:  # until the flusher ran
                try:
                    mockdcp.call(lambda: None)
                except ServerError:
                    return
                time.sleep(0.02)
            raise AssertionError("the flusher never ran")
        """
    )
    result = pytester.runpytest()
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        ["*ServerError: the server died after it was ready: RuntimeError('the disk is on fire')*"]
    )
