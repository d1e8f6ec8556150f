"""Writing the files a user names: ``--json``, ``--markdown``, ``--html``, ``--plot``, reports.

One writer for every output path, so that each bad path is bad input (exit 2) with the reason and
never a hang or a traceback: a directory, a path under a file, a place that cannot be written, and
a FIFO that nothing reads (a plain ``open`` would wait for a reader forever; a FIFO or a pipe that
is being read, as with ``--json >(jq .)``, is written as usual). :func:`check_writable` lets a
costly stage (a training job) refuse a bad path before it starts rather than after it ran.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from trainguard.errors import ConfigError

__all__ = ["write_output", "check_writable"]


def _cannot(path: str | os.PathLike, option: str, reason: str) -> ConfigError:
    what = f"{option} {path}" if option else str(path)
    return ConfigError(f"cannot write {what}: {reason}; choose another path")


def _reason(exc: OSError) -> str:
    if exc.errno == errno.ENXIO:  # O_NONBLOCK on a FIFO without a reader
        return "it is a FIFO (named pipe) that nothing is reading; start its reader first"
    return exc.strerror or str(exc)


def write_output(path: str | os.PathLike, data: str | bytes, option: str = "") -> None:
    """Writes ``data`` (text as UTF-8) to ``path``, creating its parent directories.

    Raises:
        ConfigError: the path cannot be written (the message says why; ``option`` names the flag).
    """
    target = Path(path)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        # O_NONBLOCK: opening a FIFO with no reader fails at once (ENXIO) instead of waiting.
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NONBLOCK, 0o666)
    except OSError as exc:
        raise _cannot(path, option, _reason(exc)) from None
    try:
        os.set_blocking(fd, True)
        with os.fdopen(fd, "wb", closefd=True) as handle:
            fd = -1
            handle.write(raw)
    except OSError as exc:
        raise _cannot(path, option, _reason(exc)) from None
    finally:
        if fd >= 0:
            os.close(fd)


def check_writable(path: str | os.PathLike | None, option: str = "") -> None:
    """Refuses ``path`` now when :func:`write_output` could not write it later (creates nothing).

    Raises:
        ConfigError: ``path`` is a directory, lies under a file, or its nearest existing
            directory cannot be written.
    """
    if path is None:
        return
    target = Path(path)
    if target.is_dir():
        raise _cannot(path, option, "it is a directory")
    if target.exists():
        if not os.access(target, os.W_OK):
            raise _cannot(path, option, "permission denied")
        return
    parent = target.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise _cannot(path, option, f"{parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise _cannot(path, option, f"{parent} is not writable")
