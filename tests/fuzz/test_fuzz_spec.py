"""Property-based fuzzing of job specs through ``trainguard preflight`` (in-process).

Whatever the spec file holds — a valid-looking spec with a field mutated, retyped, renamed or
buried deep, YAML anchors and aliases that multiply, random text, random bytes — the CLI keeps
the contract (tests/fuzz/contract.py): exit 0, 1 or 2, no traceback, at most 20 KB of message,
time and memory bounded.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz.contract import assert_contract, peak_memory, run_cli

PR = ("--project", "my-project", "--region", "us-central1", "--only", "compat")
_CHECKS = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large]


def fuzz(examples: int) -> settings:
    """Few examples each: all five properties together stay within a few seconds."""
    return settings(max_examples=examples, deadline=None, database=None, suppress_health_check=_CHECKS)


MEMORY_CAP = 64 * 2**20  # bytes Python may allocate for one hostile spec


def base_spec() -> dict[str, Any]:
    return {
        "workerPoolSpecs": [
            {
                "machineSpec": {
                    "machineType": "a2-highgpu-1g",
                    "acceleratorType": "NVIDIA_TESLA_A100",
                    "acceleratorCount": 1,
                },
                "replicaCount": 1,
                "containerSpec": {
                    "imageUri": "us-docker.pkg.dev/p/r/t:1",
                    "command": ["python", "-m", "trainer"],
                    "args": ["--lr=0.1"],
                    "env": [{"name": "A", "value": "1"}],
                },
            },
            {
                "machineSpec": {
                    "machineType": "a2-highgpu-1g",
                    "acceleratorType": "NVIDIA_TESLA_A100",
                    "acceleratorCount": 1,
                },
                "replicaCount": 2,
                "containerSpec": {"imageUri": "us-docker.pkg.dev/p/r/t:1"},
            },
        ],
        "scheduling": {"strategy": "SPOT", "timeout": "3600s", "restartJobOnWorkerRestart": True},
        "baseOutputDirectory": {"outputUriPrefix": "gs://bucket/runs/r1"},
        "serviceAccount": "trainer@my-project.iam.gserviceaccount.com",
    }


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    """Every place in the spec a value sits (mapping keys and list indexes)."""
    out = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += _paths(value, (*prefix, i))
    return out


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
    st.sampled_from(
        [
            "-1s",
            "-3600s",
            "1e999",
            "0x1F",
            "SPOT",
            "NVIDIA_A100",
            "99999999999999999999",
            "ya29.a0AfB_SECRETTOKEN",
            "${HOME}",
            "",
            " ",
            "\x00",
            "3600",
            "1.5s",
            "nan",
        ]
    ),
    st.builds(lambda n: "v" * n, st.integers(min_value=10_000, max_value=1_000_000)),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=12,
)


def _nest(value: Any, depth: int, as_list: bool) -> Any:
    for _ in range(depth):
        value = [value] if as_list else {"k": value}
    return value


@st.composite
def mutated_specs(draw) -> dict[str, Any]:
    """A valid spec with a few things changed the way careless and hostile users change them."""
    spec = base_spec()
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        paths = _paths(spec)
        path = draw(st.sampled_from(paths[1:]))
        parent = spec
        for key in path[:-1]:
            parent = parent[key]
        leaf = path[-1]
        action = draw(st.sampled_from(["replace", "delete", "rename", "nest", "add", "snake"]))
        if action == "replace":
            parent[leaf] = draw(values)
        elif action == "delete":
            del parent[leaf]
        elif action == "rename" and isinstance(leaf, str):
            parent[leaf + draw(st.sampled_from(["s", "_", "X", ""]))[:-1] or leaf.lower()] = parent.pop(leaf)
        elif action == "nest":
            parent[leaf] = _nest(parent[leaf], draw(st.integers(0, 200)), draw(st.booleans()))
        elif action == "add" and isinstance(parent, dict):
            parent[draw(st.text(min_size=1, max_size=20))] = draw(values)
        elif action == "snake" and isinstance(leaf, str):
            snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in leaf)
            parent[snake] = copy.deepcopy(parent[leaf])
            if draw(st.booleans()):
                del parent[leaf]
    return spec


@st.composite
def alias_yaml(draw) -> str:
    """YAML where anchors alias earlier anchors: from harmless sharing to a billion laughs."""
    levels = draw(st.integers(min_value=1, max_value=10))
    fan = draw(st.integers(min_value=1, max_value=12))
    lines = ['x0: &a0 ["' + draw(st.text(alphabet="lo", min_size=1, max_size=8)) + '"]']
    for i in range(1, levels):
        lines.append(f"x{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * fan) + "]")
    target = draw(st.sampled_from(["args", "command", "imageUri", "env", "machineSpec"]))
    top = f"*a{levels - 1}"
    lines += [
        "workerPoolSpecs:",
        "- machineSpec: {machineType: n1-standard-4}",
        f"  containerSpec: {{imageUri: img, {target}: {top}}}"
        if target != "machineSpec"
        else f"  containerSpec: {{imageUri: img}}\n  machineSpec: {top}",
    ]
    if draw(st.booleans()):
        lines.append(f"labels: {{a: {top}}}")
    return "\n".join(lines) + "\n"


def _preflight(tmp_path: Path, text: str | bytes, *, memory: bool = False) -> None:
    """``trainguard preflight SPEC --only compat`` keeps the contract (and, with ``memory``, stays
    under MEMORY_CAP: measured only where the input could balloon, tracing costs time)."""
    path = tmp_path / "spec.yaml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
    if memory:
        outcome, peak = peak_memory(lambda: run_cli("preflight", path, *PR))
        assert peak < MEMORY_CAP, f"{peak / 2**20:.0f} MiB for {text[:200]!r}"
    else:
        outcome = run_cli("preflight", path, *PR)
    assert_contract(outcome)
    # a check that raised is a defect whatever the input (issue 28): never an ERROR result
    assert "internal error" not in outcome.output, outcome.output[-2000:]


@fuzz(40)
@given(spec=mutated_specs(), as_json=st.booleans())
def test_mutated_specs_keep_the_contract(tmp_path, spec, as_json):
    try:
        text = json.dumps(spec) if as_json else yaml.safe_dump(spec)
    except (ValueError, RecursionError):  # NaN in strict JSON, a nest too deep for the dumper
        text = yaml.safe_dump(spec) if as_json else json.dumps(spec)
    _preflight(tmp_path, text)


@fuzz(25)
@given(text=alias_yaml())
def test_anchors_and_aliases_keep_the_contract(tmp_path, text):
    _preflight(tmp_path, text, memory=True)


@fuzz(15)
@given(depth=st.integers(min_value=0, max_value=3000), kind=st.sampled_from("[{-"))
def test_deep_nesting_keeps_the_contract(tmp_path, depth, kind):
    if kind == "[":
        text = '{"workerPoolSpecs": ' + "[" * depth + "]" * depth + "}"
    elif kind == "{":
        text = "workerPoolSpecs: " + '{"a": ' * depth + "1" + "}" * depth
    else:
        text = "workerPoolSpecs:\n" + "".join("  " * i + "- \n" for i in range(1, min(depth, 400)))
    _preflight(tmp_path, text, memory=True)


@fuzz(30)
@given(text=st.one_of(st.text(max_size=400), st.text(alphabet="{}[]:,-&*!|>'\"#%@` \n\tabc01", max_size=300)))
def test_random_text_keeps_the_contract(tmp_path, text):
    _preflight(tmp_path, text)


@fuzz(20)
@given(data=st.binary(max_size=400))
def test_random_bytes_keep_the_contract(tmp_path, data):
    _preflight(tmp_path, data)
