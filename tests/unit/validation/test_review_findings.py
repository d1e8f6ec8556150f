"""Bugs a review found in the CSV layout, DVCLive, MLflow and detection changes (2507c03..7436713),
each fixed; these tests pin the fixes. The inputs are minimal synthetic reproductions written into
``tmp_path``, not stand-ins for real files.
"""

from __future__ import annotations

import pytest

from tests.fuzz.contract import run_cli
from trainguard.errors import HistoryError
from trainguard.validation import load_history
from trainguard.validation.csv_layout import Layout, sniff
from trainguard.validation.csv_reader import _Irregular, read_csv_arrow, read_csv_exact


# A one-field line above a row of numbers was taken for a title; the first data row became the
# header (columns named '0', '92').
def test_a_one_column_history_with_a_decimal_comma_is_not_read_as_a_title_and_numeric_header(
    tmp_path,
) -> None:
    # A one-column loss export in a German locale: 'loss' then 0,92 0,71 ...
    path = tmp_path / "loss.csv"
    path.write_text("loss\n" + "".join(f"0,{v}\n" for v in (92, 71, 64, 58, 55, 52, 50, 49, 48)))
    with pytest.raises(HistoryError, match="decimal comma"):
        sniff(path.read_text().splitlines()[:3])
    for args in ((), ("--format", "keras_csv")):
        outcome = run_cli("validate", *args, path)
        assert outcome.exit_code == 2 and "'0,92' is a number with a decimal comma" in outcome.stderr
        assert "0, 92" not in outcome.output  # was: "The history has: 0, 92"


# A title above a header-less CSV made its first row of numbers the header.
def test_a_first_row_of_numbers_is_never_a_header() -> None:
    layout = sniff(["training history", "0,1.000,1.200", "1,0.500,0.600"])
    assert layout.title is None


# The pyarrow path kept a data row equal to a numeric header that the csv path skipped.
def test_arrow_and_csv_paths_agree_on_a_row_that_repeats_a_numeric_header() -> None:
    data = b"val_loss\n0,5\n0,5\n"
    try:
        arrow = read_csv_arrow(iter([data]), "f", "keras_csv", len(data))
    except _Irregular:
        return
    try:
        exact = read_csv_exact(iter([data]), "f", "keras_csv")
    except HistoryError as exc:
        pytest.fail(f"arrow read {sorted(arrow.series)}, the csv module refused: {exc}")
    assert sorted(arrow.series) == sorted(exact.series)


# bound(text, limit <= 40) kept the whole text, so the extra-cell note was unbounded.
def test_the_extra_cell_note_is_bounded(tmp_path) -> None:
    assert sum(map(len, Layout(extra=2, extra_after="v" * 100_000).notes())) < 1000
    name = "val_loss_" + "y" * 100_000
    rows = "".join(f"{i},{1 / (i + 1)},{1 / (i + 1)},\n" for i in range(12))
    path = tmp_path / "h.csv"
    path.write_text(f"epoch,loss,{name}\n{rows}")
    outcome = run_cli("validate", "--format", "keras_csv", "--train-metric", "loss", path)
    assert len(outcome.output) < 20_000


# A Git LFS pointer in a DVCLive run was reported as a CSV without 'step' that Lightning writes.
def test_an_lfs_pointer_in_a_dvclive_run_is_named_as_one(tmp_path) -> None:
    path = tmp_path / "dvclive" / "plots" / "metrics" / "loss.tsv"
    path.parent.mkdir(parents=True)
    path.write_text(
        "version https://git-lfs.github.com/spec/v1\n"
        "oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 12345\n"
    )
    with pytest.raises(HistoryError) as caught:
        load_history(tmp_path)
    assert "Lightning" not in str(caught.value)
    assert "LFS" in str(caught.value)


# One repeat with the same value hid the 'out of step order' note.
def test_out_of_order_points_are_noted_even_with_an_equal_repeat() -> None:
    data = b"step,loss\n5,0.9\n0,1.0\n1,0.8\n1,0.8\n2,0.7\n"
    history = read_csv_exact(iter([data]), "f", "lightning_csv")
    assert any("order" in note for note in history.notes), history.notes


# The extra empty cell was the first row's last empty one, which a sparse row gets wrong.
def test_the_extra_cell_is_the_one_empty_in_both_first_rows() -> None:
    data = b"epoch,loss,val_loss,lr\n0,0.5,,,0.1\n1,0.4,,0.5,0.1\n2,0.3,,0.45,0.1\n"
    history = read_csv_exact(iter([data]), "f", "keras_csv")
    assert history.series["val_loss"].values.tolist() == [0.5, 0.45]
    assert history.series["lr"].values.tolist() == [0.1, 0.1, 0.1]


# A last line wider than the header was called truncated.
def test_a_wider_last_line_is_not_called_truncated() -> None:
    data = b"epoch,loss\n0,0.5\n1,0.4\n2,0.3,9"
    for read in (read_csv_exact, read_csv_arrow):
        history = read(iter([data]), "f", "keras_csv")
        assert "skipped the last line (line 4: 3 cells where the header has 2)" in history.notes
