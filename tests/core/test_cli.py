"""The command line: decode, generate, inspect; bad input is one line and status 2."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest

import uid_fields
from uid_fields import INSTAGRAM, TWITTER, locality
from uid_fields.cli import _parser, main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_decode_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "decode", "175928847299117063", "--layout", "discord", "--json")
    assert code == 0
    assert json.loads(out) == {
        "id": 175928847299117063,
        "timestamp_ms": 1462015105796,
        "datetime": "2016-04-30T11:18:25.796Z",
        "worker": 1,
        "process": 0,
        "sequence": 7,
    }


def test_decode_with_custom_epoch(capsys: pytest.CaptureFixture[str]) -> None:
    value = TWITTER.replace(epoch_ms=1704067200000).compose(timestamp_ms=1704067201000, worker=9)
    code, out, _ = run(capsys, "decode", str(value), "--epoch", "2024-01-01T00:00:00Z")
    assert code == 0 and "2024-01-01T00:00:01.000Z" in out and "worker" in out


def test_decode_locality_and_uniqid(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys, "decode", "20be0ffc-314a-bd53-7a50-013a65ca76d2", "--layout", "locality", "--json"
    )
    assert code == 0 and json.loads(out)["pid"] == 12618
    code, out, _ = run(capsys, "decode", "1abcd6557d8a001e241", "--layout", "uniqid")
    assert code == 2


def test_generate(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "generate", "-n", "5", "--layout", "instagram", "--shard", "42")
    ids = [int(line) for line in out.split()]
    assert code == 0 and len(ids) == 5 and ids == sorted(ids)
    assert {INSTAGRAM.decompose(i).shard for i in ids} == {42}
    code, out, _ = run(capsys, "generate", "-n", "2", "--layout", "locality", "--json")
    assert [locality.decompose(u).pid >= 0 for u in json.loads(out)] == [True, True]
    code, out, _ = run(capsys, "generate", "--field", "worker=5", "--field", "datacenter=2")
    assert TWITTER.decompose(int(out)).worker == 5


def test_inspect(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "inspect", "--layout", "instagram", "--json")
    info = json.loads(out)
    assert code == 0
    assert info["exhausted_at"].startswith("2046-06-27")
    assert info["ids_per_ms_per_node"] == 1024 and info["shard_values"] == 8192


@pytest.mark.parametrize(
    "argv",
    [
        ["decode", "not-an-id"],
        ["decode", str(2**64)],
        ["generate", "--field", "worker=99"],
        ["generate", "--epoch", "2999-01-01"],
        ["generate", "--epoch", "yesterday"],
        ["inspect", "--layout", "locality"],
        ["decode", "x", "--layout", "locality"],
    ],
)
def test_bad_input_is_one_line_and_status_2(argv: list[str]) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "uid_fields", *argv], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("uid-fields: error: ")


def test_version_prints_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.split() == ["uid-fields", uid_fields.__version__]


def test_every_option_has_help() -> None:
    missing = []
    for action in _parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                missing += [
                    f"{name} {a.dest}"
                    for a in child._actions
                    if not a.help and not isinstance(a, argparse._HelpAction)
                ]
    assert missing == []


def test_a_closed_pipe_ends_quietly_with_the_sigpipe_status() -> None:
    """``uid-fields generate -n 100000 | head -1``: the reader leaves after one line.
    No traceback; the status is 141 (128 + SIGPIPE), as a POSIX tool killed by SIGPIPE
    reports it, so ``set -o pipefail`` sees what it sees for ``yes | head -1``."""
    process = subprocess.Popen(
        [sys.executable, "-m", "uid_fields", "generate", "-n", "100000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    first = process.stdout.readline()
    process.stdout.close()
    err = process.stderr.read()
    process.stderr.close()
    assert process.wait(30) == 141
    assert int(first) > 0
    assert err == b""


def test_a_full_disk_is_one_line_and_status_1() -> None:
    """``uid-fields generate > /dev/full``: the write fails with ENOSPC. One line on
    standard error, as ``seq 10 > /dev/full`` says it, and status 1; no traceback."""
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "uid_fields", "generate", "-n", "10"],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=30,
        )
    assert done.returncode == 1
    assert done.stderr == "uid-fields: error: cannot write the output: No space left on device\n"


def test_decode_takes_several_ids_and_reads_standard_input() -> None:
    first, second = (
        TWITTER.compose(timestamp_ms=TWITTER.epoch_ms + 1000, worker=3),
        TWITTER.compose(timestamp_ms=TWITTER.epoch_ms + 2000, worker=4),
    )
    done = subprocess.run(
        [sys.executable, "-m", "uid_fields", "decode", "-", str(second), "--json"],
        input=f"{first}\n",
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["worker"] for line in done.stdout.splitlines()] == [3, 4]


def test_decode_of_several_ids_reports_each_bad_one_and_goes_on(
    capsys: pytest.CaptureFixture[str],
) -> None:
    good = TWITTER.compose(timestamp_ms=TWITTER.epoch_ms + 1000, worker=3)
    code, out, err = run(capsys, "decode", "abc", str(good), "--json")
    assert code == 2
    assert json.loads(out)["worker"] == 3
    assert err.count("\n") == 1 and "'abc'" in err


def test_decode_help_shows_the_default_layout(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["decode", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "(default: twitter)" in out and "'-'" in out
