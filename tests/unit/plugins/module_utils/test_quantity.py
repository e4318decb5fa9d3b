"""Tests for quantity.py, transcribed from upstream tables.

Source: kubernetes/kubernetes staging/src/k8s.io/apimachinery/pkg/api/resource/quantity_test.go
(TestParseQuantityString, TestQuantityParse, TestQuantityCmp, TestQuantityRoundUp-free parts,
TestAdd, TestSub, TestMul, TestQuantityAsApproximateFloat64, TestStringQuantityAsApproximateFloat64,
TestParseQuantity, TestQuantityString, TestQuantityParseEmit).
"""

from __future__ import annotations

import math

import pytest

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.quantity import (
    BINARY_SI,
    DECIMAL_EXPONENT,
    DECIMAL_SI,
    Quantity,
    QuantityError,
    _go_pow10,
    _parse_quantity_string,
    is_quantity,
    parse_quantity,
)

MOST_POSITIVE = (1 << 63) - 1
MOST_NEGATIVE = -(1 << 63)


def dec_q(mantissa: int, exponent: int, fmt: str = DECIMAL_SI) -> Quantity:
    """decQuantity(i, exponent, format): an inf.Dec quantity of mantissa*10**exponent."""
    return Quantity(mantissa, -exponent, fmt, dec=True)


def int_q(value: int, scale: int, fmt: str = DECIMAL_SI) -> Quantity:
    """intQuantity(i, exponent, format): an int64Amount quantity."""
    return Quantity(value, scale, fmt)


# TestParseQuantityString
@pytest.mark.parametrize(
    ("text", "positive", "value", "num", "denom", "suffix"),
    [
        ("0.025Ti", True, "0.025", "0", "025", "Ti"),
        ("1.025Ti", True, "1.025", "1", "025", "Ti"),
        ("-1.025Ti", False, "-1.025", "1", "025", "Ti"),
        (".", True, ".", "0", "", ""),
        ("-.", False, "-.", "0", "", ""),
        ("1E-3", True, "1", "1", "", "E-3"),
    ],
)
def test_parse_quantity_string(text, positive, value, num, denom, suffix):
    assert _parse_quantity_string(text) == (positive, value, num, denom, suffix)


MAX_ALLOWED = Quantity(MOST_POSITIVE, 0, BINARY_SI, dec=True)

