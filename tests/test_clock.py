import re
from datetime import datetime, timedelta

import pytest

from tools import Registry
from tools.clock import current_time

ISO_WITH_OFFSET = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d")


def now(**arguments):
    return Registry([current_time]).call("current_time", arguments)


def test_default_is_utc_with_an_explicit_offset():
    result = now()
    assert result.ok
    assert ISO_WITH_OFFSET.fullmatch(result.text)
    assert result.text.endswith("+00:00")
    assert abs(datetime.fromisoformat(result.text) - datetime.now().astimezone()) < timedelta(seconds=5)


def test_named_zone_has_its_offset():
    result = now(timezone="Asia/Kolkata")
    assert ISO_WITH_OFFSET.fullmatch(result.text)
    assert result.text.endswith("+05:30")


@pytest.mark.parametrize("zone", ["Mars/Base", "../etc", "/etc/passwd", "", "Europe"])
def test_unknown_zone_is_an_error(zone):
    assert now(timezone=zone).text == f"error: unknown timezone {zone!r} (use an IANA name like Europe/Paris or UTC)"
