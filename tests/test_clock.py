import os
import re
import subprocess
import sys
import zoneinfo
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from agent.tools import Registry
from agent.tools.clock import current_time

ROOT = Path(__file__).resolve().parent.parent
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


@pytest.mark.parametrize(
    "zone",
    [
        "../../etc/passwd",
        "Europe/Paris\0",
        "\0",
        "Europe/__init__.py",
        "zone.tab",
        "Europe/../Europe/Paris",
        "Europe/\udcff",
        "UTC\n",
    ],
)
def test_hostile_zone_names_are_unknown(zone):
    assert now(timezone=zone).text == f"error: unknown timezone {zone!r} (use an IANA name like Europe/Paris or UTC)"


def test_a_very_long_zone_name_is_unknown_and_shown_shortened():
    text = now(timezone="Europe/" + "x" * 5000).text
    shown = "Europe/" + "x" * 53 + "…"
    assert text == f"error: unknown timezone {shown!r} (use an IANA name like Europe/Paris or UTC)"


@pytest.mark.parametrize(
    "zone", ["America/Port-au-Prince", "America/Argentina/Buenos_Aires", "Etc/GMT+5", "Europe/Paris"]
)
def test_real_zone_names_of_every_shape(zone):
    assert ISO_WITH_OFFSET.fullmatch(now(timezone=zone).text)


def test_works_without_a_system_timezone_database(tmp_path):
    """zoneinfo falls back to the tzdata package (a core dependency) where the system has no database."""
    script = (
        "import zoneinfo\n"
        "from tools import Registry\n"
        "from tools.clock import current_time\n"
        "assert zoneinfo.TZPATH == (%r,), zoneinfo.TZPATH\n"
        "registry = Registry([current_time])\n"
        "print(registry.call('current_time', {'timezone': 'Europe/Paris'}).text)\n"
        "print(registry.call('current_time', {'timezone': 'Mars/Base'}).text)\n"
    ) % str(tmp_path)
    environment = {**os.environ, "PYTHONTZPATH": str(tmp_path), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", script], env=environment, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    paris, mars = done.stdout.splitlines()
    assert ISO_WITH_OFFSET.fullmatch(paris) and paris.endswith(("+01:00", "+02:00"))
    assert mars == "error: unknown timezone 'Mars/Base' (use an IANA name like Europe/Paris or UTC)"


@pytest.fixture
def tzdata_only():
    """No system database in this process: zoneinfo reads only the tzdata package; restored afterwards."""
    zoneinfo.reset_tzpath([])
    zoneinfo.ZoneInfo.clear_cache()
    yield
    zoneinfo.reset_tzpath()
    zoneinfo.ZoneInfo.clear_cache()


@settings(max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(st.text(max_size=80), st.sampled_from(["Europe", "Europe/", "tzdata", "zoneinfo/UTC", "__init__"])))
def test_any_name_gives_a_time_or_a_clear_error_from_tzdata_alone(tzdata_only, zone):
    assert zoneinfo.TZPATH == ()
    result = now(timezone=zone)
    if result.ok:
        assert ISO_WITH_OFFSET.fullmatch(result.text)
    else:
        assert result.text.startswith("error: unknown timezone ")
