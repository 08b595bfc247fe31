"""Units: ncu's prefixed units to decimal SI, refusing bits and binary prefixes."""

import math

import pytest

from roofline.metrics.units import UnitError, parse_number, si_factor


@pytest.mark.parametrize(
    "unit, factor",
    [
        ("byte", 1),
        ("Kbyte", 1e3),
        ("Mbyte", 1e6),
        ("Gbyte", 1e9),
        ("Tbyte", 1e12),
        ("byte/s", 1),
        ("Gbyte/s", 1e9),
        ("Tbyte/second", 1e12),
        ("nsecond", 1e-9),
        ("usecond", 1e-6),
        ("msecond", 1e-3),
        ("second", 1),
        ("ns", 1e-9),
        ("hz", 1),
        ("Mhz", 1e6),
        ("Ghz", 1e9),
        ("cycle/nsecond", 1e9),
        ("cycle/usecond", 1e6),
        ("inst", 1),
        ("inst/cycle", 1),
        ("sector", 1),
        ("%", 1),
        ("", 1),
        # composite units (ncu 2026.1 wide exports): the numerator's prefix over the denominator's
        ("Kbyte/block", 1e3),
        ("byte/block", 1),
        ("Kbyte/cycle", 1e3),
        ("Kbyte/sector", 1e3),
        ("inst/warp", 1),
        ("warp/cycle", 1),
        ("sector/ns", 1e9),
        ("sector/us", 1e6),
        ("sector/ms", 1e3),
        ("%/Kbyte", 1e-3),
        ("%/register", 1),
        ("cluster", 1),
        ("branches", 1),
    ],
)
def test_si_factor(unit, factor):
    assert si_factor(unit) == pytest.approx(factor)


@pytest.mark.parametrize("unit", ["sector/ns", "cycle/nsecond", "Tbyte/s", "nsecond", "msecond", "%/Kbyte"])
def test_si_factor_is_the_exact_power_of_ten(unit):
    assert si_factor(unit) in {10.0**e for e in range(-12, 16)}


@pytest.mark.parametrize("unit", ["Gbit/s", "GiB/s", "Mibyte", "KiB", "Kibyte/block"])
def test_bits_and_binary_prefixes_are_refused(unit):
    with pytest.raises(UnitError, match="bits or binary"):
        si_factor(unit, "dram__bytes.sum")


def test_unknown_unit_names_metric():
    with pytest.raises(UnitError, match="unknown unit 'furlong' of metric 'x'"):
        si_factor("furlong", "x")


@pytest.mark.parametrize("unit", ["/s", "inst/", "byte//s", "byte/%", "none/s", "Msecond", "furlong/cycle"])
def test_malformed_composite_units_are_unknown(unit):
    with pytest.raises(UnitError, match="unknown unit"):
        si_factor(unit, "x")


@pytest.mark.parametrize("text, value", [("2,906,085.08", 2906085.08), ("n/a", math.nan), ("", math.nan), ("12", 12.0)])
def test_parse_number(text, value):
    result = parse_number(text)
    assert (math.isnan(result) and math.isnan(value)) or result == value
