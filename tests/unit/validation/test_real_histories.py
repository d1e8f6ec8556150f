"""``validate`` on 231 histories that real runs wrote (issue 29), read with no flags.

The corpus (tests/fixtures/real_histories, README.md there) holds Lightning, Keras, Hugging Face
and Ultralytics logs and MLflow runs (a run's directory) copied from public repositories, each
labelled from its numbers, split by repository into ``dev`` (the rules were tuned on it) and
``test`` (only measured). ``pytest -s`` prints the figures per part and per writer. The known
misses are listed with the reason each is not fixed; anything else the verdict gets wrong fails
the test, and so does any internal error.
"""

from __future__ import annotations

import re
from collections import Counter

import pytest

from tests.history_corpus import CORPUS_DIR, KINDS, SPLITS, format_score, load, score, split_of
from trainguard.validation import validate

# file -> why the verdict is still wrong (figures in the lead's report, issue 29)
KNOWN_WRONG = {
    # test: val_loss 0.29 at epoch 18, 0.30-0.46 after it: the level since its best (the median
    # of the 10 evaluations after the lowest 3-evaluation median, 0.33) is 2.9 standard errors
    # above it, but gives back 9% of what validation gained from its first evaluation (1.33),
    # under overfit_lasting_share (10%); one evaluation's noise bar (3x) holds it back too.
    "Aitzaz-Saleem__Detection-of-Tomato-Leaf-Diseases-Using-CNN/training_log.csv": "test",
    # dev: val_loss 0.078 at row 4, then 0.089-0.118 for the last 11 rows while training -> 0:
    # the level since its best is 14 standard errors above it but gives back 4.7% of what
    # validation gained (0.74 -> 0.08), under overfit_lasting_share (10%). A share that catches
    # it (0.04-0.047) is within 20% of the healthy small_val scenario's 0.039 (the recorded runs,
    # tests/fixtures/histories): no margin, so the threshold stays (README.md there, fifth round).
    "Navroz-Singh__arrythmia_model/models/training_history.csv": "dev",
    # dev: a title line ("model_history_log") above ';'-separated Keras columns, read since the
    # readers learnt both (validation/csv_layout.py); it passes: val_loss ends 7% above its smoothed
    # best (0.144 at epoch 6), under overfit_min_rise (10%), and the level since its best gives back
    # ~7% of the gain, under overfit_lasting_share (10%): the same mild, lasting kind as the two above.
    "ManuMollon261297__Speech-Digit-Detector/model_history_log.csv": "dev",
    # dev (an MLflow run): avg_val_loss 2.031 -> 1.983 at epoch 9 (2.3%), then 1.9862 to 5 digits
    # for 20 epochs, while avg_train_losses settles at 3.328 after epoch 1. The training series is
    # named with the plural 'losses', which no rule reads as a loss ('avg_losses'; its direction
    # is unknown), so only validation is judged: no_learning and plateau need a training curve
    # ("no training series"), and validation alone neither diverges nor rises. Naming, not the
    # MLflow reader: --train-metric avg_train_losses is how to judge it today.
    "SiddhantDeshmukh__solarWind/scripts/mlruns/0/1a7d357a394349ae91f484d38ff84fe7": "dev",
}


@pytest.fixture(scope="module")
def scored():
    return {part: score(load(part), validate) for part in SPLITS}


def test_the_corpus_is_real_labelled_and_split() -> None:
    entries = load()
    assert len(entries) >= 150
    assert {e.writer for e in entries} == {
        "lightning_csv",
        "keras_csv",
        "hf_trainer_state",
        "ultralytics",
        "mlflow",
    }
    assert len({e.repo for e in entries}) >= 60
    for e in entries:
        # An MLflow run is its directory (metrics/ and meta.yaml), linked as a tree.
        run = e.writer == "mlflow"
        assert (e.path / "metrics").is_dir() and (e.path / "meta.yaml").is_file() if run else e.path.is_file()
        assert re.fullmatch(r"[0-9a-f]{40}", e.commit), e.file
        kind = "tree" if run else "blob"
        assert e.source == f"https://github.com/{e.repo}/{kind}/{e.commit}/{e.file.split('/', 1)[1]}"
        assert e.kind in KINDS and len(e.why) > 10, e.file
    parts = Counter(split_of(e.repo) for e in entries)
    assert parts["dev"] and parts["test"]
    runs = [e.file for e in entries if e.writer == "mlflow"]
    listed = set()
    for p in (CORPUS_DIR / "files").rglob("*"):
        if p.is_file():
            name = p.relative_to(CORPUS_DIR / "files").as_posix()
            listed.add(next((run for run in runs if name.startswith(run + "/")), name))
    assert listed == {e.file for e in entries}  # no file without its source and label


def test_figures_per_part_and_writer(scored) -> None:
    text = "\n".join(format_score(scored[part], part) for part in SPLITS)
    print("\n" + text)
    for part in SPLITS:
        assert scored[part].crashed == [], text  # an internal error is a bug, never an answer
        wrong = {o.entry.file for o in scored[part].outcomes if not o.ok}
        assert wrong == {f for f, p in KNOWN_WRONG.items() if p == part}, text


def test_every_history_a_writer_wrote_is_read_without_flags(scored) -> None:
    # Refusing a history is right only where the label says it cannot be judged.
    for part in SPLITS:
        for o in scored[part].outcomes:
            if o.status == "refused" and o.entry.file not in KNOWN_WRONG:
                assert o.entry.kind in ("not judged", "unclear"), (o.entry.file, o.detail)
