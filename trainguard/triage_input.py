"""Where the text ``trainguard triage`` classifies comes from: a log file, stdin, or the text itself.

``SOURCE`` is a log file or ``-`` (stdin); ``--text`` gives the error text itself. People also
paste the message straight in (``trainguard triage "CUDA out of memory. Tried to allocate…"``):
an argument that names no file and reads as a sentence (it holds a space or a line break and
does not end like a file name) is classified as text, and a note says so. Anything else that
cannot be read is bad input (exit 2) with what to do.
"""

from __future__ import annotations

import os
import re
import select
from pathlib import Path
from typing import BinaryIO, TextIO

from trainguard.errors import ConfigError
from trainguard.redaction import bound, redact
from trainguard.triage import Diagnosis, classify, classify_file, classify_stream

__all__ = ["read_diagnosis", "looks_like_text", "FIFO_WAIT_S"]

FIFO_WAIT_S = 10.0  # for a named FIFO's first byte: a writer that is there answers at once

# "train.log", "logs/job 7.txt": a name ending in a short extension is a file the user meant.
_FILE_NAME_END = re.compile(r"\.[A-Za-z0-9]{1,5}$")


def looks_like_text(argument: str) -> bool:
    """True when ``argument`` reads as an error message rather than a file name."""
    if "\n" in argument:
        return True
    return bool(re.search(r"\s", argument.strip())) and not _FILE_NAME_END.search(argument.strip())


def _shown(argument: str) -> str:
    return repr(bound(redact(argument), 200))


def _open_fifo(path: Path, source: str) -> BinaryIO:
    """A FIFO opened for reading without waiting forever for a writer.

    ``triage <(kubectl logs …)`` hands a pipe whose writer is already there (``/dev/fd/N``): it
    is read as it comes. A named FIFO that nothing writes to would block ``open`` for ever: it
    gets :data:`FIFO_WAIT_S` for its first byte (or its writer's end), then is bad input.

    Raises:
        ConfigError: nothing wrote to the named FIFO in time.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        inherited = source.startswith(("/dev/fd/", "/proc/self/fd/", "/dev/stdin"))
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        if not inherited and not poller.poll(int(FIFO_WAIT_S * 1000)):
            raise ConfigError(
                f"cannot read {_shown(source)}: a FIFO (named pipe) that nothing "
                f"wrote to in {FIFO_WAIT_S:g} s; start its writer first, or pipe "
                "the log in: ... | trainguard triage -"
            )
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_diagnosis(source: str, text: str | None, *, stdin: TextIO) -> tuple[Diagnosis, str]:
    """The diagnosis of SOURCE (a file, ``-``) or ``text``, and a note for stderr ('' if none).

    Raises:
        ConfigError: both a SOURCE file and --text, or SOURCE cannot be read.
    """
    if text is not None:
        if source != "-":
            raise ConfigError(f"give either a log file ({_shown(source)}) or --text, not both")
        return classify(text), ""
    if not source.strip():
        raise ConfigError(
            "the log file name is empty; give a log file, - for stdin, or --text 'the error text'"
        )
    if source == "-":
        buffer = getattr(stdin, "buffer", None)
        return (classify_stream(buffer) if buffer is not None else classify(stdin.read())), ""
    path = Path(source)
    try:
        if path.is_fifo():
            with _open_fifo(path, source) as stream:
                return classify_stream(stream), ""
        return classify_file(path), ""
    except FileNotFoundError:
        if looks_like_text(source):
            return classify(source), (
                f"note: no file named {_shown(source[:60])}: classified the "
                "argument as the error text itself (say --text to be explicit)"
            )
        raise ConfigError(
            f"cannot read {_shown(source)}: no such file; give a log file, - for "
            "stdin, or --text 'the error text'"
        ) from None
    except IsADirectoryError:
        raise ConfigError(
            f"cannot read {_shown(source)}: it is a directory; give a log file, - "
            "for stdin, or --text 'the error text'"
        ) from None
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the name
        reason = getattr(exc, "strerror", None) or str(exc)
        raise ConfigError(
            f"cannot read {_shown(source)}: {reason}; give a log file, - for "
            "stdin, or --text 'the error text'"
        ) from None
