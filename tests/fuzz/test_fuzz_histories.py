"""Property-based fuzzing of every history reader through ``trainguard validate`` (in-process).

Whatever the history holds — near-valid JSONL records with mutated values (NaN, huge numbers,
wrong types, nulls, nested values), CSV logs with mutated cells, torn last lines, byte-order
marks, CR/CRLF/bare-CR line ends, inserted and deleted bytes, random binary, mutated TensorBoard
event files, Hugging Face ``trainer_state.json`` documents and Ultralytics ``results.csv`` files
from the real corpus with hostile values, MLflow run directories (generated metric files with
hostile names, values and steps, and a real run's files mutated) — the CLI keeps the contract
(tests/fuzz/contract.py): exit 0, 1 or 2, no traceback, at most 20 KB of message, time bounded;
the safety net ("unexpected error reading this history") never fires. And where pyarrow reads a
block, it reads exactly what ``json`` / the ``csv`` module read: the two paths are compared on
every generated JSONL and CSV.
"""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz.contract import assert_contract, peak_memory, run_cli
from trainguard.errors import HistoryError
from trainguard.validation import load_history
from trainguard.validation.csv_reader import _Irregular, read_csv_arrow, read_csv_exact
from trainguard.validation.jsonl_reader import LineError, parse_lines_arrow, parse_lines_json

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "histories"
REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real_histories" / "files"
TRAINER_STATE = REAL / "Ayaa220__Propaganda-Detection-Using-LSTM-and-CNN" / "trainer_state.json"
RESULTS_CSV = (
    REAL / "Abdelrahman-Yasser-Zakaria__cucumber_detection" / "runs" / "detect" / "train2" / "results.csv"
)
MLFLOW_RUN = (
    REAL / "dritter321__fashion-mnist/training/mlruns/737694674622074143/c09a656b6f624a72b6897ad6dcb7c122"
)
_CHECKS = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large]
SAFETY_NET = "unexpected error reading this history"
MEMORY_CAP = 48 * 2**20  # bytes Python may allocate for one small hostile history


def fuzz(examples: int) -> settings:
    """Few examples each: every property together stays within the suite's budget."""
    return settings(max_examples=examples, deadline=None, database=None, suppress_health_check=_CHECKS)


def validate_file(name: str, data: bytes, *args: str):
    """``trainguard validate`` on ``data`` saved as ``name``; asserts the contract."""
    with tempfile.TemporaryDirectory(prefix="tg-fuzz-") as tmp:
        path = Path(tmp) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        outcome = run_cli("validate", str(path.parent if name.count("/") else path), *args)
    assert_contract(outcome, max_seconds=10)
    assert SAFETY_NET not in outcome.output, outcome.output[:3000]
    return outcome


# --- strategies -------------------------------------------------------------------------------

