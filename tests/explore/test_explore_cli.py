"""``mockdcp explore`` as a user runs it: bad input refused before any schedule runs,
the reference consumer clean over a fixed seed, wrong consumers found, shrunk, and the
shrunk scenario replayed by ``mockdcp check`` (failing them, passing the reference)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mockdcp.cli import main
from mockdcp.scenario import load_scenario
from tests.integration._stubborn import STUBBORN, alive, kill_told, told_pid

ROOT = Path(__file__).resolve().parents[2]
WRONG = str(ROOT / "tests" / "scenarios" / "wrong_consumer.py")
TAIL = [sys.executable, "-m", "mockdcp", "tail", "--json"]


def mockdcp(*args: str, timeout: float = 900) -> tuple[int, str, str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-m", "mockdcp", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=timeout,
        check=False,
    )
    return done.returncode, done.stdout, done.stderr


def explore(*args: str, consumer: list[str]) -> tuple[int, dict[str, Any]]:
    code, out, err = mockdcp("explore", "--json", *args, "--", *consumer)
    assert out, err[-3000:]
    return code, json.loads(out)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--", "/nonexistent/consumer"], "cannot start"),
        (["--", "no-such-consumer-program-39"], "not found on PATH"),
        (["--replicas", "2", "--nodes", "2", "--", "true"], "--replicas"),
        (["--vbuckets", "5000", "--", "true"], "--vbuckets"),
        (["--seed", "-3", "--", "true"], "--seed"),
        (["--runs", "0", "--", "true"], "--runs"),
        (["--tag", "bogus", "--", "true"], "unknown group"),
        (["--runs", "3", "--time", "10", "--", "true"], "give one"),
        (["--out", "/proc/explore-out", "--", "true"], "not writable"),
        ([], "consumer command"),
    ],
)
def test_bad_input_is_refused_before_any_schedule_runs(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["explore", *args]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.startswith("mockdcp explore: ")


def test_the_reference_consumer_shows_no_anomaly_over_a_fixed_seed(tmp_path: Path) -> None:
    junit = tmp_path / "explore.xml"
    code, report = explore(
        "--seed", "39", "--runs", "3", "-j", "2", "--junit", str(junit), consumer=TAIL
    )
    assert report["found"] == [], report["found"]
    assert code == 0
    assert report["schedules"] == 3
    assert report["anomalies"] == {}
    assert junit.read_text().count("<testcase") == 3
    # where a schedule's time went, as check reports it per scenario (issue 39)
    phases = report["phases"]
    assert {"server", "consumer start", "scenario", "stop", "overhead"} <= set(phases)
    others = sum(v for p, v in phases.items() if p not in ("scenario", "overhead"))
    assert others - 0.01 <= phases["overhead"] <= others + 0.5  # + the scratch folder's


@pytest.mark.full
@pytest.mark.parametrize(
    ("mode", "groups", "anomaly"),
    [
        ("drop-deletions", "data", "phantom"),
        ("no-reopen", "data,stream_end", "vbucket abandoned"),
        ("apply-prepares", "data", "phantom"),
    ],
)
def test_a_wrong_consumer_is_found_shrunk_and_replayed(
    tmp_path: Path, mode: str, groups: str, anomaly: str
) -> None:
    out = tmp_path / "found"
    wrong = [sys.executable, WRONG, "--mode", mode]
    code, report = explore(
        "--seed", "1", "--runs", "12", "-j", "2", "--tag", groups,
        "--shrink-time", "240", "--shrink-runs", "1", "--out", str(out),
        consumer=wrong,
    )  # fmt: skip
    assert code == 1
    assert anomaly in report["anomalies"], report["anomalies"]
    (shrunk,) = [s for s in report["shrunk"] if s["anomaly"] == anomaly]
    assert shrunk["steps"] <= 6
    assert shrunk["steps"] < shrunk["from_steps"]
    path = Path(shrunk["file"])
    text = path.read_text()
    assert "--seed 1" in text
    assert f"anomaly: {anomaly}" in text
    load_scenario(str(path))  # the library's format
    code, replay, _ = mockdcp("check", "--json", str(path), "--", *wrong)
    assert code == 1, replay
    code, replay, _ = mockdcp("check", "--json", str(path), "--", *TAIL)
    assert code == 0, replay


def run_in_process(*args: str, consumer: str) -> tuple[int, dict[str, Any]]:
    """``mockdcp explore --json ARGS -- module:callable`` in this process."""
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["explore", "--json", *args, "--", consumer])
    return code, json.loads(out.getvalue())


def test_the_reference_consumer_in_process_shows_no_anomaly(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, report = run_in_process(
        "--seed", "39", "--runs", "8", "-j", "4", consumer="mockdcp.explore:reference_consumer"
    )
    assert report["found"] == [], report["found"]
    assert (code, report["schedules"]) == (0, 8)
    assert report["phases"] == {}  # no consumer process to start


def test_a_consumer_that_crashes_in_process_is_a_consumer_exit() -> None:
    code, report = run_in_process(
        "--runs", "1", "--shrink-time", "0", consumer="tests.explore.wrong:crashes"
    )
    assert code == 1
    assert report["anomalies"] == {"consumer exit": 1}
    assert "planted crash" in report["found"][0]["reason"]


def test_a_consumer_that_calls_sys_exit_in_process_ends_its_schedule_not_the_run() -> None:
    code, report = run_in_process(
        "--runs", "3", "--shrink-time", "0", consumer="tests.explore.wrong:exits_process"
    )
    assert code == 1
    assert report["schedules"] == 3  # the run went on after the first exit
    assert set(report["anomalies"]) == {"consumer exit"}  # (a schedule may end first)
    assert "SystemExit: 3" in report["found"][0]["reason"]


def test_a_module_callable_that_cannot_be_had_is_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["explore", "--", "no_such_module_39:make"]) == 2
    assert "cannot start" in capsys.readouterr().err
    assert main(["explore", "--", "mockdcp.explore:no_such_factory"]) == 2
    assert "no callable" in capsys.readouterr().err


@pytest.mark.full
def test_an_in_process_wrong_consumer_is_found_and_shrunk(tmp_path: Path) -> None:
    out = tmp_path / "found"
    code, report = run_in_process(
        "--seed", "1", "--runs", "20", "-j", "4", "--tag", "data",
        "--shrink-time", "120", "--shrink-runs", "2", "--out", str(out),
        consumer="tests.explore.wrong:drop_deletions",
    )  # fmt: skip
    assert code == 1
    (shrunk,) = report["shrunk"]
    assert shrunk["anomaly"] == "phantom"
    assert shrunk["steps"] <= 4
    assert shrunk["rate"] == 1.0
    code, out_text, _ = mockdcp("check", "--json", shrunk["file"], "--", *TAIL)
    assert code == 0, out_text


@pytest.mark.full
def test_ctrl_c_writes_what_was_found_so_far(tmp_path: Path) -> None:
    import signal
    import time

    out = tmp_path / "found"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "mockdcp", "explore", "--json", "--seed", "1",
            "--runs", "500", "-j", "2", "--tag", "data", "--out", str(out),
            "--", "tests.explore.wrong:drop_deletions",
        ],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT,
    )  # fmt: skip
    time.sleep(15)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    report = json.loads(stdout)
    assert report["interrupted"]
    assert 0 < report["schedules"] < 500
    assert proc.returncode == (1 if report["found"] else 130), stderr[-2000:]
    if report["found"]:
        (shrunk,) = report["shrunk"]
        assert Path(shrunk["file"]).exists()
        assert shrunk["file"].startswith(str(out))


@pytest.mark.full
def test_a_hanging_consumer_is_stopped_and_the_run_goes_on(tmp_path: Path) -> None:
    hang = tmp_path / "hang.py"
    hang.write_text("import time\ntime.sleep(1000)\n")
    code, report = explore(
        "--runs", "2", "-j", "2", "--connect-timeout", "2", "--timeout", "5",
        "--shrink-time", "0", consumer=[sys.executable, str(hang)],
    )  # fmt: skip
    assert code == 1
    assert report["schedules"] == 2
    assert report["anomalies"] == {"stuck": 2}


@pytest.mark.full
def test_a_consumer_slow_to_stream_is_judged_from_its_first_stream(tmp_path: Path) -> None:
    """A JVM on a loaded machine (java-dcp-client, issue 39 item 7): its first
    connection closes before it streams and its next one comes seconds later. This one
    connects and leaves at once, then starts streaming 9 s later, past a drawn wait's
    8 s (``WAIT_TIMEOUT``): its schedules count from its first stream and are judged as
    usual (counted from its first connection, each was stuck at its first wait). The
    ``mockdcp tail`` it launches is stopped with it: signalled alone, this launcher exited
    and left its tail running after explore and the test session (``_consumer_process``)."""
    from mockdcp.explore._generate import WAIT_TIMEOUT

    late = tmp_path / "late.py"
    late.write_text(
        "import os, socket, subprocess, sys, time\n"
        "socket.create_connection((os.environ['MOCKDCP_HOST'], "
        "int(os.environ['MOCKDCP_KV_PORT']))).close()\n"
        f"time.sleep({WAIT_TIMEOUT + 1})\n"
        "tail = subprocess.Popen([sys.executable, '-m', 'mockdcp', 'tail', '--json'])\n"
        f"told = os.path.join({str(tmp_path)!r}, os.environ['MOCKDCP_SCENARIO'] + '.pid')\n"
        "open(told, 'w').write(str(tail.pid))\n"
        "sys.exit(tail.wait())\n"
    )
    try:
        code, report = explore(
            "--seed", "39", "--runs", "2", "-j", "2", "--shrink-time", "0",
            consumer=[sys.executable, str(late)],
        )  # fmt: skip
        assert report["found"] == [], report["found"]
        assert (code, report["schedules"]) == (0, 2)
        tails = [int(told.read_text()) for told in tmp_path.glob("*.pid")]
        assert len(tails) == 2
        assert not [pid for pid in tails if alive(pid)], "a tail outlived explore"
    finally:
        for told in tmp_path.glob("*.pid"):
            kill_told(told)


def test_time_draws_schedules_until_it_is_spent() -> None:
    code, report = run_in_process(
        "--seed", "5", "--time", "2", "-j", "2", consumer="mockdcp.explore:reference_consumer"
    )
    assert (code, report["found"]) == (0, [])
    assert report["schedules"] >= 2
    assert report["schedules_per_minute"] > 0


@pytest.mark.full
def test_master_local_2_finds_what_a_local_run_finds() -> None:
    """``--master local[2]``: the schedules as Spark tasks, two partitions, each index's
    seed from the run's seed alone: the same schedules, results and findings as a
    local run (issue 39 item 8)."""
    args = ["--seed", "3", "--runs", "6", "--tag", "data", "--shrink-time", "0"]
    consumer = ["tests.explore.wrong:drop_deletions"]
    _, local = explore(*args, consumer=consumer)
    code, spark = explore(*args, "--master", "local[2]", consumer=consumer)
    assert code == 1
    assert spark["schedules"] == local["schedules"] == 6

    def findings(report: dict[str, Any]) -> list[tuple[int, int, str]]:
        return [(f["index"], f["seed"], f["anomaly"]) for f in report["found"]]

    assert findings(spark) == findings(local)
    assert findings(spark)  # the planted bug is found at all


def test_master_takes_runs_not_time(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explore", "--master", "local[2]", "--time", "5", "--", "true"]) == 2
    assert "--runs, not --time" in capsys.readouterr().err
    assert main(["explore", "--partitions", "2", "--", "true"]) == 2
    assert "with --master" in capsys.readouterr().err


@pytest.mark.parametrize(("runs", "partitions"), [(6, 2), (7, 3), (2, 2), (10, 1)])
def test_the_spark_shares_take_every_schedule_once(runs: int, partitions: int) -> None:
    from mockdcp.cli._explore_spark import share

    taken = [i for p in range(partitions) for i in share(runs, partitions, p)]
    assert sorted(taken) == list(range(runs))


def test_shrinking_runs_each_candidate_as_the_file_it_writes_is_replayed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Explore runs a consumer command's schedule counted from its first stream; the
    file ``--out`` writes begins with a wait for the streams and ``check`` replays it
    counted from the first connection. Shrinking runs each candidate as that file and
    as ``check`` replays it, so the failure it keeps is the file's (it ran them as
    explore's schedules: a drop-deletions phantom it kept passed ``check`` in CI)."""
    import trio

    from mockdcp.cli import _explore as ex
    from mockdcp.cli._check import CheckOptions, ScenarioResult, Verdict
    from mockdcp.explore import Anomaly, GenerateOptions
    from mockdcp.scenario import Scenario, steps as st

    ran: list[tuple[list[st.Step], bool]] = []

    async def check(scenario: Scenario, options: CheckOptions) -> ScenarioResult:
        ran.append((list(scenario.steps), options.start_on_stream))
        stuck = "the scenario did not finish within 1s"
        return ScenarioResult(scenario.name, scenario.source, Verdict.FAILED, stuck)

    monkeypatch.setattr(ex, "check_scenario", check)
    options = ex.ExploreOptions(
        command=[sys.executable, WRONG],
        generate=GenerateOptions(seed=1, tags=frozenset({"data"})),
        runs=1,
        shrink_runs=1,
        out=tmp_path,
    )
    state = ex.ExploreState(options)
    trio.run(ex.explore, state)
    (explored, on_stream), *shrinking = ran
    first = st.Wait(consumer=st.ConsumerProgress(streams=True), timeout=options.connect_within)
    assert on_stream  # explore's own schedules count from the first stream
    assert explored[0] != first
    assert len(shrinking) > 1
    assert all(steps[0] == first and not on_stream for steps, on_stream in shrinking)
    written = state.shrunk[Anomaly.STUCK].path
    assert written is not None
    assert list(load_scenario(str(written)).steps) == shrinking[-1][0]
    # the smallest schedule run once more after shrinking, its rate in the file
    assert shrinking[-1][0] == shrinking[-2][0]
    assert "# re-run once after shrinking: fails 1 of 1" in written.read_text()
    (reported,) = state.as_dict()["shrunk"]
    assert (reported["rerun_failed"], reported["rerun_rate"]) == (1, 1.0)


def test_sigterm_stops_the_consumer_process_and_reports_what_was_found(tmp_path: Path) -> None:
    """SIGTERM (a cancelled CI job) ended explore at once, its consumer process left
    running; it now stops the consumer and reports as after Ctrl-C."""
    import signal

    told = tmp_path / "pid"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "mockdcp", "explore", "--json", "--seed", "1", "--runs", "1",
            "--out", str(tmp_path / "found"), "--", sys.executable, "-c", STUBBORN, str(told),
        ],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT,
        start_new_session=True,
    )  # fmt: skip
    try:
        pid = told_pid(told)
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=30)
        assert proc.returncode == 130, stderr[-2000:]
        assert json.loads(stdout)["interrupted"]
        assert not alive(pid)
    finally:
        proc.kill()
        kill_told(told)
