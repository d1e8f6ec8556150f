"""CLI start-up benchmark (``make bench``): how long a person waits for the two quickest commands.

Whole processes, as a user runs them, medians of ``ROUNDS`` taken side by side (round-robin, so a
busy machine slows every command alike), next to the floor, ``python -c pass``:

* ``trainguard --help`` (goal ≤ 0.3 s);
* ``trainguard preflight examples/a100-spot.yaml -p my-project -r us-central1 --only compat``
  (goal ≤ 0.3 s): offline, it imports no Google client.

Each runs with this interpreter (``.venv``'s, made from ``PYTHON``, by default the machine's
``python3``) and, when ``python3`` on the PATH is another build of the same Python version, with
that one too: a scratch environment of it with nothing installed sees ``.venv``'s packages (a
``.pth`` line), so the same code is timed on the machine's default interpreter. The first round
warms the compiled-module caches and is not counted.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ROUNDS = 9
GOAL_S = 0.3
# What the ``trainguard`` console script that pip writes runs (any interpreter can run it).
SCRIPT = ["-c", "import sys; from trainguard.entry import main; sys.argv[0] = 'trainguard'; sys.exit(main())"]
COMMANDS = {
    "python -c pass": ["-c", "pass"],
    "trainguard --help": [*SCRIPT, "--help"],
    "preflight --only compat": [
        *SCRIPT,
        "preflight",
        "examples/a100-spot.yaml",
        "-p",
        "my-project",
        "-r",
        "us-central1",
        "--only",
        "compat",
    ],
}


def _build(python: str) -> tuple[str, str]:
    """(version, installation prefix) of an interpreter."""
    code = "import platform, sys; print(platform.python_version()); print(sys.base_prefix)"
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    return out[0], out[1]


def _default_python(scratch: Path) -> str | None:
    """An interpreter of the machine's ``python3`` that imports what ``.venv`` holds, or None when
    ``python3`` is this interpreter's own build or another minor version (compiled extensions and
    caches are shared within one minor version only)."""
    found = shutil.which("python3")
    if found is None:
        return None
    (theirs, their_prefix), (ours, our_prefix) = _build(found), _build(sys.executable)
    if their_prefix == our_prefix or theirs.split(".")[:2] != ours.split(".")[:2]:
        return None
    subprocess.run([found, "-m", "venv", "--without-pip", str(scratch)], check=True)
    site = subprocess.run(
        [str(scratch / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # addsitedir also reads .venv's own .pth files (the editable install of trainguard).
    ours_site = sysconfig.get_path("purelib")
    Path(site, "tg-bench-venv.pth").write_text(f"import site; site.addsitedir({ours_site!r})\n")
    return str(scratch / "bin" / "python")


def _wall(argv: list[str]) -> float:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": ""}  # keep the compiled caches, as installs do
    started = time.perf_counter()
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"bench_cli: {' '.join(argv)} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    return wall


def measure(python: str) -> dict[str, float]:
    """Median wall seconds of each command with ``python``, the commands taken in turn."""
    for args in COMMANDS.values():  # warm-up: compiled-module caches
        _wall([python, *args])
    walls: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(ROUNDS):
        for name, args in COMMANDS.items():
            walls[name].append(_wall([python, *args]))
    return {name: statistics.median(values) for name, values in walls.items()}


def report(label: str, medians: dict[str, float]) -> None:
    floor = medians["python -c pass"]
    print(f"{label} (median of {ROUNDS}, whole processes):")
    for name, seconds in medians.items():
        goal = "" if name == "python -c pass" else f"  goal ≤ {GOAL_S * 1000:.0f} ms: "
        verdict = "" if not goal else ("met" if seconds <= GOAL_S else "MISSED")
        above = "" if name == "python -c pass" else f" ({(seconds - floor) * 1000:+.0f} ms over the floor)"
        print(f"  {name:<26} {seconds * 1000:6.0f} ms{above}{goal}{verdict}")


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="tg-bench-cli-") as tmp:
        pythons = {f"this interpreter, Python {_build(sys.executable)[0]}": sys.executable}
        default = _default_python(Path(tmp) / "python3")
        if default is not None:
            pythons[f"the machine's python3, Python {_build(default)[0]}"] = default
        for label, python in pythons.items():
            report(label, measure(python))
    return 0


if __name__ == "__main__":
    sys.exit(main())
