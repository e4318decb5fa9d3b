"""Tests for semver.py.

Sources (tables transcribed):
- kubernetes/kubernetes staging/src/k8s.io/apiserver/pkg/cel/library/semver_test.go (TestSemver: isSemver
  with and without normalize, parse errors, comparisons, major/minor/patch) and semverlib.go normalizeAndParse;
- github.com/blang/semver/v4 semver_test.go (formatTests/compareTests/wrongformatTests), the parser
  Kubernetes uses for semver() and DRA version attributes.
"""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.semver import (
    SemverError,
    Version,
    is_semver,
    parse_semver,
)


# apiserver semver_test.go: isSemver(...) results
@pytest.mark.parametrize(
    ("text", "normalize", "ok"),
    [
        ("1.2.3-beta.1+build.1", False, True),
        ("", False, False),
        ("v1.0.0", False, False),
        (" 1.0.0", False, False),
        ("1. 0.0", False, False),
        ("1.0.0 ", False, False),
        ("01.01.01", False, False),
        ("1", False, False),
        ("1.1", False, False),
        ("v1.0", False, False),
        ("", True, False),
        (" 1.0.0", True, False),
        ("1. 0.0", True, False),
        ("1.0.0 ", True, False),
        ("v1.0.0", True, True),
        ("01.01.01", True, True),
        ("1", True, True),
        ("1.1", True, True),
        ("v1.0", True, True),
    ],
)
def test_is_semver(text, normalize, ok):
    assert is_semver(text, normalize) is ok


def test_parse_error_message_matches_upstream():
    with pytest.raises(SemverError, match=r"No Major\.Minor\.Patch elements found"):
        parse_semver("v1.0")
    with pytest.raises(ValueError):
        parse_semver("1.0.0.0-")
    with pytest.raises(GpufleetError):
        parse_semver("x")


def test_normalize():
    assert parse_semver("v01.01", normalize=True) == parse_semver("1.1.0")
    assert str(parse_semver("01.01.01", normalize=True)) == "1.1.1"
    assert str(parse_semver("v1", normalize=True)) == "1.0.0"
    with pytest.raises(SemverError, match="short version cannot contain PreRelease/Build meta data"):
        parse_semver("1.0-alpha", normalize=True)


# blang/semver formatTests + valid parse inputs
@pytest.mark.parametrize(
    "text",
    [
        "1.2.3",
        "0.0.0",
        "0.0.0-alpha",
        "1.2.3-alpha.1",
        "1.2.3-alpha.b-eta",
        "1.2.3+build",
        "1.2.3+build.123",
        "1.2.3-alpha.1+build.123",
        "1.2.3-beta-1",
        "1.2.3-0a.alpha",
        "18446744073709551615.0.0",
    ],
)
def test_valid_round_trip(text):
    assert str(parse_semver(text)) == text


# blang/semver wrongformatTests (plus uint64 overflow)
@pytest.mark.parametrize(
    "text",
    [
        "",
        ".",
        "1.",
        ".1",
        "a.b.c",
        "1.a.b",
        "1.1.a",
        "1.a.1",
        "a.1.1",
        "..",
        "1..",
        "1.1.",
        "1..1",
        "1.1.+123",
        "1.1.-beta",
        "-1.1.1",
        "1.-1.1",
        "1.1.-1",
        "01.1.1",
        "1.01.1",
        "1.1.01",
        "1.1.1-",
        "1.1.1-01",
        "1.1.1-beta..1",
        "1.1.1-beta_1",
        "1.1.1+",
        "1.1.1+build..1",
        "1.1.1+build_1",
        "18446744073709551616.0.0",
    ],
)
def test_wrong_format(text):
    assert not is_semver(text)
    with pytest.raises(SemverError):
        parse_semver(text)


# blang/semver compareTests (semver.org precedence; build metadata ignored)
@pytest.mark.parametrize(
    ("a", "b", "result"),
    [
        ("1.0.0", "1.0.0", 0),
        ("2.0.0", "1.0.0", 1),
        ("0.1.0", "0.1.0", 0),
        ("0.2.0", "0.1.0", 1),
        ("0.0.1", "0.0.1", 0),
        ("0.0.2", "0.0.1", 1),
        ("1.2.3", "1.2.3", 0),
        ("2.2.4", "1.2.4", 1),
        ("1.3.3", "1.2.3", 1),
        ("1.2.4", "1.2.3", 1),
        ("1.0.0", "2.0.0", -1),
        ("2.0.0", "2.1.0", -1),
        ("2.1.0", "2.1.1", -1),
        ("1.0.0-alpha", "1.0.0-alpha.1", -1),
        ("1.0.0-alpha.1", "1.0.0-alpha.beta", -1),
        ("1.0.0-alpha.beta", "1.0.0-beta", -1),
        ("1.0.0-beta", "1.0.0-beta.2", -1),
        ("1.0.0-beta.2", "1.0.0-beta.11", -1),
        ("1.0.0-beta.11", "1.0.0-rc.1", -1),
        ("1.0.0-rc.1", "1.0.0", -1),
        ("1.0.0", "1.0.0-rc.1", 1),
        ("1.0.0-rc.1", "1.0.0-rc.1", 0),
        ("1.0.0+build.1", "1.0.0+build.2", 0),
        ("1.0.0-1", "1.0.0-alpha", -1),
        ("1.0.0-alpha", "1.0.0-1", 1),
        # apiserver semver_test.go comparisons
        ("1.2.3", "1.0.0", 1),
        ("1.0.0", "1.2.3", -1),
    ],
)
def test_compare(a, b, result):
    va, vb = parse_semver(a), parse_semver(b)
    assert va.compare(vb) == result
    assert vb.compare(va) == -result
    assert (va == vb) is (result == 0)
    assert (va < vb) is (result < 0)
    assert (va > vb) is (result > 0)


def test_fields_and_hash():
    v = parse_semver("1.2.3-beta.1+build.1")
    assert (v.major, v.minor, v.patch) == (1, 2, 3)
    assert [str(p) for p in v.pre] == ["beta", "1"]
    assert v.build == ("build", "1")
    assert hash(parse_semver("1.0.0+a")) == hash(parse_semver("1.0.0+b"))
    assert isinstance(v, Version)
    with pytest.raises(SemverError):
        parse_semver(1)  # type: ignore[arg-type]