# TestQuantityParse: (input, expected value, expected format)
PARSE_TABLE = [
    ("0", dec_q(0, 0), DECIMAL_SI),
    ("0n", dec_q(0, 0), DECIMAL_SI),
    ("0u", dec_q(0, 0), DECIMAL_SI),
    ("0m", dec_q(0, 0), DECIMAL_SI),
    ("0Ki", dec_q(0, 0), BINARY_SI),
    ("0k", dec_q(0, 0), DECIMAL_SI),
    ("0Mi", dec_q(0, 0), BINARY_SI),
    ("0M", dec_q(0, 0), DECIMAL_SI),
    ("0Gi", dec_q(0, 0), BINARY_SI),
    ("0G", dec_q(0, 0), DECIMAL_SI),
    ("0Ti", dec_q(0, 0), BINARY_SI),
    ("0T", dec_q(0, 0), DECIMAL_SI),
    ("1", dec_q(1, 0), DECIMAL_SI),
    ("1Ki", dec_q(1024, 0), BINARY_SI),
    ("8Ki", dec_q(8 * 1024, 0), BINARY_SI),
    ("7Mi", dec_q(7 * 1024**2, 0), BINARY_SI),
    ("6Gi", dec_q(6 * 1024**3, 0), BINARY_SI),
    ("5Ti", dec_q(5 * 1024**4, 0), BINARY_SI),
    ("4Pi", dec_q(4 * 1024**5, 0), BINARY_SI),
    ("3Ei", dec_q(3 * 1024**6, 0), BINARY_SI),
    ("10Ti", dec_q(10 * 1024**4, 0), BINARY_SI),
    ("100Ti", dec_q(100 * 1024**4, 0), BINARY_SI),
    ("5n", dec_q(5, -9), DECIMAL_SI),
    ("4u", dec_q(4, -6), DECIMAL_SI),
    ("3m", dec_q(3, -3), DECIMAL_SI),
    ("9", dec_q(9, 0), DECIMAL_SI),
    ("8k", dec_q(8, 3), DECIMAL_SI),
    ("50k", dec_q(5, 4), DECIMAL_SI),
    ("7M", dec_q(7, 6), DECIMAL_SI),
    ("6G", dec_q(6, 9), DECIMAL_SI),
    ("5T", dec_q(5, 12), DECIMAL_SI),
    ("40T", dec_q(4, 13), DECIMAL_SI),
    ("300T", dec_q(3, 14), DECIMAL_SI),
    ("2P", dec_q(2, 15), DECIMAL_SI),
    ("1E", dec_q(1, 18), DECIMAL_SI),
    ("1E-3", dec_q(1, -3), DECIMAL_EXPONENT),
    ("1e3", dec_q(1, 3), DECIMAL_EXPONENT),
    ("1E6", dec_q(1, 6), DECIMAL_EXPONENT),
    ("1e9", dec_q(1, 9), DECIMAL_EXPONENT),
    ("1E12", dec_q(1, 12), DECIMAL_EXPONENT),
    ("1e15", dec_q(1, 15), DECIMAL_EXPONENT),
    ("1E18", dec_q(1, 18), DECIMAL_EXPONENT),
    ("1e14", dec_q(1, 14), DECIMAL_EXPONENT),
    ("1e13", dec_q(1, 13), DECIMAL_EXPONENT),
    ("100.035k", dec_q(100035, 0), DECIMAL_SI),
    ("0.001", dec_q(1, -3), DECIMAL_SI),
    ("0.0005k", dec_q(5, -1), DECIMAL_SI),
    ("0.005", dec_q(5, -3), DECIMAL_SI),
    ("0.05", dec_q(5, -2), DECIMAL_SI),
    ("0.5", dec_q(5, -1), DECIMAL_SI),
    ("0.00050k", dec_q(5, -1), DECIMAL_SI),
    ("0.00500", dec_q(5, -3), DECIMAL_SI),
    ("0.05000", dec_q(5, -2), DECIMAL_SI),
    ("0.50000", dec_q(5, -1), DECIMAL_SI),
    ("0.5e0", dec_q(5, -1), DECIMAL_EXPONENT),
    ("0.5e-1", dec_q(5, -2), DECIMAL_EXPONENT),
    ("0.5e-2", dec_q(5, -3), DECIMAL_EXPONENT),
    ("10.035M", dec_q(10035, 3), DECIMAL_SI),
    ("1.2e3", dec_q(12, 2), DECIMAL_EXPONENT),
    ("1.3E+6", dec_q(13, 5), DECIMAL_EXPONENT),
    ("1.40e9", dec_q(14, 8), DECIMAL_EXPONENT),
    ("1.53E12", dec_q(153, 10), DECIMAL_EXPONENT),
    ("1.6e15", dec_q(16, 14), DECIMAL_EXPONENT),
    ("1.7E18", dec_q(17, 17), DECIMAL_EXPONENT),
    ("9.01", dec_q(901, -2), DECIMAL_SI),
    ("8.1k", dec_q(81, 2), DECIMAL_SI),
    ("7.123456M", dec_q(7123456, 0), DECIMAL_SI),
    ("6.987654321G", dec_q(6987654321, 0), DECIMAL_SI),
    ("5.444T", dec_q(5444, 9), DECIMAL_SI),
    ("40.1T", dec_q(401, 11), DECIMAL_SI),
    ("300.2T", dec_q(3002, 11), DECIMAL_SI),
    ("2.5P", dec_q(25, 14), DECIMAL_SI),
    ("1.01E", dec_q(101, 16), DECIMAL_SI),
    # Things that saturate/round
    ("3.001n", dec_q(4, -9), DECIMAL_SI),
    ("1.1E-9", dec_q(2, -9), DECIMAL_EXPONENT),
    ("0.0000000001", dec_q(1, -9), DECIMAL_SI),
    ("0.0000000005", dec_q(1, -9), DECIMAL_SI),
    ("0.00000000050", dec_q(1, -9), DECIMAL_SI),
    ("0.5e-9", dec_q(1, -9), DECIMAL_EXPONENT),
    ("0.9n", dec_q(1, -9), DECIMAL_SI),
    ("0.00000012345", dec_q(124, -9), DECIMAL_SI),
    ("0.00000012354", dec_q(124, -9), DECIMAL_SI),
    ("9Ei", MAX_ALLOWED, BINARY_SI),
    ("9223372036854775807Ki", MAX_ALLOWED, BINARY_SI),
    ("12E", dec_q(12, 18), DECIMAL_SI),
    # fractional binary
    ("100.035Ki", dec_q(10243584, -2), BINARY_SI),
    ("0.5Mi", dec_q(512 * 1024, 0), BINARY_SI),
    ("0.05Gi", dec_q(536870912, -1), BINARY_SI),
    ("0.025Ti", dec_q(274877906944, -1), BINARY_SI),
    # Things written by trolls
    ("0.000000000001Ki", dec_q(2, -9), DECIMAL_SI),
    (".001", dec_q(1, -3), DECIMAL_SI),
    (".0001k", dec_q(100, -3), DECIMAL_SI),
    ("1.", dec_q(1, 0), DECIMAL_SI),
    ("1.G", dec_q(1, 9), DECIMAL_SI),
]


