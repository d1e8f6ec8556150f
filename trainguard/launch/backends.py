"""The one place a backend name (:class:`trainguard.choices.Backend`) becomes a backend.

Like kfp.local's map from runner type to task handler: a table from each name to a factory that
takes the launch options every caller has (:class:`LaunchOptions`) and builds that backend,
refusing the options it cannot honour. A new backend is one enum member, one class implementing
:class:`~trainguard.launch.base.Backend`, and one entry here. Backend modules are imported only
when chosen, so a local run never imports the Vertex AI client.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TextIO

from trainguard.choices import Backend as BackendName
from trainguard.choices import parse
from trainguard.errors import ConfigError
from trainguard.launch.base import Backend
from trainguard.launch.inject import InjectionPlan

__all__ = ["LaunchOptions", "make_backend", "BACKEND_FACTORIES"]


@dataclass(frozen=True)
class LaunchOptions:
    """What a caller (the CLI, the train component) may ask of any backend.

    Attributes:
        output_dir: local only: the base output directory when the spec has none (for Vertex,
            the train stage writes it into the spec).
        preempt_after: local only: inject preemptions this many seconds after each (re)start.
        gcp_resources_path: Vertex only: GCPC's ``gcp_resources`` file (written, and resumed
            from).
        max_queued_s: Vertex only: the queue limit (None follows the strategy, 0 waits forever;
            :mod:`trainguard.launch.queueing`). A local job never queues, so it is ignored there.
        stream: where progress lines go.
        extra_env: added to every worker's environment.
        inject: local only: faults to inject (``--inject``, :mod:`trainguard.launch.inject`),
            shared by every attempt of one ``train``.
        resume_prior: Vertex only: resume the job ``gcp_resources`` names (the first attempt of
            a task); False for the launcher's own later attempts, which always create one.
    """

    output_dir: str = ""
    preempt_after: tuple[float, ...] = ()
    gcp_resources_path: str | None = None
    max_queued_s: float | None = None
    stream: TextIO | None = None
    extra_env: Mapping[str, str] = field(default_factory=dict)
    inject: InjectionPlan | None = None
    resume_prior: bool = True


def _local(options: LaunchOptions) -> Backend:
    from trainguard.launch.local import LocalBackend

    return LocalBackend(
        output_dir=options.output_dir,
        preempt_after=list(options.preempt_after),
        stream=options.stream,
        extra_env=dict(options.extra_env),
        inject=options.inject,
    )


def _vertex(options: LaunchOptions) -> Backend:
    if options.preempt_after:
        raise ConfigError("--preempt-after injects preemptions into local runs only")
    if options.inject:
        raise ConfigError(
            "--inject injects faults into local runs only (--local / backend=local); a Vertex "
            "job meets real stockouts, quota refusals and hangs"
        )
    from trainguard.launch.vertex import VertexBackend

    # output_dir is not passed: the train stage writes it into the spec's baseOutputDirectory.
    return VertexBackend(
        gcp_resources_path=options.gcp_resources_path,
        max_queued_s=options.max_queued_s,
        stream=options.stream,
        extra_env=dict(options.extra_env),
        resume_prior=options.resume_prior,
    )


BACKEND_FACTORIES: dict[BackendName, Callable[[LaunchOptions], Backend]] = {
    BackendName.LOCAL: _local,
    BackendName.VERTEX: _vertex,
}


def make_backend(name: str | BackendName, options: LaunchOptions | None = None) -> Backend:
    """The backend called ``name``, built from ``options``.

    Raises:
        ConfigError: an unknown name (the message lists the valid ones), or an option that
            backend cannot honour.
    """
    choice = parse(BackendName, name, "--backend")
    return BACKEND_FACTORIES[choice](options or LaunchOptions())
