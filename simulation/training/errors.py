"""The one error type of the training model: a field and a reason.

Why: the REST layer and the CLI turn bad input into a 400 on
``params.<field>`` or one readable line, without parsing messages — the same
shape as :class:`simulation.topology.graph.TopologyError`.
"""

from __future__ import annotations

__all__ = ["TrainingInputError"]


class TrainingInputError(ValueError):
    """Bad training input: ``field`` is a dotted path (``tp``, ``model.heads``).

    >>> err = TrainingInputError("tp", "must divide the 96 heads")
    >>> (err.field, err.reason, str(err))
    ('tp', 'must divide the 96 heads', 'tp: must divide the 96 heads')
    """

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason
