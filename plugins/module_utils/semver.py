# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Semantic versions with blang/semver v4 semantics, in pure Python.

Kubernetes' CEL ``semver()`` and DRA ``version`` attributes parse with
``github.com/blang/semver/v4`` (``semver.Parse``) and order with its
``Version.Compare``.  The PyPI ``semver`` package differs in the details that
conformance tests pin (error texts such as ``No Major.Minor.Patch elements
found``, uint64 limits, the optional ``normalize`` mode of Kubernetes'
``normalizeAndParse``), so the ~100 lines needed are written here.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError

__all__ = ["SemverError", "Version", "is_semver", "parse_semver"]

_NUMBERS = frozenset("0123456789")
_ALPHANUM = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-0123456789")
_MAX_UINT64 = (1 << 64) - 1


class SemverError(GpufleetError, ValueError):
    """A string is not a valid semantic version (message as blang/semver's error)."""


def _contains_only(s: str, chars: frozenset[str]) -> bool:
    return all(c in chars for c in s)


def _has_leading_zeroes(s: str) -> bool:
    return len(s) > 1 and s[0] == "0"


def _parse_uint(s: str) -> int:
    """strconv.ParseUint(s, 10, 64) for a string already known to hold digits only."""
    if not s:
        raise SemverError(f'strconv.ParseUint: parsing "{s}": invalid syntax')
    v = int(s)
    if v > _MAX_UINT64:
        raise SemverError(f'strconv.ParseUint: parsing "{s}": value out of range')
    return v


@dataclass(frozen=True, order=False)
class PRVersion:
    """One dot-separated pre-release identifier."""

    num: int | None
    text: str

    def compare(self, o: PRVersion) -> int:
        if self.num is not None and o.num is None:
            return -1
        if self.num is None and o.num is not None:
            return 1
        if self.num is not None and o.num is not None:
            return (self.num > o.num) - (self.num < o.num)
        return (self.text > o.text) - (self.text < o.text)

    def __str__(self) -> str:
        return str(self.num) if self.num is not None else self.text


def _new_pr_version(s: str) -> PRVersion:
    if not s:
        raise SemverError("Prerelease is empty")
    if _contains_only(s, _NUMBERS):
        if _has_leading_zeroes(s):
            raise SemverError(f'Numeric PreRelease version must not contain leading zeroes "{s}"')
        return PRVersion(_parse_uint(s), s)
    if _contains_only(s, _ALPHANUM):
        return PRVersion(None, s)
    raise SemverError(f'Invalid character(s) found in prerelease "{s}"')


@dataclass(frozen=True, eq=False)
class Version:
    """A parsed semantic version; ``==``/``<`` follow semver precedence (build metadata ignored)."""

    major: int
    minor: int
    patch: int
    pre: tuple[PRVersion, ...] = field(default=())
    build: tuple[str, ...] = field(default=())

    def compare(self, o: Version) -> int:
        """blang/semver ``Version.Compare``: -1, 0 or 1."""
        for a, b in ((self.major, o.major), (self.minor, o.minor), (self.patch, o.patch)):
            if a != b:
                return 1 if a > b else -1
        if not self.pre and not o.pre:
            return 0
        if not self.pre:
            return 1
        if not o.pre:
            return -1
        for mine, theirs in zip(self.pre, o.pre, strict=False):
            c = mine.compare(theirs)
            if c:
                return c
        return (len(self.pre) > len(o.pre)) - (len(self.pre) < len(o.pre))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return self.compare(other) == 0

    def __lt__(self, other: Version) -> bool:
        return self.compare(other) < 0

    def __le__(self, other: Version) -> bool:
        return self.compare(other) <= 0

    def __gt__(self, other: Version) -> bool:
        return self.compare(other) > 0

    def __ge__(self, other: Version) -> bool:
        return self.compare(other) >= 0

    def __hash__(self) -> int:
        return hash((self.major, self.minor, self.patch, self.pre))

    def __str__(self) -> str:
        s = f"{self.major}.{self.minor}.{self.patch}"
        if self.pre:
            s += "-" + ".".join(str(p) for p in self.pre)
        if self.build:
            s += "+" + ".".join(self.build)
        return s


def _parse(s: str) -> Version:
    if not s:
        raise SemverError("Version string empty")
    parts = s.split(".", 2)
    if len(parts) != 3:
        raise SemverError("No Major.Minor.Patch elements found")
    nums = []
    for label, part in (("major", parts[0]), ("minor", parts[1])):
        if not _contains_only(part, _NUMBERS):
            raise SemverError(f'Invalid character(s) found in {label} number "{part}"')
        if _has_leading_zeroes(part):
            raise SemverError(f'{label.capitalize()} number must not contain leading zeroes "{part}"')
        nums.append(_parse_uint(part))
    major, minor = nums
    patch_str = parts[2]
    build: list[str] = []
    pre: list[str] = []
    bi = patch_str.find("+")
    if bi != -1:
        build = patch_str[bi + 1 :].split(".")
        patch_str = patch_str[:bi]
    pi = patch_str.find("-")
    if pi != -1:
        pre = patch_str[pi + 1 :].split(".")
        patch_str = patch_str[:pi]
    if not _contains_only(patch_str, _NUMBERS):
        raise SemverError(f'Invalid character(s) found in patch number "{patch_str}"')
    if _has_leading_zeroes(patch_str):
        raise SemverError(f'Patch number must not contain leading zeroes "{patch_str}"')
    patch = _parse_uint(patch_str)
    pre_versions = tuple(_new_pr_version(p) for p in pre)
    for b in build:
        if not b:
            raise SemverError("Build meta data is empty")
        if not _contains_only(b, _ALPHANUM):
            raise SemverError(f'Invalid character(s) found in build meta data "{b}"')
    return Version(major, minor, patch, pre_versions, tuple(build))


def _normalize(s: str) -> str:
    """Kubernetes' normalizeAndParse pre-processing (no whitespace trimming)."""
    if s.startswith("v"):
        s = s[1:]
    parts = s.split(".", 2)
    for i, p in enumerate(parts):
        if len(p) > 1:
            p = p.lstrip("0")
            if not p or p[0] not in _NUMBERS:
                p = "0" + p
            parts[i] = p
    if len(parts) < 3:
        if any(c in parts[-1] for c in "+-"):
            raise SemverError("short version cannot contain PreRelease/Build meta data")
        parts.extend(["0"] * (3 - len(parts)))
    return ".".join(parts)


@functools.lru_cache(maxsize=4096)
def parse_semver(s: str, normalize: bool = False) -> Version:
    """Parse like blang ``semver.Parse`` (or Kubernetes' ``normalizeAndParse`` when ``normalize``).

    Raises :class:`SemverError` (a ``ValueError``) with blang/semver's message.
    """
    if not isinstance(s, str):
        raise SemverError(f"version must be a string, not {type(s).__name__}")
    return _parse(_normalize(s) if normalize else s)


def is_semver(s: str, normalize: bool = False) -> bool:
    try:
        parse_semver(s, normalize)
    except SemverError:
        return False
    return True
