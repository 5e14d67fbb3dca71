"""Plain-text tables for the set-up tools' output (aligned columns, a rule under the header)."""

from __future__ import annotations

from collections.abc import Sequence


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]],
                 right: Sequence[int] = ()) -> str:
    """``headers`` and ``rows`` as aligned columns; columns listed in ``right`` (indices)
    are right-aligned (numbers)."""
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in r]
                                           for r in rows]
    n = len(headers)
    for r in cells:
        if len(r) != n:
            raise ValueError(f"a row has {len(r)} cells, the header {n}")
    widths = [max(len(r[i]) for r in cells) for i in range(n)]

    def line(r: list[str]) -> str:
        out = [r[i].rjust(widths[i]) if i in right else r[i].ljust(widths[i]) for i in range(n)]
        return "  ".join(out).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(cells[0]), rule, *(line(r) for r in cells[1:])])


__all__ = ["format_table"]
