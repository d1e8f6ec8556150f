"""Runs a command that gets SIGKILL when the process that started it dies, even by SIGKILL (Linux).

The local backend starts each replica as::

    python -I -S die_with_parent.py LAUNCHER_PID ARGV...

This script asks the kernel for SIGKILL when its parent goes away (``PR_SET_PDEATHSIG``; the
setting outlives ``exec``), then ``exec``s ARGV in its own place: same pid, same environment, same
process group. The launcher needs no ``preexec_fn`` then. A ``preexec_fn`` makes ``subprocess``
``fork`` the launcher and run Python in the child before ``exec``, which the Python docs call unsafe
when threads run (the launcher's log readers do, and JAX's or torch's in a notebook). This script
runs in a fresh interpreter instead (``-I -S``: no site, no user path, a few milliseconds).

A command that cannot be started gets what a container runtime says, on the replica's output, and
exit status 127.

It imports only the standard library: it runs by path, before anything of trainguard is importable.
"""

import contextlib
import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1
NOT_STARTED = 127  # a container's status when its entrypoint cannot be run


def not_started(command: str, reason: str) -> str:
    """What a container runtime says when it cannot run ``command`` (the local backend says it too)."""
    return f'exec: "{command}": {reason}: executable file not found in $PATH'


def main(argv: list[str]) -> None:
    launcher, command = int(argv[1]), argv[2:]
    # Without prctl (a libc that lacks it), the launcher's own signal handling still stops it.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != launcher:  # the launcher died before the setting took effect
        os.kill(os.getpid(), signal.SIGKILL)
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        sys.stdout.write(not_started(command[0], exc.strerror or str(exc)) + "\n")
        sys.stdout.flush()
        os._exit(NOT_STARTED)


if __name__ == "__main__":
    main(sys.argv)
