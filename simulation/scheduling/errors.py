"""Errors of the scheduling simulator: bad input names its field (and, in a trace, its line)."""

from __future__ import annotations

__all__ = ["SchedulingInputError", "TraceError"]


class SchedulingInputError(ValueError):
    """An input the simulator cannot take: ``field`` is a dotted path (``"nodes[3].gpus"``).

    The REST layer turns it into a 400 on ``params.<field>`` without parsing the message.
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.reason = message


class TraceError(ValueError):
    """A trace file that cannot be read.

    ``line`` is 1-based (the header is line 1 of a CSV; for a JSON list, the
    1-based index of the record), ``field`` the column. A reader collects up to
    ``max_errors`` per-row errors and then raises one TraceError whose
    ``errors`` holds them all (each itself a TraceError), so a user fixes a
    file in one go; ``line``/``field`` of that summary are those of the first.
    """

    def __init__(
        self,
        message: str,
        *,
        line: int | None = None,
        field: str | None = None,
        errors: list[TraceError] | None = None,
    ) -> None:
        where = ""
        if line is not None:
            where = f"line {line}"
            if field:
                where += f", {field}"
            where += ": "
        super().__init__(where + message)
        self.line = line
        self.field = field
        self.reason = message
        self.errors: list[TraceError] = errors or []

    def to_dict(self) -> dict[str, object]:
        """Plain JSON: ``{"line", "field", "message"}`` (+ ``errors`` for a summary)."""
        out: dict[str, object] = {"line": self.line, "field": self.field, "message": self.reason}
        if self.errors:
            out["errors"] = [e.to_dict() for e in self.errors]
        return out
