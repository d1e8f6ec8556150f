"""The in-flight guard: a :class:`~trainguard.launch.base.Watcher` that follows a running job's
history and asks the backend to stop the job on a failing verdict.

Each ``poll`` (the backend calls it between its own polls of the job):

1. reads what the history gained since the last poll — our JSONL at ``TRAINGUARD_HISTORY`` when
   it exists, else the TensorBoard event files under ``AIP_TENSORBOARD_LOG_DIR`` — at O(new bytes)
   (:mod:`trainguard.guard.follow`);
2. judges the history so far with :func:`trainguard.validation.validate`, the rules that judge a
   finished run (:mod:`trainguard.guard.judge`): at once when a new point is NaN/Inf, otherwise
   as often as a CPU budget allows: a judgement that took longer than ``free_judge_s`` waits
   until it is ``cpu_share`` of the time since it started (10 %: one that took 2 s waits 18 s),
   so a 10-million-point history is judged every few polls while a small one is judged at every
   poll;
3. returns a :class:`~trainguard.launch.base.Stop` with the class, the evidence, the remedy and
   the accelerator-hours saved (:mod:`trainguard.guard.savings`) when the mode's table says so;
4. for a RUNNING job whose history has stopped growing past its limit
   (:mod:`trainguard.guard.hang`: ``max(k × median interval, floor)`` or ``--hang-after``), a Stop
   of class ``hang`` with the hours that waiting for the job's timeout would have burned;
5. and, with a budget, a Stop of class ``budget`` once what the job has spent (time RUNNING × the
   price of what it runs, :mod:`trainguard.guard.spend`) reaches it — before anything else, and
   whatever the mode, even when the history cannot be read: money does not wait for a curve.

The guard fails open: anything it cannot read or judge (garbage in the history, an error of its
own) is said once, loudly, with the reason, and the job runs on unguarded. Storage that does not
answer is retried at the next polls and only given up after ``max_failed_reads`` in a row (a
poll that could not read says nothing about silence). A job that writes no history is never
called hung; it gets one line from :meth:`finish`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

from trainguard.choices import GuardMode, Mode, parse
from trainguard.errors import HistoryError
from trainguard.guard.book import Added, SeriesBook
from trainguard.guard.events import EventDirTail
from trainguard.guard.follow import Follower, FollowError, follower_for
from trainguard.guard.hang import HangDetector, HangFinding, HangPolicy
from trainguard.guard.jsonl import JsonlTail
from trainguard.guard.judge import Judgement, judge
from trainguard.guard.savings import JobCost, estimate
from trainguard.guard.spend import Meter
from trainguard.launch.base import RunningJob, Stop
from trainguard.redaction import bound, redact
from trainguard.save_fit import SaveFit, notice_for, recorded_notice
from trainguard.validation.history import History
from trainguard.validation.rules import RuleConfig
from trainguard.validation.verdict import Verdict

if TYPE_CHECKING:
    from trainguard.spec import JobSpec

__all__ = ["HistoryGuard", "WAITING_STATES"]

# States in which a job has not started its containers: nothing to read yet.
WAITING_STATES = frozenset({"QUEUED", "PENDING"})
_EVIDENCE_CHARS = 600


class HistoryGuard:
    """Follows one job's history while it runs and stops the job on a failing verdict.

    Args:
        mode: ``off``, ``nonfinite`` (stop on NaN/Inf only) or ``fail`` (also divergence and
            instability; and an early, successful stop on a confirmed overfit).
        cost: the job's accelerators and timeout, for the hours saved (none: nothing counted).
        thresholds: rule thresholds for ``validate`` (``RuleConfig`` names).
        train_metric, val_metric, metric_mode: as for ``validate``.
        stream: where its lines go (None: silent).
        storage_client: a ``google.cloud.storage.Client`` for ``gs://`` (made when needed).
        cpu_share: the share of wall time judging may take (see the module docstring).
        free_judge_s: a judgement faster than this does not delay the next one.
        max_failed_reads: consecutive unreadable polls before it stops guarding.
        hang: when a silent history is a hang (:class:`~trainguard.guard.hang.HangPolicy`;
            None: the automatic limit).
        spend: the job's :class:`~trainguard.guard.spend.Meter` (its price and the budget):
            stops the job at the budget, and prices what a stop saved (None: not priced).
        clock: monotonic seconds (tests).
        preemption_notice_s: the seconds of notice a preemption gives the job (None: unknown);
            ``for_spec`` reads it from the spec (:func:`~trainguard.save_fit.notice_for`); a
            notice the job's save records keep (the one its runtime was given) comes first.

    Raises:
        ConfigError: a bad mode, threshold or metric mode (before any job starts).
    """

    def __init__(
        self,
        mode: GuardMode | str = GuardMode.FAIL,
        *,
        cost: JobCost | None = None,
        thresholds: dict | None = None,
        train_metric: str | None = None,
        val_metric: str | None = None,
        metric_mode: str = "min",
        stream: TextIO | None = None,
        storage_client: Any = None,
        cpu_share: float = 0.1,
        free_judge_s: float = 0.1,
        max_failed_reads: int = 30,
        hang: HangPolicy | None = None,
        spend: Meter | None = None,
        clock: Callable[[], float] = time.monotonic,
        preemption_notice_s: float | None = None,
    ) -> None:
        self.mode = parse(GuardMode, mode, "--guard")
        self.metric_mode = parse(Mode, metric_mode, "--mode").value
        RuleConfig().with_overrides(thresholds)  # a bad threshold is bad input now, not mid-run
        self.cost = cost
        self.thresholds = dict(thresholds) if thresholds else None
        self.train_metric, self.val_metric = train_metric or None, val_metric or None
        self.stream = stream
        self.cpu_share = min(1.0, max(0.001, cpu_share))
        self.free_judge_s = max(0.0, free_judge_s)
        self.max_failed_reads = max_failed_reads
        self.clock = clock
        self.hang = HangDetector(hang)
        self.spend = spend
        self._client = storage_client
        # What happened, for reports and benchmarks.
        self.stop: Stop | None = None
        self.disabled = ""  # why it stopped guarding ('' while guarding)
        self.kind = ""  # jsonl or tensorboard, once a history was found
        self.source = ""
        self.polls = 0
        self.judgements = 0
        self.judge_seconds = 0.0
        self.read_seconds = 0.0
        self.not_judged = ""
        self.last_verdict: Verdict | None = None
        self._job: RunningJob | None = None
        self._jsonl: JsonlTail | None = None
        self._follower: Follower | None = None
        self._events: EventDirTail | None = None
        self._failed_reads = 0
        self._dirty = False
        self._next_judge = 0.0
        self._announced = False
        self.preemption_notice_s = preemption_notice_s
        self._save_warned = False

    @classmethod
    def for_spec(
        cls, spec: JobSpec, mode: GuardMode | str = GuardMode.FAIL, *, local: bool = False, **kwargs: Any
    ) -> HistoryGuard:
        """A guard for the job ``spec`` describes (its accelerators and timeout count the hours;
        ``local``: it runs on this machine, where no timeout bounds it)."""
        kwargs.setdefault("preemption_notice_s", notice_for(spec))
        return cls(mode, cost=JobCost.from_spec(spec, local=local), **kwargs)

    # -- the Watcher seam --

    def poll(self, job: RunningJob) -> Stop | None:
        """Reads what the history gained, judges it when due; a Stop ends the job."""
        if self.stop is not None:
            return self.stop  # the backend has not stopped it yet: ask again
        if self.spend is not None and self.spend.reached(job.elapsed_s):
            self.stop = self._budget_stop(job)
            return self.stop
        if self.mode == GuardMode.OFF or self.disabled:
            return None
        self._job = job
        if job.state in WAITING_STATES:
            return None
        self.polls += 1
        self._announce(job)
        try:
            added = self._read(job)
        except FollowError as exc:
            self._failed_reads += 1
            if not exc.transient:
                self._give_up(str(exc))
                return None
            if self._failed_reads == 1:
                self._say(f"could not read the history this time ({exc}); trying again next poll")
            if self._failed_reads >= self.max_failed_reads:
                self._give_up(f"the history could not be read {self._failed_reads} times in a row ({exc})")
            return None
        except HistoryError as exc:
            self._give_up(f"the history cannot be parsed: {exc}")
            return None
        except Exception as exc:  # no credentials, a bug: never stop or crash a paid job for it
            self._give_up(f"reading the history failed: {type(exc).__name__}: {exc}")
            return None
        self._failed_reads = 0
        self._check_saves()
        now = self.clock()
        self.hang.observe(now, added.points)
        stop = self._maybe_judge(added, job)
        if stop is None and job.state == "RUNNING":
            found = self.hang.check(now)
            if found is not None:
                self.stop = stop = self._hang_stop(found, job)
        return stop

    # -- reading --

    def _announce(self, job: RunningJob) -> None:
        if self._announced:
            return
        self._announced = True
        where = [p for p in (job.history_path, job.tensorboard_dir) if p]
        self._say(
            f"{self.mode.value}: following the job's history ("
            f"{' or TensorBoard events under '.join(where) or 'no path given'}); "
            f"{self.hang.policy.describe()}"
        )

    def _read(self, job: RunningJob) -> Added:
        started = self.clock()
        try:
            return self._read_sources(job)
        finally:
            self.read_seconds += self.clock() - started

    def _read_sources(self, job: RunningJob) -> Added:
        if job.history_path:
            if self._follower is None or self._follower.uri != job.history_path:
                self._follower = follower_for(job.history_path, self._client)
                self._jsonl = JsonlTail(job.history_path)
            chunk = self._follower.read_new()
            if chunk is not None:
                if self.kind != "jsonl":
                    self._found("jsonl", job.history_path)
                assert self._jsonl is not None
                if chunk.restarted:  # only ever after an earlier read
                    if self._jsonl.lines:
                        self._say(
                            f"{job.history_path} was rewritten (a restarted run resuming "
                            "from a checkpoint); reading it again from its start"
                        )
                    self._jsonl.reset()
                return self._jsonl.feed(chunk.data)
        if job.tensorboard_dir:
            if self._events is None or self._events.root != job.tensorboard_dir.rstrip("/"):
                self._events = EventDirTail(job.tensorboard_dir, self._client)
            added, present = self._events.read()
            if present and self.kind != "tensorboard":
                self._found("tensorboard", self._events.root)
            return added
        return Added()

    def _found(self, kind: str, source: str) -> None:
        self.kind, self.source = kind, source
        self._say(f"reading {source} ({kind}) as it grows")

    @property
    def book(self) -> SeriesBook | None:
        """The series followed so far."""
        if self.kind == "jsonl" and self._jsonl is not None:
            return self._jsonl.book
        if self.kind == "tensorboard" and self._events is not None:
            return self._events.book
        return None

    @property
    def planned_steps(self) -> int | None:
        """The run's total steps, when its history declared them."""
        return self._jsonl.planned_steps if self.kind == "jsonl" and self._jsonl else None

    @property
    def bytes_read(self) -> int:
        """Bytes transferred from storage so far."""
        total = self._follower.bytes_read if self._follower is not None else 0
        return total + (self._events.bytes_read if self._events is not None else 0)

    def history(self) -> History | None:
        """The history followed so far (None when none was found or it could not be read)."""
        book = self.book
        if book is None or not len(book) or self.disabled:
            return None
        history = book.history(self.kind, self.source)
        if self.kind == "jsonl" and self._jsonl is not None:
            history.saves = list(self._jsonl.saves)  # the verdict says what they cost
        return history

    # -- judging --

    def _maybe_judge(self, added: Added, job: RunningJob) -> Stop | None:
        self._dirty |= added.points > 0
        if not self._dirty or not (added.non_finite or self.clock() >= self._next_judge):
            return None
        history = self.history()
        if history is None:
            return None
        started = self.clock()
        try:
            judgement = judge(
                history,
                self.mode,
                thresholds=self.thresholds,
                train_metric=self.train_metric,
                val_metric=self.val_metric,
                metric_mode=self.metric_mode,
            )
        except Exception as exc:  # fail open: an error of the guard never stops the job
            self._give_up(f"an internal error while judging: {type(exc).__name__}: {exc}")
            return None
        finally:
            spent = self.clock() - started
            self.judge_seconds += spent
            self.judgements += 1
            self._next_judge = started + spent / self.cpu_share if spent > self.free_judge_s else 0.0
            self._dirty = False
        self.not_judged = judgement.not_judged
        self.last_verdict = judgement.verdict
        if judgement.finding is None:
            return None
        self.stop = self._stop(judgement, job)
        return self.stop

    def _stop(self, judgement: Judgement, job: RunningJob) -> Stop:
        finding = judgement.finding
        assert finding is not None
        book = self.book
        last_step = book.last_step if book is not None else None
        details: dict[str, Any] = {
            "mode": self.mode.value,
            "source": self.source,
            "format": self.kind,
            "series": finding.series,
            "step_range": list(finding.step_range),
            "finding": finding.to_dict(),
            "polls": self.polls,
            "last_step": last_step,
            "planned_steps": self.planned_steps,
            "elapsed_s": round(job.elapsed_s, 3),
        }
        sentence = ""
        if self.cost is not None:
            saved = estimate(self.cost, job.elapsed_s, last_step, self.planned_steps)
            details.update(
                savings=saved.to_dict(),
                accelerator_hours_saved=saved.accelerator_hours,
                machine_hours_saved=saved.machine_hours,
                hours_left=saved.hours_left,
                savings_basis=saved.basis,
            )
            sentence = saved.sentence()
            details["saved"] = sentence
            if self.spend is not None:
                details.update(self.spend.saved(saved))
                sentence = details["saved"]
        summary = judgement.verdict.summary if judgement.verdict is not None else {}
        if "best_step" in summary:
            details["best_step"] = summary["best_step"]
        evidence = bound(redact(f"{finding.message} ({finding.series})"), _EVIDENCE_CHARS)
        remedy = bound(redact(finding.remedy), _EVIDENCE_CHARS)
        if judgement.success:
            self._say(
                f"early stop: {finding.failure_class} confirmed: {evidence}. The job ends "
                f"here as a success; the model is the checkpoint nearest the best "
                f"validation step. {sentence}".rstrip()
            )
        else:
            self._say(
                f"stopping the job: {finding.failure_class}: {evidence}. Remedy: {remedy}. "
                f"{sentence}".rstrip()
            )
        return Stop(finding.failure_class, evidence, remedy, judgement.success, details)

    def _hang_stop(self, found: HangFinding, job: RunningJob) -> Stop:
        from trainguard.failure_classes import get

        book = self.book
        details: dict[str, Any] = {
            "mode": self.mode.value,
            "source": self.source,
            "format": self.kind,
            "series": "",
            "hang": found.to_dict(),
            "polls": self.polls,
            "last_step": book.last_step if book is not None else None,
            "planned_steps": self.planned_steps,
            "elapsed_s": round(job.elapsed_s, 3),
        }
        sentence = ""
        if self.cost is not None:
            # A hung job makes no progress: what stopping saves is the rest of its timeout, not
            # the steps still to go (the planned-steps pace would never be reached).
            saved = estimate(self.cost, job.elapsed_s)
            details.update(
                savings=saved.to_dict(),
                accelerator_hours_saved=saved.accelerator_hours,
                machine_hours_saved=saved.machine_hours,
                hours_left=saved.hours_left,
                savings_basis=saved.basis,
            )
            sentence = saved.sentence()
            details["saved"] = sentence
            if self.spend is not None:
                details.update(self.spend.saved(saved))
                sentence = details["saved"]
        evidence = bound(redact(found.evidence()), _EVIDENCE_CHARS)
        remedy = get("hang").remedy
        self._say(f"stopping the job: hang: {evidence}. Remedy: {remedy}. {sentence}".rstrip())
        return Stop("hang", evidence, remedy, False, details)

    def _budget_stop(self, job: RunningJob) -> Stop:
        assert self.spend is not None
        book = self.book
        saved = None
        if self.cost is not None:
            last = book.last_step if book is not None and not self.disabled else None
            saved = estimate(self.cost, job.elapsed_s, last, self.planned_steps)
        stop = self.spend.stop(job, saved)
        if saved is not None:
            stop.details.update(
                savings=saved.to_dict(),
                accelerator_hours_saved=saved.accelerator_hours,
                machine_hours_saved=saved.machine_hours,
                hours_left=saved.hours_left,
                savings_basis=saved.basis,
            )
            stop.details.setdefault("saved", saved.sentence())
        stop.details.update(mode=self.mode.value, source=self.source, format=self.kind, polls=self.polls)
        sentence = stop.details.get("saved", "")
        self._say(f"stopping the job: budget: {stop.evidence}. Remedy: {stop.remedy}. {sentence}".rstrip())
        return stop

    # -- the end --

    def finish(self, job: RunningJob | None = None) -> dict:
        """Reads the last bytes once the job ended and says what the guard did; returns a summary.

        A job that wrote no history gets one line saying so (nothing was guarded); the job is
        never failed for it.
        """
        job = job or self._job
        if self.mode != GuardMode.OFF and not self.disabled and job is not None:
            try:
                added = self._read(job)
                if self._jsonl is not None and self.kind == "jsonl":
                    added.merge(self._jsonl.feed(b"", final=True))
            except (FollowError, HistoryError) as exc:
                self._say(f"the last read of the history failed ({exc})")
            except Exception as exc:  # fail open, as while running
                self._say(f"the last read of the history failed ({type(exc).__name__}: {exc})")
            self._check_saves()
            if self.kind == "jsonl":
                self._say(self.save_fit.line())
            if not self.kind:
                where = " or ".join(p for p in (job.history_path, job.tensorboard_dir) if p)
                self._say(
                    f"the job wrote no history ({where or 'no output directory'}): nothing "
                    "was guarded. Log one with trainguard.runtime.HistoryWriter, or "
                    "TensorBoard scalars under AIP_TENSORBOARD_LOG_DIR"
                )
        return self.summary()

    @property
    def save_fit(self) -> SaveFit:
        """The job's checkpoint saves so far: cost, work at risk, fit in the preemption notice."""
        saves = self._jsonl.saves if self._jsonl is not None else []
        # The notice the job's runtime recorded is the one it was given (a local run's grace
        # period, a pool's own setting); the spec's is what it should have been given.
        notice = recorded_notice(saves)
        return SaveFit.from_records(saves, self.preemption_notice_s if notice is None else notice)

    def _check_saves(self) -> None:
        """At the first save seen: a preemption save that does not fit the notice is said."""
        if self._save_warned or self._jsonl is None or not self._jsonl.saves:
            return
        self._save_warned = True
        warning = self.save_fit.warning()
        if warning:
            self._say(f"WARNING: {warning}")

    def summary(self) -> dict:
        """What the guard did, JSON-safe."""
        book = self.book
        return {
            "checkpoint_saves": self.save_fit.to_dict(),
            "mode": self.mode.value,
            "source": self.source,
            "format": self.kind,
            "polls": self.polls,
            "judgements": self.judgements,
            "judge_seconds": round(self.judge_seconds, 4),
            "read_seconds": round(self.read_seconds, 4),
            "bytes_read": self.bytes_read,
            "points": book.points if book is not None else 0,
            "planned_steps": self.planned_steps,
            "stopped": self.stop.to_dict() if self.stop is not None else None,
            "stopped_guarding": self.disabled,
            "not_judged": self.not_judged,
            "hang": {
                "rule": self.hang.policy.describe(),
                "records": self.hang.records,
                "median_interval_s": self.hang.median_interval(),
            },
        }

    # -- saying things --

    def _give_up(self, reason: str) -> None:
        self.disabled = bound(redact(reason), 2000)
        self._say(
            f"STOPPED GUARDING — the job runs on unguarded and will not be cancelled by "
            f"the guard: {self.disabled}"
        )

    def _say(self, line: str) -> None:
        if self.stream is not None:
            print(f"[trainguard] guard: {line}", file=self.stream, flush=True)
