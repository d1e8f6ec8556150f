"""DVCLive's metric directory (``dvclive/plots/metrics/<name>.tsv``): read with no flags.

The real runs (tests/fixtures/real_histories, writer ``dvclive``) are judged with the rest of
that corpus; these tests pin what a user sees on the layouts DVCLive writes and on bad input.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fuzz.contract import run_cli
from trainguard.errors import HistoryError
from trainguard.validation import load_history, select_series


def _metric(root: Path, name: str, header: str, rows: list[str]) -> None:
    path = root / "dvclive" / "plots" / "metrics" / f"{name}.tsv"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(header + "\n" + "".join(row + "\n" for row in rows))


def _run(root: Path, *, old: bool = False, epochs: int = 12) -> Path:
    """A run as DVCLive's Keras callback writes it: train/ and eval/ losses, an epoch counter."""
    cols = "timestamp\tstep\t" if old else "step\t"
    stamp = lambda i: f"{1700000000000 + i}\t" if old else ""  # noqa: E731
    _metric(root, "train/loss", cols + "loss", [f"{stamp(i)}{i}\t{1.0 / (i + 1):.4f}" for i in range(epochs)])
    _metric(
        root,
        "eval/loss",
        cols + "loss",
        [f"{stamp(i)}{i}\t{1.1 / (i + 1) + 0.01:.4f}" for i in range(epochs)],
    )
    _metric(root, "epoch", cols + "epoch", [f"{stamp(i)}{i}\t{i}" for i in range(epochs)])
    return root


@pytest.mark.parametrize("old", [False, True], ids=["dvclive>=2", "dvclive<2 (timestamp column)"])
def test_a_run_is_read_from_its_project_the_run_or_its_metrics_directory(tmp_path, old: bool) -> None:
    project = _run(tmp_path, old=old)
    for given in (project, project / "dvclive", project / "dvclive" / "plots" / "metrics"):
        history = load_history(given)
        assert history.format == "dvclive"
        assert sorted(history.series) == ["eval/loss", "train/loss"]  # no timestamp, no epoch series
        train, val = select_series(history)
        assert (train.name, train.split, val.name, val.split) == ("train/loss", "train", "eval/loss", "val")
        assert val.steps.tolist() == list(range(12))
        assert any("skipped 'epoch'" in note for note in history.notes)


def test_the_cli_judges_a_dvclive_run_with_no_flags(tmp_path) -> None:
    outcome = run_cli("validate", str(_run(tmp_path)))
    assert outcome.exit_code == 0, outcome.output
    assert "(dvclive, 12 records)" in outcome.stdout and "`eval/loss`" in outcome.stdout


def test_several_runs_are_refused_naming_them(tmp_path) -> None:
    _run(tmp_path / "exp-a")
    _run(tmp_path / "exp-b")
    with pytest.raises(
        HistoryError, match=r"2 DVCLive runs \('exp-a/dvclive/plots/metrics', 'exp-b/.*give the directory"
    ):
        load_history(tmp_path)


@pytest.mark.parametrize(
    ("header", "rows", "said"),
    [
        (
            "step\tloss",
            ["0\t1.0", "1\toops"],
            r"train/loss.tsv: line 3, column 'loss': 'oops' is not a number",
        ),
        ("step\tloss", ["zero\t1.0"], r"train/loss.tsv: line 2: the step cell 'zero' is not a number"),
        ("loss", ["1.0"], r"train/loss.tsv: no 'step' column"),
    ],
)
def test_a_bad_metric_file_is_one_clear_message_naming_it(
    tmp_path, header: str, rows: list[str], said: str
) -> None:
    _metric(tmp_path, "train/loss", header, rows)
    with pytest.raises(HistoryError, match=said):
        load_history(tmp_path)
    outcome = run_cli("validate", str(tmp_path))
    assert outcome.exit_code == 2 and outcome.stderr.count("\n") <= 1, outcome.output


def test_only_counters_is_no_history(tmp_path) -> None:
    _metric(tmp_path, "epoch", "step\tepoch", ["0\t0", "1\t1"])
    with pytest.raises(HistoryError, match="DVCLive metric files but no metric in them"):
        load_history(tmp_path)


def test_format_dvclive_names_a_directory(tmp_path) -> None:
    _run(tmp_path)
    file = tmp_path / "dvclive" / "plots" / "metrics" / "train" / "loss.tsv"
    with pytest.raises(HistoryError, match="reads a DVCLive run's directory"):
        load_history(file, "dvclive")
    assert load_history(file).series["loss"].values.size == 12  # one metric's file alone: a TSV


REAL = Path(__file__).resolve().parents[2] / "fixtures" / "real_histories" / "files"


@pytest.mark.parametrize(
    ("run", "train", "val", "points"),
    [
        ("maltempi__dvc-experiments", "loss", "val_loss", 5),  # 1.x: dvclive/scalars/, timestamps
        ("jadeitgithub__example-dvc-experiments", "loss", "val_loss", 10),  # 0.x: dvclive/<name>.tsv
        ("m-loay__fashion-mnist-mlops", "loss/train", "loss/val", 10),  # the split last in the path
        ("michaelvay__lightning-hydra-template", "train/loss", "val/loss", 10),  # Lightning's logger
    ],
)
def test_real_runs_of_every_layout_are_read_as_a_user_reads_them(
    run: str, train: str, val: str, points: int
) -> None:
    history = load_history(REAL / run)
    t, v = select_series(history)
    assert (t.name, t.split, v.name, v.split) == (train, "train", val, "val")
    assert v.values.size == points and "timestamp" not in " ".join(history.series)


def test_validate_s_help_names_every_format() -> None:
    from trainguard.validation.formats import FORMATS

    outcome = run_cli("validate", "--help")
    text = " ".join(outcome.stdout.split())
    assert all(fmt in text for fmt in FORMATS), (FORMATS, text[:2000])
