"""Renders a verdict: Markdown, self-contained HTML, and a plot of the curves (matplotlib Agg).

(Preflight has its own report module; this one only renders validation verdicts. It imports the
verdict, never the other way round.)

The plot draws the training and validation series judged, shades each finding's step range (red
for fail, amber for warn), marks the best validation step and the first non-finite step. It uses
matplotlib's object API with the Agg canvas, so it never touches pyplot's global state or needs a
display; long series are thinned to a few thousand points (keeping each bucket's extremes).
"""

from __future__ import annotations

import base64
import html
import io
import math
import os
import textwrap
from typing import TYPE_CHECKING

import numpy as np

from trainguard.choices import Mode
from trainguard.failure_classes import get as failure_class
from trainguard.validation.history import History, select_series
from trainguard.validation.verdict import Finding, Verdict

if TYPE_CHECKING:
    from trainguard.validation.history import Series

__all__ = ["render_markdown", "render_html", "render_plot", "plot_png"]

# A history may hold thousands of series: the report names this many and counts the rest.
_MAX_LISTED = 20

_MAX_PLOT_POINTS = 4000
_COLORS = {"fail": "#d62728", "warn": "#ff9f1c"}


def _num(value: object) -> str:
    if value is None:
        return "—"
    if isinstance(value, int | np.integer):
        return str(int(value))
    if isinstance(value, float | np.floating):
        x = float(value)
        if not math.isfinite(x):
            return str(x)
        if x.is_integer() and abs(x) < 1e15:
            return str(int(x))
        return f"{x:.4g}"
    return str(value)


def _steps(finding: Finding) -> str:
    a, b = finding.step_range
    return _num(a) if a == b else f"{_num(a)}–{_num(b)}"


def _series_line(info: dict | None) -> str:
    if not info:
        return "none"
    span = ""
    if "first_step" in info:
        span = f", steps {_num(info['first_step'])}–{_num(info['last_step'])}"
    finite = ""
    if info.get("finite_points", info["points"]) != info["points"]:
        finite = f" ({info['finite_points']} finite)"
    return f"`{info['name']}`: {info['points']} points{finite}{span}"


def _state(verdict: Verdict) -> str:
    if not verdict.passed:
        return "FAILED"
    return "NOT JUDGED" if verdict.undecided else "PASSED"


def _gate_line(gate: dict) -> str:
    state = "met" if gate["passed"] else "MISSED"
    return f"{gate['gate']}: {state}, {gate['series']} = {_num(gate['value'])} at step {_num(gate['step'])}"


def _pair_line(pair: dict) -> str:
    names = " / ".join(f"`{pair[k]}`" for k in ("train", "val") if pair.get(k))
    return f"{pair['metric'] or 'value'} ({pair['mode']}): {names}"


