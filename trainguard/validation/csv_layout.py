"""How a CSV history is laid out: the character between its cells, and a title line above it.

Most CSV histories separate cells with ``,``; Keras' ``CSVLogger(separator=";")`` and pandas'
``to_csv(sep=";")`` or ``sep="\\t"`` write others, and some scripts write a title line (the run's
name, one field) before the header. :func:`sniff` reads the first lines and says which:

- the separator is the first of ``,`` ``;`` tab that splits the header into two or more cells and
  the first row into as many (a header alone decides by itself);
- a first line of one field that is not a number, above a line of two or more, is a title: it is
  skipped, with a note;
- a ``;``- or tab-separated file whose numbers use a decimal comma (``0,41``, a spreadsheet in a
  German or French locale) is refused: ``float`` reads ``0,41`` as no number, and reading it as
  two cells would shift every column.

>>> sniff(["epoch;loss;val_loss", "0;0.52;0.61"]).separator
';'
>>> layout = sniff(["model_history_log", "epoch,loss", "0,0.5"])
>>> (layout.title, layout.separator, layout.lines_used)
('model_history_log', ',', 3)
>>> sniff(["epoch,loss", "0,0.5"]) == Layout()
True
"""

from __future__ import annotations

import csv
import re
from collections.abc import Sequence
from dataclasses import dataclass

from trainguard.errors import HistoryError
from trainguard.validation.collect import echo

__all__ = ["SEPARATORS", "Layout", "sniff"]

# The order is the preference: Keras' CSVLogger writes ',' unless told otherwise (its `separator`
# argument), pandas' to_csv likewise (`sep`); ';' and tab are the others people pass.
SEPARATORS = (",", ";", "\t")
_SEPARATOR_NAMES = {",": "','", ";": "';'", "\t": "tabs"}
_DECIMAL_COMMA = re.compile(r"[+-]?\d+,\d+(?:[eE][+-]?\d+)?")
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


@dataclass(frozen=True)
class Layout:
    """Where a CSV's header is and what separates its cells.

    Attributes:
        separator: the character between cells.
        title: the skipped title line above the header, or None.
        lines_used: how many of the first lines decided it (a reader that saw fewer must not
            trust the result).
        extra: where rows hold one empty cell more than the header (Flair's ``loss.tsv``
            writes an empty cell after ``TRAIN_LOSS``; a trailing separator is one at the end):
            that cell's index, dropped from every row one cell longer than the header.
        extra_after: the header cell before it, for the note.
    """

    separator: str = ","
    title: str | None = None
    lines_used: int = 2
    extra: int | None = None
    extra_after: str = ""

    @property
    def header_line(self) -> int:
        """The header's line number (1-based)."""
        return 2 if self.title is not None else 1

    def notes(self) -> tuple[str, ...]:
        """What a reader tells the user about the layout (nothing for a plain ``,`` CSV)."""
        out: list[str] = []
        if self.title is not None:
            out.append(f"skipped line 1, {echo(self.title, 60)}: a title above the header")
        if self.separator != ",":
            out.append(f"cells separated by {_SEPARATOR_NAMES[self.separator]}")
        if self.extra is not None:
            where = f"after {echo(self.extra_after, 40)}" if self.extra_after else "first"
            out.append(f"rows hold one cell more than the header, an empty one {where}: dropped")
        return tuple(out)


def _cells(line: str, separator: str) -> list[str]:
    try:
        return next(csv.reader([line], delimiter=separator), [])
    except csv.Error:
        return []


def _fields(line: str) -> int:
    return max(len(_cells(line, s)) for s in SEPARATORS)


def _names_columns(line: str) -> bool:
    """Whether a line reads as a header: two or more cells, one of them a name, not a number."""
    best = max(SEPARATORS, key=lambda s: len(_cells(line, s)))
    cells = [c.strip() for c in _cells(line, best)]
    return len(cells) >= 2 and any(
        c and _NUMBER.fullmatch(c) is None and any(ch.isalpha() for ch in c) for c in cells
    )


def _is_title(line: str, next_line: str) -> bool:
    text = line.strip()
    return (
        bool(text)
        and _fields(line) == 1
        and _NUMBER.fullmatch(text) is None
        and any(c.isalpha() for c in text)
        and _names_columns(next_line)  # a row of numbers below it makes it a header, not a title
    )


def sniff(lines: Sequence[str], source: str = "history") -> Layout:
    """The layout of a CSV from its first lines (up to three, line ends allowed).

    Raises:
        HistoryError: numbers with a decimal comma (a ``;`` or tab-separated file, or one column).
    """
    first = [line.rstrip("\r\n") for line in lines[:3]]
    title: str | None = None
    if len(first) >= 2 and _is_title(first[0], first[1]):
        title, first = first[0], first[1:]
    header, row = first[0] if first else "", first[1] if len(first) > 1 else None
    separator, extra, used = ",", None, 3 if title is not None else 2
    for candidate in SEPARATORS:
        width = len(_cells(header, candidate))
        if width >= 2 and (row is None or not row.strip() or len(_cells(row, candidate)) == width):
            separator = candidate
            break
    else:
        # No separator splits the first row as the header: one empty cell more than the header
        # (its last empty one) is an extra the writer adds, not a column.
        for candidate in SEPARATORS:
            width = len(_cells(header, candidate))
            cells = _cells(row or "", candidate)
            empty = [i for i, c in enumerate(cells) if not c.strip()]
            if len(first) > 2:  # a second row one cell wider too: the extra cell is empty in both
                used = 3
                other = _cells(first[2], candidate)
                if len(other) == width + 1:
                    empty = [i for i in empty if not other[i].strip()]
            if width >= 2 and len(cells) == width + 1 and empty:
                separator, extra = candidate, empty[-1]
                break
    names = _cells(header, separator)
    after = names[extra - 1].strip() if extra is not None and 0 < extra <= len(names) else ""
    layout = Layout(separator, title, used, extra, after)
    if len(names) == 1 and row is not None and _DECIMAL_COMMA.fullmatch(row.strip()):
        # One column, its numbers written 0,92: a ',' here is a decimal comma, not a separator.
        raise _decimal_comma(source, layout, row.strip())
    if separator != "," and row is not None:
        comma = next((c.strip() for c in _cells(row, separator) if _DECIMAL_COMMA.fullmatch(c.strip())), None)
        if comma is not None:
            raise _decimal_comma(source, layout, comma)
    return layout


def _decimal_comma(source: str, layout: Layout, cell: str) -> HistoryError:
    return HistoryError(
        f"{source}: line {layout.header_line + 1}: {echo(cell, 40)} is a number with a decimal "
        f"comma; trainguard reads numbers with a '.' (write the log with to_csv(decimal='.'), or "
        f"convert it: a ';' between cells is fine)"
    )