@pytest.mark.parametrize(("text", "expect", "fmt"), PARSE_TABLE, ids=[row[0] for row in PARSE_TABLE])
def test_quantity_parse(text, expect, fmt):
    got = parse_quantity(text)
    assert got.cmp(expect) == 0, f"{text}: got {got}, want {expect}"
    assert got.format == fmt
    # upstream also parses every entry with an explicit '+' and negated with '-'
    assert parse_quantity("+" + text).cmp(expect) == 0
    assert parse_quantity("+" + text).format == fmt
    neg = parse_quantity("-" + text)
    assert neg.cmp(expect.neg()) == 0
    assert neg.format == fmt


INVALID = [
    "1.1.M",
    "1+1.0M",
    "0.1mi",
    "0.1am",
    "aoeu",
    ".5i",
    "1i",
    "-3.01i",
    "-3.01e-",
    "1e4294967297",  # exponent outside int32 is rejected
    " 1",  # surrounding whitespace is forbidden
    "1 ",
    "",
    "Non-Numeric",  # TestQuantityParseNonNumericPanic
]


@pytest.mark.parametrize("text", INVALID)
def test_quantity_parse_invalid(text):
    with pytest.raises(QuantityError):
        parse_quantity(text)
    assert not is_quantity(text)


def test_parse_errors_are_value_errors_with_upstream_messages():
    with pytest.raises(ValueError, match="quantities must match the regular expression"):
        parse_quantity("10Mo")
    with pytest.raises(ValueError, match="unable to parse quantity's suffix"):
        parse_quantity("10Mm")
    with pytest.raises(GpufleetError):
        parse_quantity("aoeu")


# TestInterpretExponentInt32Bounds, through the parser
@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("1e14", True),
        ("0E2147483647", True),
        ("0E-2147483647", True),
        ("1E2147483648", False),
        ("1E-2147483648", False),
    ],
)
def test_exponent_int32_bounds(text, ok):
    assert is_quantity(text) is ok


# TestQuantityCmp
@pytest.mark.parametrize(
    ("x", "y", "expect"), [("0", "0", 0), ("100m", "50m", 1), ("50m", "100m", -1), ("10000T", "100Gi", 1)]
)
def test_quantity_cmp(x, y, expect):
    assert parse_quantity(x).cmp(parse_quantity(y)) == expect


# TestQuantityCmpInt64AndDec
@pytest.mark.parametrize(
    ("a", "b", "cmp"),
    [
        (int_q(901, -2), int_q(901, -2), 0),
        (int_q(90, -1), int_q(901, -2), -1),
        (int_q(901, -2), int_q(900, -2), 1),
        (int_q(0, 0), int_q(0, 0), 0),
        (int_q(0, 1), int_q(0, -1), 0),
        (int_q(800, -3), int_q(1, 0), -1),
        (int_q(800, -3), int_q(79, -2), 1),
        (int_q(MOST_POSITIVE, 0), int_q(1, -1), 1),
        (int_q(MOST_POSITIVE, 1), int_q(1, 0), 1),
        (int_q(MOST_POSITIVE, 1), int_q(1, 1), 1),
        (int_q(MOST_POSITIVE, -16), int_q(1, 3), -1),
        (int_q(MOST_NEGATIVE, 0), int_q(0, 0), -1),
        (int_q(MOST_NEGATIVE, -18), int_q(-1, 0), -1),
        (int_q(MOST_NEGATIVE, -19), int_q(-1, 0), 1),
        (int_q(10**18, -17), int_q(1, 1), 0),
        (int_q(10**18, -17), int_q(-10, 0), 1),
        (int_q(-(10**18), -17), int_q(-10, 0), 0),
        (int_q(10**18 + 1, -17), int_q(1, 1), 1),
        (int_q(10**18 - 1, -17), int_q(1, 1), -1),
    ],
)
def test_quantity_cmp_int64_and_dec(a, b, cmp):
    assert a.cmp(b) == cmp
    assert b.cmp(a) == -cmp
    a_dec = Quantity(*_as_dec(a), a.format, dec=True)
    assert a_dec.cmp(b) == cmp
    assert b.cmp(a_dec) == -cmp


