"""``validate`` on the histories that real runs wrote (issue 29), read with no flags.

The corpus (tests/fixtures/real_histories, README.md there) holds Lightning, Keras, Flair, Hugging
Face and Ultralytics logs and DVCLive and MLflow runs (a run's directory) copied from public
repositories, each labelled from its numbers, split by repository into ``dev`` (the rules were
tuned on it) and ``test`` (only measured). ``pytest -s`` prints the figures per part and per writer. The known
misses are listed with the reason each is not fixed; anything else the verdict gets wrong fails
the test, and so does any internal error.
"""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from tests.history_corpus import CORPUS_DIR, KINDS, SPLITS, format_score, load, score, split_of
from trainguard.validation import validate

# file -> why the verdict is still wrong (figures in the lead's report, issue 29)
KNOWN_WRONG = {
    # dev: val_loss 0.078 at row 4, then 0.089-0.118 for the last 11 rows while training -> 0:
    # the level since its best is 14 standard errors above it but gives back 4.7% of what
    # validation gained (0.74 -> 0.08), under overfit_lasting_share (7.5%). A share that catches
    # it (0.047 or less) fails the healthy ShadmimSifat run (5.2%) (README.md there, goal 5).
    "Navroz-Singh__arrythmia_model/models/training_history.csv": "dev",
    # dev: a title line ("model_history_log") above ';'-separated Keras columns, read since the
    # readers learnt both (validation/csv_layout.py); it passes: val_loss ends 7% above its smoothed
    # best (0.144 at epoch 6), under overfit_min_rise (10%), and the level since its best gives back
    # ~4% of the gain by the rule's own measure, under overfit_lasting_share: the same mild kind.
    "ManuMollon261297__Speech-Digit-Detector/model_history_log.csv": "dev",
    # test (DVCLive): val/loss -9.4% by step 5, then flat for 19 epochs, train likewise: the
    # plateau rule sees train/loss's best smoothed level 22% below its start (1.142), more than
    # plateau_min_improvement, and no_learning sees validation 9% better than its first; no finding.
    # Held out, so no rule was moved for it.
    "alice3e__inaturalist_animal_image_classification/dvclive": "test",
    # dev: val_loss one low of 0.110 at epoch 76 of 100, its level 0.153 over epochs 60-76 and 0.19
    # over the last 23 (the last ten 0.206) while training falls 0.234 -> 0.126: the level since the
    # lowest 3-evaluation median is 7.1 standard errors above it but gives back 3.0% of what
    # validation gained (1.60 -> 0.14), under overfit_lasting_share (7.5%); only a share of 0.02
    # catches it, where the healthy small_val scenario fails (3.9%); any share up to 0.05 also
    # fails the healthy ShadmimSifat run (5.2%) (README.md there, sixth round).
    "prashant3110__yoga-pose-classification/training_logs.csv": "dev",
    # dev: labelled no fail (a 90-sample set), called instability: val_loss swings 0.040-0.243 over
    # the last 20 epochs (7 swings of 25% of its level 0.086) while validation ends giving back 11%
    # of its gain, under instability_near_best (25%); the rule still fires because training is not
    # calm either (train_loss 0.018 -> 0.28 -> 0.03 -> 0.11): a verdict with a case, the label kept.
    "AdityaT-19__ISL-LSTM/logs/training_log.csv": "dev",
    # dev (an MLflow run): avg_val_loss 2.031 -> 1.983 at epoch 9 (2.3%), then 1.9862 to 5 digits
    # for 20 epochs, while avg_train_losses falls 4.88 -> 3.51 in its first epoch and converges to
    # 3.3283. Read as a loss since 'losses' names one (validation/history.py), the pair is judged:
    # validation ends 2.3% better than its first, over no_learning_tolerance (2%), and training's
    # 32% first-epoch fall is no plateau: a run that learnt almost nothing, passed.
    "SiddhantDeshmukh__solarWind/scripts/mlruns/0/1a7d357a394349ae91f484d38ff84fe7": "dev",
    # dev (Flair loss.tsv, tabs): DEV_LOSS 0.674 at epoch 1, 0.956 at 2, best 0.625 at 8 (7% under
    # the first), 0.69-0.82 over the last 7 (median 0.724) while TRAIN_LOSS falls 0.86 -> 0.28, and
    # DEV_F1 never beats its first 0.7667 (ends 0.7187). It passes: the best is 7.3% under the
    # first, more than no_learning_tolerance (2%); in 3-evaluation medians validation improves
    # (0.811 over epochs 1-3 -> 0.689 over 7-9) and ends 5% above that (0.724), under
    # overfit_min_rise (10%), and that smoothed best lies above the first evaluation, so there is
    # no gain for a lasting rise to give back. A label from F1, which the loss rules do not read.
    "jannenev__compare-nlp-models/loss.tsv": "dev",
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
        "dvclive",
        "mlflow",
    }
    assert len({e.repo for e in entries}) >= 60
    for e in entries:
        # A file, or a run's directory (DVCLive: one file per metric; MLflow: metrics/ and
        # meta.yaml), each copied from one commit and linked as a tree.
        run = e.path.is_dir()
        if e.writer == "mlflow":
            assert (e.path / "metrics").is_dir() and (e.path / "meta.yaml").is_file(), e.file
        assert run or e.path.is_file(), e.file
        assert re.fullmatch(r"[0-9a-f]{40}", e.commit), e.file
        kind = "tree" if run else "blob"
        assert e.source == f"https://github.com/{e.repo}/{kind}/{e.commit}/{e.file.split('/', 1)[1]}"
        assert e.kind in KINDS and len(e.why) > 10, e.file
    parts = Counter(split_of(e.repo) for e in entries)
    assert parts["dev"] and parts["test"]
    listed = {
        p.relative_to(CORPUS_DIR / "files").as_posix()
        for p in (CORPUS_DIR / "files").rglob("*")
        if p.is_file()
    }
    runs = {e.file for e in entries if e.path.is_dir()}
    owners = {f if f in runs else next((r for r in runs if f.startswith(r + "/")), f) for f in listed}
    assert owners == {e.file for e in entries}  # no file without its source and label


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


def test_the_tensorboard_logs_measured_outside_are_recorded_with_source_label_and_verdict() -> None:
    # Event files are binary and came from repository snapshots, which may not be committed; what
    # was measured on them is (README.md there, the TensorBoard section).
    logs = json.loads((CORPUS_DIR / "tensorboard.json").read_text(encoding="utf-8"))
    assert len(logs) >= 15 and len({e["repo"] for e in logs}) >= 8
    for e in logs:
        assert re.fullmatch(r"[0-9a-f]{40}", e["commit"]), e["repo"]
        # the run's directory, or the snapshot's root where the event file lies at the top
        assert e["source"].startswith(f"https://github.com/{e['repo']}/tree/{e['commit']}"), e["source"]
        assert e["split"] == split_of(e["repo"])
        assert e["expect"].split(":")[0].strip() in KINDS and len(e["why"]) > 10
        assert e["verdict"]["status"] and "right" in e["verdict"]
    assert all(e["verdict"]["right"] for e in logs)  # as measured; wrong ones would be listed
