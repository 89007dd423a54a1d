"""Text cut to fit where it is shown: a message, a line of progress, a description."""

from __future__ import annotations

ELLIPSIS = "…"


def shorten(text: str, limit: int) -> str:
    """``text`` as it is when it has at most ``limit`` characters; else its first ``limit - 1`` and an ellipsis."""
    return text if len(text) <= limit else text[:max(limit - 1, 0)] + ELLIPSIS