def _as_dec(q: Quantity) -> tuple[int, int]:
    return q._as_dec()


# TestAdd / TestSub (DecimalSI zero is Quantity{})
@pytest.mark.parametrize(
    ("a", "b", "expect"),
    [
        (dec_q(10, 0), dec_q(1, 1), dec_q(20, 0)),
        (dec_q(10, 0), dec_q(1, 0, BINARY_SI), dec_q(11, 0)),
        (dec_q(10, 0, BINARY_SI), dec_q(1, 0), dec_q(11, 0, BINARY_SI)),
        (Quantity(), dec_q(50, 0), dec_q(50, 0)),
        (dec_q(50, 0), Quantity(), dec_q(50, 0)),
        (Quantity(), Quantity(), dec_q(0, 0)),
    ],
)
def test_add(a, b, expect):
    assert a.add(b).cmp(expect) == 0


@pytest.mark.parametrize(
    ("a", "b", "expect"),
    [
        (dec_q(10, 0), dec_q(1, 1), dec_q(0, 0)),
        (dec_q(10, 0), dec_q(1, 0, BINARY_SI), dec_q(9, 0)),
        (dec_q(10, 0, BINARY_SI), dec_q(1, 0), dec_q(9, 0, BINARY_SI)),
        (Quantity(), dec_q(50, 0), dec_q(-50, 0)),
        (dec_q(50, 0), Quantity(), dec_q(50, 0)),
        (Quantity(), Quantity(), dec_q(0, 0)),
    ],
)
def test_sub(a, b, expect):
    assert a.sub(b).cmp(expect) == 0


def test_sub_most_negative_switches_to_decimal():
    # TestNegAndSubAtMostNegative / TestSubMostNegativeCrossScale
    got = Quantity().sub(int_q(MOST_NEGATIVE, 0))
    assert got.as_int64() == (0, False)
    assert got.cmp(parse_quantity("9223372036854775808")) == 0
    got = int_q(1, 1).sub(int_q(MOST_NEGATIVE, 0))
    assert str(got) == "9223372036854775818"
    assert not got.is_integer()
    neighbor = Quantity().sub(int_q(MOST_NEGATIVE + 1, 0))
    assert neighbor.as_int64() == (MOST_POSITIVE, True)


# TestMul: (a, b, expected); the "ok" column maps to staying on the int64 fast path
@pytest.mark.parametrize(
    ("a", "b", "expect"),
    [
        (dec_q(10, 0), 10, dec_q(100, 0)),
        (dec_q(10, 0), 1, dec_q(10, 0)),
        (dec_q(10, 0, BINARY_SI), 1, dec_q(10, 0, BINARY_SI)),
        (Quantity(), 50, dec_q(0, 0)),
        (dec_q(50, 0), 0, dec_q(0, 0)),
        (dec_q(10, 0), -10, dec_q(-100, 0)),
        (dec_q(-50, 0), -50, dec_q(2500, 0)),
        (dec_q(MOST_POSITIVE, 0), 2, Quantity(MOST_POSITIVE * 2, 0, dec=True)),
        (dec_q(MOST_POSITIVE, 0), 10, dec_q(MOST_POSITIVE, 1)),
        (dec_q(MOST_NEGATIVE, 0), -1, Quantity(MOST_POSITIVE + 1, 0, dec=True)),
        (dec_q(MOST_NEGATIVE, 0), -10, Quantity((MOST_POSITIVE + 1) * 10, 0, dec=True)),
    ],
)
def test_mul(a, b, expect):
    assert a.mul(b).cmp(expect) == 0