def render_markdown(verdict: Verdict) -> str:
    """The report as Markdown (the component's Markdown artifact, the CLI's ``--markdown``)."""
    lines = [f"# Training validation: {_state(verdict)}", "", f"**{verdict.headline}**", ""]
    if verdict.findings:
        lines += ["| severity | class | steps | what happened |", "|---|---|---|---|"]
        for f in verdict.findings:
            message = f.message.replace("|", "\\|")
            lines.append(f"| {f.severity} | `{f.failure_class}` | {_steps(f)} | {message} |")
        lines.append("")
        for f in verdict.findings:
            fc = failure_class(f.failure_class)
            lines += [
                f"## `{f.failure_class}` ({f.severity}) in `{f.series}`",
                "",
                f.message,
                "",
                f"- **First remedy:** {f.remedy}",
            ]
            if fc.trap:
                lines.append(f"- **Trap:** {fc.trap}")
            lines.append(f"- **Check first:** {fc.checks}")
            evidence = ", ".join(f"{k} = {_num(v)}" for k, v in f.evidence.items())
            lines += [f"- **Evidence:** {evidence}", ""]
    series = verdict.series
    lines += [
        "## What was read",
        "",
        f"- Source: `{series.get('source', '')}` ({series.get('format', '')}, "
        f"{series.get('records', 0)} records)",
        f"- Training: {_series_line(series.get('train'))}",
        f"- Validation: {_series_line(series.get('val'))}",
        f"- Mode: {series.get('mode', 'min')} (lower is better)"
        if series.get("mode", "min") == Mode.MIN
        else "- Mode: max (higher is better)",
    ]
    others_judged = [p for p in series.get("pairs", []) if not p.get("primary")]
    if others_judged:
        lines.append(f"- Also judged: {'; '.join(_pair_line(p) for p in others_judged)}")
    others = [
        s["name"]
        for s in series.get("available", [])
        if s["name"] not in {(series.get("train") or {}).get("name"), (series.get("val") or {}).get("name")}
    ]
    if others:
        shown = ", ".join(f"`{n}`" for n in others[:_MAX_LISTED])
        more = f" and {len(others) - _MAX_LISTED} more" if len(others) > _MAX_LISTED else ""
        lines.append(f"- Also in the file: {shown}{more}")
    skipped = list(series.get("skipped", {}).items())
    for name, reason in skipped[:_MAX_LISTED]:
        lines.append(f"- Not judged: `{name}`: {reason}")
    if len(skipped) > _MAX_LISTED:
        lines.append(f"- Not judged: {len(skipped) - _MAX_LISTED} more series")
    lines.append("")
    if verdict.gates:
        lines += ["## Quality gates", ""] + [f"- {_gate_line(g)}" for g in verdict.gates] + [""]
    if verdict.saves is not None:
        lines += ["## Checkpoint saves", "", f"- {verdict.saves.line()}", ""]
    if verdict.not_judged:
        lines += ["## Not judged", ""]
        lines += [f"- `{rule}`: {reason}" for rule, reason in verdict.not_judged.items()]
        lines.append("")
    if verdict.notes:
        lines += ["## Reader notes", ""] + [f"- {note}" for note in verdict.notes] + [""]
    metrics = verdict.summary_metrics()
    if metrics:
        lines += ["## Summary metrics", "", "| metric | value |", "|---|---|"]
        lines += [f"| {k} | {_num(v)} |" for k, v in metrics.items()]
        lines.append("")
    return "\n".join(lines)


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em;max-width:70em;
color:#222}
h1{margin-bottom:.2em}.pass{color:#2ca02c}.fail{color:#d62728}.warn{color:#c77c00}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.3em .6em;
text-align:left;vertical-align:top}th{background:#f4f4f4}code{background:#f4f4f4;padding:0 .2em}
.finding{border-left:4px solid #ccc;padding:.2em 1em;margin:1em 0}
.finding.fail{border-color:#d62728}.finding.warn{border-color:#ff9f1c}
img{max-width:100%;border:1px solid #ddd}
"""


def render_html(verdict: Verdict, plot: bytes | None = None) -> str:
    """A self-contained HTML page; ``plot`` (PNG bytes) is embedded as a data URI."""
    e = html.escape
    state = "pass" if verdict.passed else "fail"
    out = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        "<title>Training validation</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1 class='{state}'>Training validation: {_state(verdict)}</h1>",
        f"<p><strong>{e(verdict.headline)}</strong></p>",
    ]
    if plot:
        data = base64.b64encode(plot).decode("ascii")
        out.append(f"<img alt='training curves' src='data:image/png;base64,{data}'>")
    if verdict.findings:
        out.append("<table><tr><th>severity</th><th>class</th><th>steps</th><th>what happened</th></tr>")
        for f in verdict.findings:
            out.append(
                f"<tr><td class='{e(f.severity)}'>{e(f.severity)}</td>"
                f"<td><code>{e(f.failure_class)}</code></td><td>{e(_steps(f))}</td>"
                f"<td>{e(f.message)}</td></tr>"
            )
        out.append("</table>")
        for f in verdict.findings:
            fc = failure_class(f.failure_class)
            evidence = ", ".join(f"{k} = {_num(v)}" for k, v in f.evidence.items())
            out.append(
                f"<div class='finding {e(f.severity)}'><h3><code>{e(f.failure_class)}"
                f"</code> ({e(f.severity)}) in <code>{e(f.series)}</code></h3>"
                f"<p>{e(f.message)}</p><ul><li><strong>First remedy:</strong> "
                f"{e(f.remedy)}</li>"
            )
            if fc.trap:
                out.append(f"<li><strong>Trap:</strong> {e(fc.trap)}</li>")
            out.append(
                f"<li><strong>Check first:</strong> {e(fc.checks)}</li>"
                f"<li><strong>Evidence:</strong> {e(evidence)}</li></ul></div>"
            )
    series = verdict.series
    out.append("<h2>What was read</h2><ul>")
    out.append(
        f"<li>Source: <code>{e(str(series.get('source', '')))}</code> "
        f"({e(str(series.get('format', '')))}, {series.get('records', 0)} records)</li>"
    )
    for label, key in (("Training", "train"), ("Validation", "val")):
        text = _series_line(series.get(key)).replace("`", "")
        out.append(f"<li>{label}: {e(text)}</li>")
    out.append(f"<li>Mode: {e(str(series.get('mode', 'min')))}</li></ul>")
    if verdict.gates:
        out.append("<h2>Quality gates</h2><ul>")
        out += [f"<li>{e(_gate_line(g))}</li>" for g in verdict.gates]
        out.append("</ul>")
    if verdict.saves is not None:
        out.append(f"<h2>Checkpoint saves</h2><p>{e(verdict.saves.line())}</p>")
    if verdict.not_judged:
        out.append("<h2>Not judged</h2><ul>")
        out += [f"<li><code>{e(k)}</code>: {e(v)}</li>" for k, v in verdict.not_judged.items()]
        out.append("</ul>")
    if verdict.notes:
        out.append("<h2>Reader notes</h2><ul>")
        out += [f"<li>{e(note)}</li>" for note in verdict.notes]
        out.append("</ul>")
    metrics = verdict.summary_metrics()
    if metrics:
        out.append("<h2>Summary metrics</h2><table><tr><th>metric</th><th>value</th></tr>")
        out += [f"<tr><td>{e(k)}</td><td>{e(_num(v))}</td></tr>" for k, v in metrics.items()]
        out.append("</table>")
    out.append("</body></html>")
    return "\n".join(out)


def _thin(steps: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """At most ~_MAX_PLOT_POINTS points: each bucket keeps its lowest and highest value."""
    n = values.size
    if n <= _MAX_PLOT_POINTS:
        return steps, values
    buckets = _MAX_PLOT_POINTS // 2
    size = -(-n // buckets)
    pad = size * buckets - n
    v = np.concatenate((values, np.full(pad, np.nan))).reshape(buckets, size)
    s = np.concatenate((steps, np.full(pad, steps[-1]))).reshape(buckets, size)
    finite = np.where(np.isfinite(v), v, np.nan)
    empty = ~np.isfinite(finite).any(axis=1)
    finite[empty] = 0.0  # all-NaN buckets: any index will do, the value stays NaN
    with np.errstate(all="ignore"):
        lo, hi = np.nanargmin(finite, axis=1), np.nanargmax(finite, axis=1)
    idx = np.sort(np.stack((lo, hi), axis=1), axis=1)
    rows = np.arange(buckets)[:, None]
    return s[rows, idx].reshape(-1), v[rows, idx].reshape(-1)


def render_plot(history_or_verdict: History | Verdict, path: str | os.PathLike) -> None:
    """Writes a PNG of the curves: training and validation, findings shaded, best step marked.

    Args:
        history_or_verdict: a :class:`Verdict` (findings are drawn) or a :class:`History` (the
            default training and validation losses are drawn).
        path: where to write the PNG (a local path).
    """
    data = plot_png(history_or_verdict)
    with open(path, "wb") as handle:
        handle.write(data)


def plot_png(history_or_verdict: History | Verdict) -> bytes:
    """The plot of :func:`render_plot` as PNG bytes (for the HTML report)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if isinstance(history_or_verdict, History):
        history, verdict = history_or_verdict, None
        train, val = select_series(history)
        mode, x_label = "min", history.x_label
    else:
        verdict = history_or_verdict
        if verdict.history is None:
            raise ValueError("this verdict carries no history to plot")
        history = verdict.history
        names = verdict.series
        train = history.series.get((names.get("train") or {}).get("name", ""))
        val = history.series.get((names.get("val") or {}).get("name", ""))
        mode, x_label = names.get("mode", "min"), names.get("x", "step")

    fig = Figure(figsize=(9, 4.8), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    plotted: list[Series] = []
    for series, color, style in ((train, "#1f77b4", "-"), (val, "#2ca02c", "-o")):
        if series is None:
            continue
        xs, ys = _thin(series.steps, series.values)
        marker = "o" if style == "-o" and xs.size <= 60 else None
        ax.plot(
            xs,
            ys,
            color=color,
            marker=marker,
            markersize=3,
            linewidth=1.2,
            label=f"{series.split}: {series.name}",
        )
        plotted.append(series)
        bad = ~np.isfinite(series.values)
        if bad.any():
            first = float(series.steps[np.argmax(bad)])
            ax.axvline(
                first,
                color="#d62728",
                linestyle=":",
                linewidth=1.2,
                label=f"first non-finite ({series.name}, step {_num(first)})",
            )
    values = np.concatenate([s.values[np.isfinite(s.values)] for s in plotted]) if plotted else np.zeros(0)
    if values.size and values.min() > 0 and values.max() / values.min() > 100:
        ax.set_yscale("log")
    if verdict is not None:
        seen = set()
        for f in verdict.findings:
            a, b = f.step_range
            label = f.failure_class if f.failure_class not in seen else None
            seen.add(f.failure_class)
            if a == b:
                ax.axvline(a, color=_COLORS[f.severity], alpha=0.6, linewidth=3, label=label)
            else:
                ax.axvspan(a, b, color=_COLORS[f.severity], alpha=0.15, label=label)
        best = verdict.summary.get("best_step")
        if best is not None:
            which = "validation" if val is not None and np.isfinite(val.values).any() else "training"
            ax.axvline(
                best, color="#555", linestyle="--", linewidth=1, label=f"best {which} step {_num(best)}"
            )
        title = verdict.headline
    else:
        title = f"{history.source}"
    # The headline whole, on up to three lines of the figure's width (a cut one hid the step and
    # the value that say what happened); only what goes past three lines is shortened.
    lines = textwrap.wrap(title, 100) or [""]
    if len(lines) > 3:
        lines = [*lines[:2], textwrap.shorten(" ".join(lines[2:]), 97, placeholder="...")]
    ax.set_title("\n".join(lines), fontsize=9 if len(lines) > 1 else 10)
    ax.set_xlabel(x_label)
    shown = train if train is not None else val
    ax.set_ylabel((shown.metric if shown is not None else "") or "value")
    if mode == Mode.MAX:
        ax.set_ylabel(f"{ax.get_ylabel()} (higher is better)")
    ax.grid(True, alpha=0.3)
    if plotted:
        ax.legend(fontsize=8, loc="best")
    buffer = io.BytesIO()
    # Values near the float limits (1e308) overflow matplotlib's tick arithmetic: the plot is
    # still drawn; numpy's RuntimeWarning would only reach the user's terminal as noise.
    with np.errstate(all="ignore"):
        fig.tight_layout()
        fig.savefig(buffer, format="png")
    return buffer.getvalue()
