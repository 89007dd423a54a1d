"""The current date and time."""

from __future__ import annotations

import re
from datetime import datetime, timezone as dt_timezone, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .registry import ToolError, tool
from .text import shorten

# IANA names like Europe/Paris, America/Port-au-Prince or Etc/GMT+5; anything else is not even looked up.
_ZONE_NAME = re.compile(r"[A-Za-z0-9_+-]{1,32}(/[A-Za-z0-9_+-]{1,32}){0,3}")


@tool(description="Get the current date and time (ISO 8601 with UTC offset) in an IANA timezone like Europe/Paris.",
      hint="Use current_time for today's date or the time; never guess them.")
def current_time(timezone: str = "UTC") -> str:
    return datetime.now(_zone(timezone)).isoformat(timespec="seconds")


def _zone(name: str) -> tzinfo:
    """The zone called `name`, from the system database or, where the system has none, the tzdata package."""
    if name == "UTC":
        return dt_timezone.utc
    if _ZONE_NAME.fullmatch(name):
        try:
            return ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError, OSError):
            pass
    raise ToolError(f"unknown timezone {shorten(name, 61)!r} (use an IANA name like Europe/Paris or UTC)")