@pytest.mark.parametrize(
    ("a", "b", "fast"),
    [
        (int_q(10, 0), 10, True),
        (int_q(MOST_POSITIVE, 0), 1, True),
        (int_q(MOST_POSITIVE // 2, 0), 2, True),
        (int_q(MOST_POSITIVE, 0), 2, False),
        (int_q(MOST_NEGATIVE, 0), -1, False),
        (int_q(1500, -3), 2, True),  # 3000m stays exact at its scale
        (int_q(1, -3), 3, False),  # upstream leaves the int64 path when the scaled result is inexact
    ],
)
def test_mul_representation(a, b, fast):
    assert a.mul(b).is_decimal is not fast


# TestQuantityAsApproximateFloat64
@pytest.mark.parametrize(
    ("q", "out"),
    [
        (dec_q(0, 0), 0.0),
        (dec_q(0, 0, DECIMAL_EXPONENT), 0.0),
        (dec_q(0, 0, BINARY_SI), 0.0),
        (dec_q(0, 500), 0.0),
        (int_q(0, 500), 0.0),
        (dec_q(0, -500), 0.0),
        (int_q(0, -500), 0.0),
        (dec_q(1, 0), 1.0),
        (dec_q(1024, 0, BINARY_SI), 1024.0),
        (dec_q(8 * 1024, 0, BINARY_SI), 8 * 1024.0),
        (dec_q(7 * 1024 * 1024, 0), 7 * 1024 * 1024.0),
        (dec_q(7 * 1024 * 1024, 1), (7 * 1024 * 1024) * 10.0),
        (dec_q(7 * 1024 * 1024, 4), (7 * 1024 * 1024) * 10000.0),
        (dec_q(7 * 1024 * 1024, 8), (7 * 1024 * 1024) * 100000000.0),
        (dec_q(7 * 1024 * 1024, -1), (7 * 1024 * 1024) * _go_pow10(-1)),
        (dec_q(7 * 1024 * 1024, -8), (7 * 1024 * 1024) / 100000000.0),
        (Quantity(MOST_POSITIVE, 0, DECIMAL_SI, dec=True), float(MOST_POSITIVE)),
        (MAX_ALLOWED, float(MOST_POSITIVE)),
        (dec_q(12, 18), 1.2e19),
        (dec_q(12, 500), math.inf),
        (dec_q(-12, 500), -math.inf),
    ],
)
def test_as_approximate_float64(q, out):
    assert q.as_approximate_float() == out


# TestStringQuantityAsApproximateFloat64
@pytest.mark.parametrize(
    ("text", "out"), [("2Ki", 2048.0), ("1.1Ki", 1126.4), ("1Mi", 1.048576e06), ("2Gi", 2.147483648e09)]
)
def test_string_as_approximate_float64(text, out):
    assert parse_quantity(text).as_approximate_float() == out


# TestParseQuantity: AsInt64 availability and the decimal value (None = not representable as int64)
@pytest.mark.parametrize(
    ("text", "as_int64", "canonical"),
    [
        ("-999999999999999999", -999999999999999999, None),
        ("999999999999999999", 999999999999999999, None),
        ("-999999999999999999.0", None, "-999999999999999999"),
        ("999999999999999999.0", None, "999999999999999999"),
        ("-999999999999999999.1", None, "-999999999999999999100m"),
        ("999999999999999999.1", None, "999999999999999999100m"),
        ("-9999999999999999999", None, None),
        ("9999999999999999999", None, None),
        ("-1E", -(10**18), None),
        ("1E", 10**18, None),
        ("-1000000000000000000", None, "-1E"),
        ("1000000000000000000", None, "1E"),
        ("-1.0E", -(10**18), "-1E"),
        ("1.0E", 10**18, "1E"),
        ("9223372036854775807000m", None, "9223372036854775807"),
        ("-1.0000000000000000001E", None, "-1000000000000000000100m"),
        ("1.000000000000000001E", None, "1000000000000000001"),
        ("-10E", None, None),
        ("10E", None, None),
        ("10000000000000000000", None, "10E"),
        ("-10.0E", None, "-10E"),
        ("10000000000000000000000m", None, "10E"),
        ("10.000000000000000001E", None, "10000000000000000001"),
        ("-9223372036854775809", None, None),
        ("9223372036854775806", None, None),
        ("-9223372036854775808", None, None),
        ("9223372036854775807", None, None),
        ("9223372036854775807.1", None, "9223372036854775807100m"),
        ("9223372036854775808", None, None),
    ],
)
def test_parse_quantity_int64_and_canonical(text, as_int64, canonical):
    q = parse_quantity(text)
    if as_int64 is None:
        assert q.as_int64()[1] is False
    else:
        assert q.as_int64() == (as_int64, True)
    assert str(q) == (canonical or text)


# TestQuantityString (canonical rendering) and TestQuantityParseEmit
@pytest.mark.parametrize(
    ("q", "expect"),
    [
        (dec_q(1024**3, 0, BINARY_SI), "1Gi"),
        (dec_q(300 * 1024**2, 0, BINARY_SI), "300Mi"),
        (dec_q(6 * 1024, 0, BINARY_SI), "6Ki"),
        (dec_q(1001 * 1024**3, 0, BINARY_SI), "1001Gi"),
        (dec_q(1024**4, 0, BINARY_SI), "1Ti"),
        (dec_q(5, 0, BINARY_SI), "5"),
        (dec_q(500, -3, BINARY_SI), "500m"),
        (dec_q(1, 9), "1G"),
        (dec_q(1000, 6), "1G"),
        (dec_q(1000000, 3), "1G"),
        (dec_q(1000000000, 0), "1G"),
        (dec_q(1, -3), "1m"),
        (dec_q(80, -3), "80m"),
        (dec_q(1080, -3), "1080m"),
        (dec_q(108, -2), "1080m"),
        (dec_q(10800, -4), "1080m"),
        (dec_q(300, 6), "300M"),
        (dec_q(1, 12), "1T"),
        (dec_q(1, 18), "1E"),
        (dec_q(1234567, 6), "1234567M"),
        (dec_q(1234567, -3, BINARY_SI), "1234567m"),
        (dec_q(3, 3), "3k"),
        (dec_q(1025, 0, BINARY_SI), "1025"),
        (dec_q(0, 0), "0"),
        (dec_q(0, 0, BINARY_SI), "0"),
        (dec_q(1, 9, DECIMAL_EXPONENT), "1e9"),
        (dec_q(1, -3, DECIMAL_EXPONENT), "1e-3"),
        (dec_q(1, -9, DECIMAL_EXPONENT), "1e-9"),
        (dec_q(80, -3, DECIMAL_EXPONENT), "80e-3"),
        (dec_q(300, 6, DECIMAL_EXPONENT), "300e6"),
        (dec_q(1, 12, DECIMAL_EXPONENT), "1e12"),
        (dec_q(1, 3, DECIMAL_EXPONENT), "1e3"),
        (dec_q(3, 3, DECIMAL_EXPONENT), "3e3"),
        (dec_q(0, 0, DECIMAL_EXPONENT), "0"),
        (dec_q(1, -9), "1n"),
        (dec_q(80, -9), "80n"),
        (dec_q(1080, -9), "1080n"),
        (dec_q(108, -8), "1080n"),
        (dec_q(10800, -10), "1080n"),
        (dec_q(1, -6), "1u"),
        (dec_q(80, -6), "80u"),
        (dec_q(1080, -6), "1080u"),
        (parse_quantity("1Ki"), "1Ki"),
        (parse_quantity("1024Mi"), "1Gi"),
        (parse_quantity("1000M"), "1G"),
        (parse_quantity(".001Ki"), "1024m"),
        (parse_quantity(".000001Ki"), "1024u"),
        (parse_quantity(".000000001Ki"), "1024n"),
        (parse_quantity(".000000000001Ki"), "2n"),
    ],
)
def test_quantity_string(q, expect):
    assert str(q) == expect
    if q.sign():
        assert str(q.neg()) == "-" + expect


@pytest.mark.parametrize(
    ("text", "expect"),
    [("10Ei", MOST_POSITIVE), ("8Ei", MOST_POSITIVE), ("-10Ei", -MOST_POSITIVE), ("7Ei", 7 * 2**60)],
)
def test_binary_si_saturates_like_resource_quantity(text, expect):
    """Lesson: large binary suffixes must saturate at 2^63-1 (the kubernetes client does not)."""
    assert parse_quantity(text).cmp(Quantity(expect, 0)) == 0
    assert parse_quantity("10Ei") == parse_quantity("9Ei")


def test_python_protocol():
    assert parse_quantity("1Gi") == parse_quantity("1024Mi")
    assert parse_quantity("1G") < parse_quantity("1Gi")
    assert sorted([parse_quantity("2"), parse_quantity("1500m")]) == [parse_quantity("1.5"), parse_quantity("2")]
    assert hash(parse_quantity("1k")) == hash(parse_quantity("1000"))
    assert repr(parse_quantity("80Gi")) == "Quantity('80Gi')"
    assert parse_quantity("80Gi") is parse_quantity("80Gi")  # cached, immutable
    with pytest.raises(QuantityError):
        parse_quantity(80)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "is_int"),
    [("1000m", False), ("1Ti", True), ("1Pi", False), ("100Ti", False), ("50.703k", True), ("1", True)],
)
def test_representation_drives_is_integer(text, is_int):
    """resource.Quantity keeps a scaled int64 only on its fast path; AsInt64 fails for the rest."""
    assert parse_quantity(text).is_integer() is is_int
