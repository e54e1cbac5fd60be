"""What ``uid-fields`` and ``manage.py uid_fields`` share: one rule for when standard
output cannot be written, and the ids ``decode`` reads.

A reader that leaves early (``generate -n 100000 | head -1``) is not a failure: the
command ends quietly with status 141 (128 + SIGPIPE), what a POSIX tool killed by
SIGPIPE reports, so a ``set -o pipefail`` script sees the same as for ``yes | head -1``.
Any other failed write (ENOSPC from ``> /dev/full``, EIO) is an error of one line and
status 1, as ``seq 10 > /dev/full`` reports it: never a traceback.

Either way the stream's descriptor is pointed at /dev/null afterwards, so the
interpreter's own flush at exit (of what is still buffered) cannot raise again, as the
Python documentation advises for SIGPIPE.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import IO, Any

__all__ = [
    "BROKEN_PIPE_STATUS",
    "STDIN",
    "WRITE_ERROR_STATUS",
    "OutputFailure",
    "ids_of",
    "output_failure",
]

#: The exit status after the reader closed the pipe: 128 + SIGPIPE (13).
BROKEN_PIPE_STATUS = 141
#: The exit status after a write that failed otherwise (a full disk).
WRITE_ERROR_STATUS = 1
#: The id that stands for standard input in ``decode``'s ids.
STDIN = "-"


@dataclass(frozen=True)
class OutputFailure:
    """How a command ends after ``error``: its status, and the line to print on
    standard error (None when it ends quietly)."""

    status: int
    message: str | None


def output_failure(error: OSError, stream: IO[Any]) -> OutputFailure:
    """The end of a command whose write to ``stream`` raised ``error``; silences the
    stream's descriptor for the rest of the process."""
    _silence(stream)
    if isinstance(error, BrokenPipeError):
        return OutputFailure(BROKEN_PIPE_STATUS, None)
    reason = error.strerror or str(error)
    return OutputFailure(WRITE_ERROR_STATUS, f"cannot write the output: {reason}")


def _silence(stream: IO[Any]) -> None:
    try:
        descriptor = stream.fileno()
    except (AttributeError, OSError, io.UnsupportedOperation):
        return  # an in-memory stream: nothing is flushed to a descriptor at exit
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, descriptor)
    finally:
        os.close(devnull)


def ids_of(given: Iterable[str], stdin: Iterable[str]) -> Iterator[str]:
    """The ids to decode: ``given`` in order, with ``-`` replaced by the whitespace
    separated words of ``stdin``, read line by line (so a pipe is decoded as it comes)."""
    for text in given:
        if text != STDIN:
            yield text
            continue
        for line in stdin:
            yield from line.split()
