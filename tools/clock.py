"""The current date and time."""

from __future__ import annotations

from datetime import datetime, timezone as dt_timezone
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .registry import ToolError, tool


@tool(description="Get the current date and time (ISO 8601 with UTC offset) in an IANA timezone like Europe/Paris.")
def current_time(timezone: str = "UTC") -> str:
    if timezone == "UTC":
        zone = dt_timezone.utc
    else:
        try:
            zone = ZoneInfo(timezone)
        except (ZoneInfoNotFoundError, ValueError, OSError):
            raise ToolError(f"unknown timezone {timezone!r} (use an IANA name like Europe/Paris or UTC)") from None
    return datetime.now(zone).isoformat(timespec="seconds")
