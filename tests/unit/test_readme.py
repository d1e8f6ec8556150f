"""The README's code blocks run as written, as a user would run them.

Every fenced block is preceded by a marker saying how it is tested (a block without one fails the
test, so a new snippet cannot go untested):

- ``<!-- test: run [ENV=VALUE ...] -->`` — Python runs as a script; a shell block runs line by line
  with bash; each command must end 0 or 1 (the guarded thing failed is an answer; 2, bad input,
  means the README is wrong), and no output may hold a traceback;
- ``<!-- test: given NAME -->`` — Python run after the stand-ins for the user's own code
  (:mod:`tests.readme_givens`: a model, an optimizer, batches);
- ``<!-- test: spec -->`` — a job spec: trainguard parses it;
- ``<!-- test: cloud -->`` — needs a Google Cloud project (or a Docker engine): Python is compiled
  and its imports run, and each ``trainguard`` command line is parsed by the CLI (its options exist,
  their values fit);
- ``<!-- test: parse -->`` — a command shown with placeholders or optional parts: parsed as above;
- ``<!-- test: output -->`` — what a command prints, not code.

Blocks run in a scratch directory holding the repository's ``examples/`` and ``containers/``, the
way a user runs them from a clone.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.child_env import with_repo_on_path
from tests.readme_givens import GIVENS

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
_MARKER = re.compile(r"<!--\s*test:\s*(\w+)\s*(.*?)\s*-->")
_FENCE = re.compile(r"^```(\w*)\s*$")
KINDS = ("run", "given", "spec", "cloud", "parse", "output")


@dataclass(frozen=True)
class Block:
    line: int
    lang: str
    kind: str
    arg: str
    code: str

    def __str__(self) -> str:
        return f"README.md:{self.line} ({self.lang or 'text'}, {self.kind})"


def blocks(text: str) -> list[Block]:
    """Every fenced block with the marker on the nearest non-empty line above it."""
    lines = text.splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start = i
        j = i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        above = next((lines[k] for k in range(start - 1, -1, -1) if lines[k].strip()), "")
        marker = _MARKER.search(above)
        kind, arg = (marker.group(1), marker.group(2)) if marker else ("", "")
        found.append(Block(start + 1, m.group(1), kind, arg, "\n".join(lines[start + 1 : j]) + "\n"))
        i = j + 1
    return found


ALL = blocks(README.read_text())


def test_every_block_says_how_it_is_tested():
    unmarked = [str(b) for b in ALL if b.kind not in KINDS]
    assert not unmarked, f"blocks without a <!-- test: ... --> marker ({', '.join(KINDS)}): {unmarked}"
    assert [b for b in ALL if b.kind == "given" and b.arg not in GIVENS] == []


@pytest.fixture
def workdir(tmp_path):
    for name in ("examples", "containers"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def _env(block: Block) -> dict[str, str]:
    env = with_repo_on_path()
    env.pop("TRAINGUARD_COMPONENT_IMAGE", None)
    for item in shlex.split(block.arg):
        if "=" in item:
            key, value = item.split("=", 1)
            env[key] = value
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def _check(proc: subprocess.CompletedProcess, what: str, allowed=(0,)) -> None:
    output = proc.stdout + proc.stderr
    assert proc.returncode in allowed, f"{what} exited {proc.returncode}:\n{output[-4000:]}"
    assert "Traceback" not in output, f"{what} printed a traceback:\n{output[-4000:]}"


def _commands(code: str) -> list[str]:
    """Shell commands of a block: continuation lines joined, comments and blanks dropped."""
    joined = re.sub(r"\\\n\s*", " ", code)
    return [
        line.split(" #")[0].strip()
        for line in joined.splitlines()
        if line.strip() and not line.startswith("#")
    ]


def _python(block: Block, workdir: Path, prelude: str = "") -> None:
    script = workdir / "snippet.py"
    script.write_text(prelude + "\n" + block.code)
    proc = subprocess.run(
        [sys.executable, str(script)],
        cwd=workdir,
        env=_env(block),
        capture_output=True,
        text=True,
        timeout=600,
    )
    _check(proc, str(block))


RUN = [b for b in ALL if b.kind in ("run", "given")]


@pytest.mark.slow
@pytest.mark.parametrize("block", RUN, ids=[f"line{b.line}" for b in RUN])
def test_a_block_runs_as_written(block, workdir):
    if block.kind == "given":
        _python(block, workdir, GIVENS[block.arg])
    elif block.lang == "python":
        _python(block, workdir)
    else:
        for command in _commands(block.code):
            proc = subprocess.run(
                ["bash", "-c", command],
                cwd=workdir,
                env=_env(block),
                capture_output=True,
                text=True,
                timeout=600,
            )
            _check(proc, f"{block}: {command}", allowed=(0, 1))


SPECS = [b for b in ALL if b.kind == "spec"]


@pytest.mark.parametrize("block", SPECS, ids=[f"line{b.line}" for b in SPECS])
def test_a_spec_block_is_a_valid_job_spec(block):
    from trainguard.spec import parse_spec

    parse_spec(block.code, project="my-project", region="us-central1", source=str(block))


CLOUD = [b for b in ALL if b.kind in ("cloud", "parse")]  # importing aiplatform alone takes ~10 s


@pytest.mark.slow
@pytest.mark.parametrize("block", CLOUD, ids=[f"line{b.line}" for b in CLOUD])
def test_a_cloud_block_is_well_formed(block):
    if block.lang == "python":
        compile(block.code, str(block), "exec")
        imports = "\n".join(
            line for line in block.code.splitlines() if re.match(r"(from \S+ )?import ", line)
        )
        proc = subprocess.run(
            [sys.executable, "-c", imports], env=_env(block), capture_output=True, text=True, timeout=120
        )
        _check(proc, f"{block} (its imports)")
        return
    from typer.main import get_command

    from trainguard.cli import app

    cli = get_command(app)
    for command in _commands(block.code):
        words = shlex.split(command)
        if words[:1] != ["trainguard"]:
            continue
        sub = cli.commands[words[1]]  # an unknown subcommand is a KeyError: the README is wrong
        sub.make_context(words[1], [w for w in words[2:] if not (w.startswith("[") or w.endswith("]"))])


def test_the_readme_names_every_failure_class():
    from trainguard.failure_classes import CLASS_NAMES

    text = README.read_text()
    section = text[text.index("### Failure classes") : text.index("### Exit codes")]
    assert [c for c in CLASS_NAMES if f"`{c}`" not in section] == []
