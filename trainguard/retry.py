"""One retry policy for every remote call: Google APIs, the launcher, the registry client.

A :class:`RetryPolicy` is exponential backoff bounded by a *total deadline*: the time from the
first failure to giving up, whatever the number of attempts. When it runs out, the caller gets one
error that names what was called, where, for how long, and the last failure:

* :class:`~trainguard.errors.EndpointUnreachable` (exit 2) when the endpoint never answered at all
  (connection refused, DNS, time-outs): most often a wrong endpoint override or no network;
* :class:`~trainguard.errors.TransientError` when it answered, but only with 429/5xx.

A 429 is retried only when it is a *rate* limit: one that says the request is over a quota
*limit* ("The following quota metrics exceed quota limits: …", :func:`over_quota_limit`) is
refused until someone raises the limit, so it propagates at once.

The default deadline is ``DEFAULT_DEADLINE_S`` (10 s) for one-shot calls, settable with
``TRAINGUARD_RETRY_DEADLINE`` (``30s``, ``2m``); a job watcher passes its own, longer one.

Example (a call that fails twice with a transient error, then answers)::

    >>> from trainguard.retry import RetryPolicy
    >>> answers = iter([ConnectionError("reset"), ConnectionError("reset"), {"quotaInfos": []}])
    >>> def list_quotas():
    ...     answer = next(answers)
    ...     if isinstance(answer, Exception):
    ...         raise answer
    ...     return answer
    >>> policy = RetryPolicy.from_env(initial_s=0.01)
    >>> policy.call(list_quotas, transient=(ConnectionError,), what="Cloud Quotas list", where="localhost")
    {'quotaInfos': []}
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import TypeVar

from trainguard.durations import parse_duration
from trainguard.errors import ConfigError, EndpointUnreachable, TransientError

__all__ = [
    "RetryPolicy",
    "DEFAULT_DEADLINE_S",
    "DEADLINE_ENV",
    "Backoff",
    "unreachable_types",
    "transient_types",
    "over_quota_limit",
    "describe",
]

DEFAULT_DEADLINE_S = 10.0
DEADLINE_ENV = "TRAINGUARD_RETRY_DEADLINE"
_T = TypeVar("_T")


class Backoff:
    """Delays that start at ``initial`` and grow by ``factor`` up to ``cap``; ``reset()`` restarts."""

    def __init__(self, initial: float, factor: float, cap: float) -> None:
        self.initial, self.factor, self.cap = initial, factor, cap
        self._next = initial

    def reset(self) -> None:
        self._next = self.initial

    def __call__(self) -> float:
        delay = self._next
        self._next = min(self.cap, self._next * self.factor)
        return delay


def unreachable_types() -> tuple[type[BaseException], ...]:
    """Errors that mean the endpoint did not answer at all (no HTTP status)."""
    import requests
    from google.auth import exceptions as auth_exc

    return (
        requests.ConnectionError,
        requests.Timeout,
        ConnectionError,
        TimeoutError,
        auth_exc.TransportError,
    )


def over_quota_limit(exc: BaseException) -> bool:
    """True for a 429 that refuses a request over a quota *limit* (waiting cannot cure it), as
    opposed to a rate limit (see :mod:`trainguard.api_errors`)."""
    from google.api_core import exceptions as gexc

    from trainguard import api_errors

    if not isinstance(exc, gexc.TooManyRequests):
        return False
    return api_errors.kind(api_errors.ErrorFacts.of(exc)) == api_errors.QUOTA_LIMIT


def transient_types() -> tuple[type[BaseException], ...]:
    """Every error worth retrying: no answer, or 429/500/503/504 (google.api_core's classes)."""
    from google.api_core import exceptions as gexc

    return (
        gexc.ServiceUnavailable,
        gexc.TooManyRequests,
        gexc.InternalServerError,
        gexc.GatewayTimeout,
        gexc.DeadlineExceeded,
        *unreachable_types(),
    )


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff within a total deadline.

    Attributes:
        initial_s: the first delay.
        factor: each delay is the previous times this.
        max_delay_s: no delay is longer.
        deadline_s: give up once this long has passed since the first failure.
    """

    initial_s: float = 0.25
    factor: float = 2.0
    max_delay_s: float = 4.0
    deadline_s: float = DEFAULT_DEADLINE_S

    def __post_init__(self) -> None:
        if not (0 < self.initial_s <= self.max_delay_s and self.factor >= 1 and self.deadline_s >= 0):
            raise ConfigError(
                f"RetryPolicy(initial_s={self.initial_s!r}, factor={self.factor!r}, max_delay_s="
                f"{self.max_delay_s!r}, deadline_s={self.deadline_s!r}): pass 0 < initial_s <= "
                "max_delay_s, factor >= 1 and deadline_s >= 0 (seconds)"
            )

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None, **overrides: float) -> RetryPolicy:
        """The default policy, its deadline from ``TRAINGUARD_RETRY_DEADLINE`` when set."""
        env = os.environ if environ is None else environ
        policy = cls(**overrides)
        raw = env.get(DEADLINE_ENV, "").strip()
        if raw:
            policy = replace(policy, deadline_s=parse_duration(raw, DEADLINE_ENV))
        return policy

    def with_deadline(self, deadline_s: float) -> RetryPolicy:
        """The same backoff with another total deadline."""
        return replace(self, deadline_s=deadline_s)

    def delays(self) -> Iterator[float]:
        """The successive delays (endless; the deadline stops the caller)."""
        backoff = Backoff(self.initial_s, self.factor, self.max_delay_s)
        while True:
            yield backoff()

    def call(
        self,
        fn: Callable[[], _T],
        *,
        transient: tuple[type[BaseException], ...],
        what: str,
        where: str = "",
        on_retry: Callable[[BaseException, float], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        unreachable: tuple[type[BaseException], ...] | None = None,
        unanswered_deadline_s: float | None = None,
        permanent: Callable[[BaseException], bool] | None = None,
    ) -> _T:
        """``fn()``, retrying errors of the ``transient`` types until the deadline.

        Args:
            fn: the call.
            transient: the error types to retry; anything else propagates at once.
            what: what is being done, for the message ("Vertex AI get").
            where: the endpoint (URL or host), for the message.
            on_retry: called with (error, delay) before each wait.
            clock, sleep: injectable for tests.
            unreachable: the types that mean "no answer" (default :func:`unreachable_types`).
            unanswered_deadline_s: a shorter deadline while nothing has answered at all (a long
                deadline meant to ride out an outage of a service that was there should not make
                a wrong or dead endpoint cost minutes before it is named).
            permanent: True for an error of a transient type that waiting cannot cure: it
                propagates at once (default :func:`over_quota_limit`).

        Raises:
            EndpointUnreachable: every attempt failed without an answer.
            TransientError: the endpoint answered, but only with retryable errors.
        """
        first: float | None = None
        answered = False
        delays = self.delays()
        permanent = permanent or over_quota_limit
        while True:
            try:
                return fn()
            except transient as exc:
                if permanent(exc):
                    raise
                now = clock()
                first = now if first is None else first
                no_answer = isinstance(exc, unreachable or unreachable_types())
                answered = answered or not no_answer
                delay = next(delays)
                limit = (
                    self.deadline_s
                    if answered or unanswered_deadline_s is None
                    else min(self.deadline_s, unanswered_deadline_s)
                )
                if now + delay - first > limit:
                    raise self._give_up(exc, what, where, now - first, answered, limit) from None
                if on_retry is not None:
                    on_retry(exc, delay)
                sleep(delay)

    def _give_up(
        self,
        exc: BaseException,
        what: str,
        where: str,
        elapsed: float,
        answered: bool,
        limit: float | None = None,
    ) -> Exception:
        detail = describe(exc)
        place = f" at {where}" if where else ""
        if not answered:
            return EndpointUnreachable(
                f"{what}: no answer{place} for {elapsed:.0f} s ({detail}); check the endpoint "
                f"(TRAINGUARD_ENDPOINT_*, STORAGE_EMULATOR_HOST) and the network. Retries stop "
                f"after {self.deadline_s if limit is None else limit:g} s ({DEADLINE_ENV} sets "
                f"it)"
            )
        return TransientError(
            f"{what}{place} kept failing for {elapsed:.0f} s: {detail}; try again later "
            f"(retries stop after {self.deadline_s:g} s; {DEADLINE_ENV} sets it)"
        )

    def api_core(self, *types: type[BaseException]):
        """This policy as a ``google.api_core.retry.Retry`` for GAPIC and storage calls.

        Args:
            types: the error types to retry (default: 429 and 503).
        """
        from google.api_core import exceptions, retry

        types = types or (exceptions.TooManyRequests, exceptions.ServiceUnavailable)
        of_type = retry.if_exception_type(*types)  # type: ignore[arg-type]
        return retry.Retry(
            predicate=lambda exc: of_type(exc) and not over_quota_limit(exc),
            initial=self.initial_s,
            maximum=self.max_delay_s,
            multiplier=self.factor,
            timeout=self.deadline_s,
        )


def describe(exc: BaseException) -> str:
    """A short, one-line account of an error (type and first line of its message)."""
    text = str(getattr(exc, "message", None) or exc).strip()
    first = text.splitlines()[0] if text else ""
    return f"{type(exc).__name__}: {first}"[:300] if first else type(exc).__name__