NUMBERS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.sampled_from([0, -0.0, 5e-324, 1.7976931348623157e308, 2**53 + 1, 2**64, 10**400]),
)
VALUES = st.one_of(
    NUMBERS,
    NUMBERS,
    NUMBERS,
    st.none(),
    st.booleans(),
    st.text(max_size=8),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
METRIC_NAMES = st.one_of(
    st.sampled_from(["loss", "accuracy", "lr", "val_loss", "Inference"]), st.text(max_size=12)
)
SPLITS = st.one_of(
    st.sampled_from(["train", "val", "validation", "test"]), st.none(), st.integers(), st.text(max_size=6)
)
STEPS = st.one_of(
    st.integers(min_value=0, max_value=10**6),
    st.integers(min_value=0, max_value=10**6),
    st.floats(allow_nan=True),
    st.none(),
    st.text(max_size=3),
    st.booleans(),
    st.integers(min_value=10**19, max_value=10**25),
)


@st.composite
def records(draw, wild: bool = True) -> list:
    """History records: one steady shape (as a trainer writes them), a few odd ones."""
    n = draw(st.integers(min_value=1, max_value=40))
    odd_in_20 = draw(st.integers(0, 6)) if wild else draw(st.sampled_from([0, 0, 0, 1]))
    names = draw(st.lists(METRIC_NAMES, min_size=1, max_size=4, unique=True))
    out = []
    for i in range(n):
        if draw(st.integers(0, 19)) >= odd_in_20:
            record: dict = {
                "step": i,
                "split": "train" if i % 5 else "val",
                "metrics": {name: draw(NUMBERS) for name in names},
            }
        else:
            record = {
                "step": draw(STEPS),
                "split": draw(SPLITS),
                "metrics": draw(st.dictionaries(METRIC_NAMES, VALUES, max_size=4)),
            }
            for key in draw(st.lists(st.sampled_from(["step", "split", "metrics"]), max_size=2)):
                record.pop(key, None)
            if draw(st.integers(0, 19)) == 0:
                record["metrics"] = draw(VALUES)
        out.append(record)
    return out


def _dump(record: dict, style: int) -> str:
    separators = [(",", ":"), (", ", ": "), (" , ", " : ")][style]
    return json.dumps(record, separators=separators, allow_nan=True)


@st.composite
def mutated(draw, data: bytes, most: int = 3) -> bytes:
    """``data`` with up to ``most`` byte-level accidents."""
    for _ in range(draw(st.integers(0, most))):
        kind = draw(
            st.sampled_from(["cut", "insert", "delete", "flip", "cr", "bom", "blank", "dup", "nul", "none"])
        )
        at = draw(st.integers(0, len(data)))
        if kind == "cut":
            data = data[:at]
        elif kind == "insert":
            data = data[:at] + draw(st.binary(min_size=1, max_size=6)) + data[at:]
        elif kind == "delete":
            data = data[:at] + data[at + draw(st.integers(1, 8)) :]
        elif kind == "flip" and data:
            at = min(at, len(data) - 1)
            data = data[:at] + bytes([data[at] ^ (1 << draw(st.integers(0, 7)))]) + data[at + 1 :]
        elif kind == "cr":
            data = data[:at] + b"\r" + data[at:]
        elif kind == "bom":
            data = b"\xef\xbb\xbf" + data
        elif kind == "blank":
            data = data[:at] + b"\n  \n" + data[at:]
        elif kind == "dup":
            data = data + data[at : at + 200]
        elif kind == "nul":
            data = data[:at] + b"\0" + data[at:]
    return data


@st.composite
def jsonl_files(draw, wild: bool = True) -> bytes:
    style = draw(st.integers(0, 2))
    ending = draw(st.sampled_from(["\n", "\n", "\r\n"]))
    text = "".join(_dump(r, style) + ending for r in draw(records(wild)))
    return draw(mutated(text.encode(), 3 if wild else draw(st.sampled_from([0, 0, 1]))))


NUMBER_CELLS = st.one_of(
    NUMBERS.map(repr), st.sampled_from(["", "", "nan", "-inf", "Infinity", "NaN", " 1.5", "1e999", "-0"])
)
ODD_CELLS = st.one_of(
    st.sampled_from(["1_0", "nan(3)", "0x1p3", '"2.5"', "text", "١", "-", "1,5"]), st.text(max_size=5)
)


@st.composite
def csv_files(draw, wild: bool = True) -> tuple[str, bytes]:
    lightning = draw(st.booleans())
    x = ["epoch", "step"] if lightning else ["epoch"]
    names = draw(
        st.lists(
            st.sampled_from(
                ["loss", "val_loss", "accuracy", "val_accuracy", "lr", "train_loss_step", "Epoch", "loss"]
            ),
            min_size=1,
            max_size=4,
        )
    )
    odd_in_200 = draw(st.integers(0, 40)) if wild else draw(st.sampled_from([0, 0, 0, 2]))

    def cell() -> str:
        return draw(ODD_CELLS if draw(st.integers(0, 199)) < odd_in_200 else NUMBER_CELLS)

    # Keras' CSVLogger(separator=...) and pandas' to_csv(sep=...); some scripts write a title line.
    sep = draw(st.sampled_from([",", ",", ",", ";", "\t"]))
    rows = [sep.join(x + names)]
    if draw(st.integers(0, 5)) == 0:
        rows.insert(0, draw(st.sampled_from(["model_history_log", "run 3", "7"])))
    for i in range(draw(st.integers(0, 30))):
        cells = [str(i // 10), str(i)] if lightning else [str(i)]
        if draw(st.integers(0, 199)) < odd_in_200:
            cells[0] = cell()
        rows.append(sep.join(cells + [cell() for _ in names]))
    ending = draw(st.sampled_from(["\n", "\r\n", "\r"] if wild else ["\n", "\r\n"]))
    text = ending.join(rows) + draw(st.sampled_from([ending, ""]))
    most = 3 if wild else draw(st.sampled_from([0, 0, 1]))
    return ("metrics.csv" if lightning else "log.csv"), draw(mutated(text.encode(), most))


# --- properties -------------------------------------------------------------------------------


def jsonl_contract(data: bytes) -> None:
    validate_file("history.jsonl", data)


def jsonl_arrow_is_json(data: bytes) -> None:
    whole = data[: data.rfind(b"\n") + 1]
    if not whole:
        return
    fast = parse_lines_arrow(whole)
    try:
        exact = parse_lines_json(whole)
    except LineError:
        assert fast is None, "pyarrow accepted a block json refuses"
        return
    if fast is None:
        return
    assert (fast.records, fast.lines) == (exact.records, exact.lines)
    assert [g[:2] for g in fast.groups] == [g[:2] for g in exact.groups]
    for (_, _, sa, va), (_, _, sb, vb) in zip(fast.groups, exact.groups, strict=True):
        np.testing.assert_array_equal(sa, sb)
        np.testing.assert_array_equal(va, vb)


def csv_contract(file: tuple[str, bytes]) -> None:
    name, data = file
    validate_file(name, data)


def csv_arrow_is_csv_module(file: tuple[str, bytes]) -> None:
    name, data = file
    fmt = "lightning_csv" if name == "metrics.csv" else "keras_csv"

    def outcome(read) -> tuple:
        try:
            history = read()
        except HistoryError as exc:
            return ("error", str(exc))
        return (
            "read",
            history.records,
            history.notes,
            [(n, s.steps.tolist(), s.values.tobytes()) for n, s in history.series.items()],
        )

    try:
        fast = outcome(lambda: read_csv_arrow(iter([data]), "log", fmt))
    except _Irregular:
        return
    assert fast == outcome(lambda: read_csv_exact(iter([data]), "log", fmt))


def binary_contract(data: bytes, name: str, fmt: tuple) -> None:
    outcome = validate_file(name, data, *fmt)
    assert outcome.exit_code == 2 or data.strip()


def _event_file() -> bytes:
    return next((FIXTURES / "nan" / "tb_torch").iterdir()).read_bytes()


def tensorboard_contract(data: bytes) -> None:
    validate_file("logs/events.out.tfevents.1.host", data)


def trainer_state_contract(data: bytes) -> None:
    validate_file("trainer_state.json", data)


@st.composite
def trainer_states(draw) -> bytes:
    """A trainer_state.json whose log entries hold hostile values (then byte accidents)."""
    entries = draw(
        st.lists(
            st.dictionaries(st.sampled_from(["loss", "eval_loss", "step", "epoch", "eval_f1"]), VALUES),
            max_size=30,
        )
    )
    nested = draw(st.sampled_from([{"log_history": entries}, {"log_history": {"0": entries}}, entries, {}]))
    return draw(mutated(json.dumps(nested, indent=2).encode(), most=2))


def results_csv_contract(data: bytes) -> None:
    validate_file("runs/detect/train/results.csv", data)


MLFLOW_NAMES = st.one_of(
    st.sampled_from(["loss", "val_loss", "accuracy", "val_accuracy", "train/loss", "epoch", "eval_runtime"]),
    st.text(
        st.characters(blacklist_characters="\0/", blacklist_categories=("Cs",)), min_size=1, max_size=12
    ).filter(lambda name: name not in (".", "..") and len(name.encode()) < 200),
)
MLFLOW_STEPS = st.one_of(
    st.integers(0, 10**6).map(str),
    st.sampled_from(["0", "-1", "1.5", "", "x", str(2**63), "1_0", "+3"]),
)


@st.composite
def mlflow_runs(draw) -> dict[str, bytes]:
    """An MLflow run's metric files (name -> bytes): mostly well-formed ``<ts> <value> <step>``
    lines, some odd fields, then byte accidents; or a real run's files, mutated."""
    if draw(st.integers(0, 3)) == 0:
        files = {
            p.relative_to(MLFLOW_RUN / "metrics").as_posix(): p.read_bytes()
            for p in (MLFLOW_RUN / "metrics").iterdir()
        }
        victim = draw(st.sampled_from(sorted(files)))
        files[victim] = draw(mutated(files[victim]))
        return files
    odd_in_50 = draw(st.integers(0, 10))
    files = {}
    for name in draw(st.lists(MLFLOW_NAMES, max_size=4, unique_by=str.lower)):
        rows = []
        for i in range(draw(st.integers(0, 30))):
            odd = draw(st.integers(0, 49)) < odd_in_50
            value = draw(ODD_CELLS if odd and draw(st.booleans()) else NUMBER_CELLS)
            step = draw(MLFLOW_STEPS) if odd else str(i)
            fields = [str(1700000000000 + i), value, step][: draw(st.sampled_from([3, 3, 3, 2]))]
            rows.append(" ".join(fields))
        text = "\n".join(rows) + draw(st.sampled_from(["\n", "\n", ""]))
        files[name] = draw(mutated(text.encode(), draw(st.sampled_from([0, 0, 1, 2]))))
    return files


def mlflow_contract(files: dict[str, bytes], given: str, fmt: tuple) -> None:
    with tempfile.TemporaryDirectory(prefix="tg-fuzz-") as tmp:
        run = Path(tmp) / "mlruns" / "0" / "0123abcd"
        (run / "metrics").mkdir(parents=True)
        (run / "meta.yaml").write_text("run_id: 0123abcd\nexperiment_id: '0'\n")
        for name, data in files.items():
            path = run / "metrics" / name
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
            except OSError:  # a name this file system refuses (or a file where a folder must be)
                continue
        target = {"run": run, "metrics": run / "metrics", "mlruns": Path(tmp) / "mlruns"}[given]
        outcome = run_cli("validate", str(target), *fmt)
    assert_contract(outcome, max_seconds=10)
    assert SAFETY_NET not in outcome.output, outcome.output[:3000]


def bounded_memory(data: bytes) -> None:
    with tempfile.TemporaryDirectory(prefix="tg-fuzz-") as tmp:
        path = Path(tmp) / "history.jsonl"
        path.write_bytes(data)
        result, peak = peak_memory(lambda: load_history(path, "jsonl"))
    assert isinstance(result, HistoryError) or hasattr(result, "series"), repr(result)
    assert peak < MEMORY_CAP, f"{peak / 2**20:.0f} MiB for {len(data)} bytes"


@st.composite
def dvclive_runs(draw) -> dict[str, bytes]:
    """A DVCLive run's metric files (step<TAB>value, an older timestamp column), mutated."""
    files = {}
    for name in draw(
        st.lists(
            st.sampled_from(["train/loss", "eval/loss", "epoch", "train/acc", "x"]),
            min_size=1,
            max_size=4,
            unique=True,
        )
    ):
        old = draw(st.booleans())
        rows = [("timestamp\t" if old else "") + "step\t" + name.rsplit("/", 1)[-1]]
        for i in range(draw(st.integers(0, 25))):
            rows.append(("1700000000000\t" if old else "") + f"{i}\t{draw(NUMBER_CELLS)}")
        text = "\n".join(rows) + "\n"
        files[name] = draw(mutated(text.encode(), draw(st.sampled_from([0, 1, 2]))))
    return files


def dvclive_contract(files: dict[str, bytes]) -> None:
    with tempfile.TemporaryDirectory(prefix="tg-fuzz-") as tmp:
        for name, data in files.items():
            path = Path(tmp) / "dvclive" / "plots" / "metrics" / f"{name}.tsv"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        outcome = run_cli("validate", tmp)
    assert_contract(outcome, max_seconds=10)
    assert SAFETY_NET not in outcome.output, outcome.output[:3000]


PROPERTIES = {
    # name: (property, strategies, examples in the default suite)
    "jsonl_keeps_the_contract": (jsonl_contract, {"data": st.booleans().flatmap(jsonl_files)}, 40),
    "arrow_reads_jsonl_as_json_does": (jsonl_arrow_is_json, {"data": jsonl_files(wild=False)}, 80),
    "csv_keeps_the_contract": (csv_contract, {"file": st.booleans().flatmap(csv_files)}, 40),
    "arrow_reads_csv_as_the_csv_module_does": (csv_arrow_is_csv_module, {"file": csv_files(wild=False)}, 80),
    "binary_keeps_the_contract": (
        binary_contract,
        {
            "data": st.binary(max_size=4000),
            "name": st.sampled_from(
                ["history.jsonl", "log.csv", "metrics.csv", "history", "h.txt", "trainer_state.json"]
            ),
            "fmt": st.sampled_from(
                [
                    (),
                    ("--format", "jsonl"),
                    ("--format", "keras_csv"),
                    ("--format", "lightning_csv"),
                    ("--format", "hf_trainer_state"),
                    ("--format", "dvclive"),
                ]
            ),
        },
        30,
    ),
    "tensorboard_event_files_keep_the_contract": (
        tensorboard_contract,
        {"data": st.builds(_event_file).flatmap(mutated)},
        25,
    ),
    "trainer_state_json_keeps_the_contract": (
        trainer_state_contract,
        {"data": st.one_of(st.just(TRAINER_STATE.read_bytes()).flatmap(mutated), trainer_states())},
        25,
    ),
    "results_csv_keeps_the_contract": (
        results_csv_contract,
        {"data": st.just(RESULTS_CSV.read_bytes()).flatmap(mutated)},
        20,
    ),
    "dvclive_runs_keep_the_contract": (dvclive_contract, {"files": dvclive_runs()}, 25),
    "mlflow_runs_keep_the_contract": (
        mlflow_contract,
        {
            "files": mlflow_runs(),
            "given": st.sampled_from(["run", "metrics", "mlruns"]),
            "fmt": st.sampled_from([(), (), ("--format", "mlflow")]),
        },
        30,
    ),
    "memory_stays_bounded_on_repeated_garbage": (
        bounded_memory,
        {"data": st.binary(min_size=1, max_size=64).map(lambda b: b * 50_000)},
        10,
    ),
}
LONG_FACTOR = 25

for _name, (_check, _strategies, _examples) in PROPERTIES.items():
    globals()[f"test_{_name}"] = fuzz(_examples)(given(**_strategies)(_check))
    globals()[f"test_{_name}_long"] = pytest.mark.long(
        fuzz(_examples * LONG_FACTOR)(given(**_strategies)(_check))
    )


def test_nan_and_infinity_survive_the_round_trip() -> None:
    values = [1.0, math.nan, math.inf, -math.inf]
    text = "".join(json.dumps({"step": i, "metrics": {"loss": v}}) + "\n" for i, v in enumerate(values))
    outcome = validate_file("history.jsonl", text.encode())
    assert outcome.exit_code in (0, 1) and "non_finite" in outcome.output
