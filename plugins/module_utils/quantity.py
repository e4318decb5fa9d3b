# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Kubernetes ``resource.Quantity`` in pure Python.

A faithful port of the parts of ``k8s.io/apimachinery/pkg/api/resource`` that
decide *values*: parsing (``ParseQuantity``), comparison (``Cmp``), arithmetic
(``Add``/``Sub``/``Mul``), ``AsInt64`` and ``AsApproximateFloat64``, plus the
canonical string form.  Upstream behaviour that matters and that the
``kubernetes`` Python client's ``parse_quantity`` does not reproduce:

* binary-suffixed values above 2^63-1 saturate (``10Ei == 9223372036854775807``);
* values with more than nine decimal places round *up* to the next nano unit
  (``3.001n == 4n``, ``0.0000000001 == 1n``);
* the scanner accepts upstream's quirks (``"."``, ``"1."``, ``"+5"``) and rejects
  what upstream rejects (``" 1"``, ``"1 "``, ``"1i"``, exponents outside int32);
* a quantity remembers whether it is held as a scaled int64 or as an arbitrary
  precision decimal, which is what ``isInteger()``/``asInteger()`` expose in CEL
  (``quantity("1000m").isInteger()`` is ``false``; so is ``quantity("1Pi")``).

Only the standard library is used, so ``module_utils`` importers need nothing else.
"""

from __future__ import annotations

import functools
import math

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError

__all__ = [
    "BINARY_SI",
    "DECIMAL_EXPONENT",
    "DECIMAL_SI",
    "Quantity",
    "QuantityError",
    "is_quantity",
    "parse_quantity",
]

DECIMAL_EXPONENT = "DecimalExponent"
BINARY_SI = "BinarySI"
DECIMAL_SI = "DecimalSI"

_MAX_INT64 = (1 << 63) - 1
_MIN_INT64 = -(1 << 63)
_MAX_INT32 = (1 << 31) - 1
_NANO = -9
_MAX_INT64_FACTORS = 18
# Upstream would build a 10**exponent big integer for these (and stall); refuse instead.
_MAX_MATERIALIZED_EXPONENT = 100_000

_SPLIT_RE = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
ERR_FORMAT_WRONG = f"quantities must match the regular expression '{_SPLIT_RE}'"
ERR_NUMERIC = "unable to parse numeric part of quantity"
ERR_SUFFIX = "unable to parse quantity's suffix"

_DEC_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BIN_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DEC_SUFFIX_BY_EXP = {v: k for k, v in _DEC_SUFFIXES.items()}
_BIN_SUFFIX_BY_EXP = {v: k for k, v in _BIN_SUFFIXES.items()}
_SUFFIX_CHARS = frozenset("eEinumkKMGTP")
_DIGITS = frozenset("0123456789")


class QuantityError(GpufleetError, ValueError):
    """A string is not a valid Kubernetes quantity (message as upstream's error)."""


# --------------------------------------------------------------------------- helpers


def _fits_int64(v: int) -> bool:
    return _MIN_INT64 <= v <= _MAX_INT64


def _go_pow10(n: int) -> float:
    """``math.Pow10`` exactly as Go computes it (two table lookups, one rounding)."""
    if 0 <= n <= 308:
        return float(f"1e{(n // 32) * 32}") * float(f"1e{n % 32}")
    if -323 <= n <= 0:
        m = -n
        return float(f"1e-{(m // 32) * 32}") / float(f"1e{m % 32}")
    return math.inf if n > 0 else 0.0


def _int_to_float(v: int) -> float:
    try:
        return float(v)
    except OverflowError:
        return math.inf if v > 0 else -math.inf


def _ndigits(v: int) -> int:
    return len(str(abs(v))) if v else 0


def _cmp_exact(u1: int, e1: int, u2: int, e2: int) -> int:
    """Compare u1*10**e1 with u2*10**e2 without materialising far-apart exponents."""
    s1 = (u1 > 0) - (u1 < 0)
    s2 = (u2 > 0) - (u2 < 0)
    if s1 != s2:
        return 1 if s1 > s2 else -1
    if s1 == 0:
        return 0
    m1 = _ndigits(u1) + e1
    m2 = _ndigits(u2) + e2
    if m1 != m2:
        r = 1 if m1 > m2 else -1
        return r if s1 > 0 else -r
    if e1 >= e2:
        a, b = u1 * 10 ** (e1 - e2), u2
    else:
        a, b = u1, u2 * 10 ** (e2 - e1)
    return (a > b) - (a < b)


def _check_exponent_gap(gap: int) -> None:
    if abs(gap) > _MAX_MATERIALIZED_EXPONENT:
        raise QuantityError("quantity arithmetic across scales this far apart is not supported")


def _positive_scale(value: int, scale: int) -> tuple[int, bool]:
    """positiveScaleInt64: value*10**scale if it fits int64."""
    if value == 0:
        return 0, True
    if scale > 18:
        return 0, False
    r = value * 10**scale
    return (r, True) if _fits_int64(r) else (0, False)


def _negative_scale(base: int, scale: int) -> tuple[int, bool]:
    """negativeScaleInt64: base / 10**scale rounded away from zero, and whether it was exact."""
    if scale == 0:
        return base, True
    if scale > 19:
        if base == 0:
            return 0, True
        return (1 if base > 0 else -1), False
    q, r = divmod(abs(base), 10**scale)
    if r:
        q += 1
    return (q if base >= 0 else -q), r == 0


def _inf_set_string(s: str) -> tuple[int, int] | None:
    """gopkg.in/inf.v0 ``Dec.SetString``: returns (unscaled, scale) or None."""
    unscaled: list[str] = []
    dp = -1
    seen_digit = False
    i = 0
    n = len(s)
    while i < n:
        ch = s[i]
        if ch in "+-":
            if unscaled or dp >= 0:
                break
        elif ch == ".":
            if dp >= 0:
                break
            dp = len(unscaled)
            i += 1
            continue
        elif ch in _DIGITS:
            seen_digit = True
        else:
            break
        unscaled.append(ch)
        i += 1
    if i != n or not seen_digit:
        return None
    text = "".join(unscaled)
    scale = len(unscaled) - dp if dp >= 0 else 0
    return int(text), scale


def _parse_quantity_string(s: str) -> tuple[bool, str, str, str, str]:
    """parseQuantityString: (positive, value, num, denom, suffix); raises on bad format."""
    positive = True
    pos = 0
    end = len(s)
    if pos < end:
        if s[0] == "-":
            positive = False
            pos += 1
        elif s[0] == "+":
            pos += 1
    # strip leading zeros
    i = pos
    while True:
        if i >= end:
            return positive, "0", "0", "", ""
        if s[i] == "0":
            pos += 1
            i += 1
            continue
        break
    # numerator
    num = ""
    i = pos
    while True:
        if i >= end:
            return positive, s[0:end], s[pos:end], "", ""
        if s[i] in _DIGITS:
            i += 1
            continue
        num = s[pos:i]
        pos = i
        break
    if not num:
        num = "0"
    denom = ""
    if pos < end and s[pos] == ".":
        pos += 1
        i = pos
        while True:
            if i >= end:
                return positive, s[0:end], num, s[pos:end], ""
            if s[i] in _DIGITS:
                i += 1
                continue
            denom = s[pos:i]
            pos = i
            break
    value = s[0:pos]
    suffix_start = pos
    i = pos
    while True:
        if i >= end:
            return positive, value, num, denom, s[suffix_start:end]
        if s[i] not in _SUFFIX_CHARS:
            pos = i
            break
        i += 1
    if pos < end and s[pos] in "+-":
        pos += 1
    i = pos
    while True:
        if i >= end:
            return positive, value, num, denom, s[suffix_start:end]
        if s[i] in _DIGITS:
            i += 1
            continue
        break
    raise QuantityError(ERR_FORMAT_WRONG)


def _go_parse_int(s: str) -> int | None:
    """strconv.ParseInt(s, 10, 64)."""
    body = s[1:] if s[:1] in ("+", "-") else s
    if not body or any(c not in _DIGITS for c in body):
        return None
    v = int(s)
    return v if _fits_int64(v) else None


def _interpret_suffix(suffix: str) -> tuple[int, int, str] | None:
    if suffix in _DEC_SUFFIXES:
        return 10, _DEC_SUFFIXES[suffix], DECIMAL_SI
    if suffix in _BIN_SUFFIXES:
        return 2, _BIN_SUFFIXES[suffix], BINARY_SI
    if len(suffix) > 1 and suffix[0] in "eE":
        parsed = _go_parse_int(suffix[1:])
        if parsed is None or not -_MAX_INT32 <= parsed <= _MAX_INT32:
            return None
        return 10, parsed, DECIMAL_EXPONENT
    return None


# --------------------------------------------------------------------------- Quantity


class Quantity:
    """An immutable Kubernetes quantity.

    Internally either a scaled int64 (``value * 10**scale``, upstream's
    ``int64Amount``) or an arbitrary-precision decimal (``unscaled * 10**-dscale``,
    upstream's ``inf.Dec``), exactly as ``resource.Quantity`` would hold it.
    Comparison operators compare values (``Cmp``); ``str()`` is the canonical form.
    """

    __slots__ = ("_dec", "_fmt", "_u", "_x")

    # _dec False: value = _u * 10**_x (int64Amount{value:_u, scale:_x})
    # _dec True:  value = _u * 10**-_x (inf.Dec{unscaled:_u, scale:_x})

    def __init__(self, unscaled: int = 0, exponent: int = 0, fmt: str = DECIMAL_SI, *, dec: bool = False) -> None:
        self._dec = dec
        self._u = unscaled
        self._x = exponent
        self._fmt = fmt

    @property
    def format(self) -> str:
        """The suffix family it was written in: ``DecimalSI``, ``BinarySI`` or ``DecimalExponent``."""
        return self._fmt

    # ---- constructors
    @classmethod
    def from_int(cls, value: int, fmt: str = DECIMAL_SI) -> Quantity:
        """resource.NewQuantity: an int64 at scale 0."""
        if not _fits_int64(value):
            return cls(value, 0, fmt, dec=True)
        return cls(value, 0, fmt)

    # ---- internal views
    def _value_exp(self) -> tuple[int, int]:
        """(mantissa, base-10 exponent) of the exact value."""
        return (self._u, -self._x) if self._dec else (self._u, self._x)

    def _as_dec(self) -> tuple[int, int]:
        """(unscaled, inf scale) as upstream's AsDec would give."""
        return (self._u, self._x) if self._dec else (self._u, -self._x)

    @property
    def is_decimal(self) -> bool:
        """True when held as an arbitrary-precision decimal (``inf.Dec``)."""
        return self._dec

    # ---- queries
    def sign(self) -> int:
        return (self._u > 0) - (self._u < 0)

    def is_zero(self) -> bool:
        return self._u == 0

    def cmp(self, other: Quantity) -> int:
        """resource.Quantity.Cmp: -1, 0 or 1 by exact value."""
        u1, e1 = self._value_exp()
        u2, e2 = other._value_exp()
        return _cmp_exact(u1, e1, u2, e2)

    def as_int64(self) -> tuple[int, bool]:
        """resource.Quantity.AsInt64: (value, ok); ok is False for the decimal form."""
        if self._dec:
            return 0, False
        if self._x == 0:
            return self._u, True
        if self._x < 0:
            return 0, False
        return _positive_scale(self._u, self._x)

    def is_integer(self) -> bool:
        return self.as_int64()[1]

    def value_ceil(self) -> int:
        """resource.Quantity.Value: the value as an integer, rounded up (``1.5`` -> 2, ``-1.5`` -> -1)."""
        u, e = self._value_exp()
        if e >= 0:
            return u * 10**e
        return -((-u) // 10**-e)

    def as_approximate_float(self) -> float:
        """resource.Quantity.AsApproximateFloat64 (same float64 rounding as Go)."""
        if self._dec:
            base = _int_to_float(self._u)
            exponent = -self._x
        else:
            base = float(self._u)
            exponent = self._x
        if exponent == 0 or base == 0:
            return base  # upstream's table pins 0 (not 0*Inf=NaN) for zero at extreme scales
        return base * _go_pow10(exponent)

    # ---- arithmetic (all return new quantities)
    def _int_add(self, bu: int, bx: int) -> tuple[int, int] | None:
        au, ax = self._u, self._x
        if bu == 0:
            return au, ax
        if au == 0:
            return bu, bx
        if ax == bx:
            c = au + bu
            return (c, ax) if _fits_int64(c) else None
        if ax > bx:
            c, ok = _positive_scale(au, ax - bx)
            if not ok:
                return None
            c += bu
            return (c, bx) if _fits_int64(c) else None
        c, ok = _positive_scale(bu, bx - ax)
        if not ok:
            return None
        c += au
        return (c, ax) if _fits_int64(c) else None

    @staticmethod
    def _dec_add(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
        (u1, s1), (u2, s2) = a, b
        s = max(s1, s2)
        _check_exponent_gap(s - min(s1, s2))
        return u1 * 10 ** (s - s1) + u2 * 10 ** (s - s2), s

    def add(self, other: Quantity) -> Quantity:
        fmt = self.format
        if not self._dec and not other._dec:
            if self._u == 0:
                fmt = other.format
            r = self._int_add(other._u, other._x)
            if r is not None:
                return Quantity(r[0], r[1], fmt)
        elif self.is_zero():
            fmt = other.format
        u, s = self._dec_add(self._as_dec(), other._as_dec())
        return Quantity(u, s, fmt, dec=True)

    def sub(self, other: Quantity) -> Quantity:
        fmt = other.format if self.is_zero() else self.format
        if not self._dec and not other._dec and other._u != _MIN_INT64:
            r = self._int_add(-other._u, other._x)
            if r is not None:
                return Quantity(r[0], r[1], fmt)
        ou, os_ = other._as_dec()
        u, s = self._dec_add(self._as_dec(), (-ou, os_))
        return Quantity(u, s, fmt, dec=True)

    def mul(self, y: int) -> Quantity:
        if not self._dec:
            a, sc = self._u, self._x
            if a == 0:
                return Quantity(a, sc, self.format)
            if y == 0:
                return Quantity(0, 0, self.format)
            c = a * y
            ok = _fits_int64(c) and a != _MIN_INT64 and y != _MIN_INT64
            if ok and sc > 0:
                ok = _positive_scale(c, sc)[1]
            elif ok and sc < 0:
                ok = _negative_scale(c, -sc)[1]
            if ok:
                return Quantity(c, sc, self.format)
        u, s = self._as_dec()
        return Quantity(u * y, s, self.format, dec=True)

    def div(self, y: int, places: int = 4) -> Quantity:
        """Divide by an integer, rounding half away from zero to ``places`` decimals."""
        if y == 0:
            raise ZeroDivisionError("division by zero")
        u, e = self._value_exp()
        # value/y = u*10**e / y ; want result at inf scale `places` (or keep if coarser)
        target = max(places, 0)
        _check_exponent_gap(e + target)
        num = u * 10 ** (e + target) if e + target >= 0 else u
        den = y if e + target >= 0 else y * 10 ** (-(e + target))
        q, r = divmod(abs(num), abs(den))
        if 2 * r >= abs(den):
            q += 1
        if (num < 0) != (den < 0):
            q = -q
        return Quantity(q, target, self.format, dec=True)

    def div_int(self, y: int) -> Quantity:
        """Integer division truncating toward zero."""
        if y == 0:
            raise ZeroDivisionError("division by zero")
        u, e = self._value_exp()
        _check_exponent_gap(e)
        num, den = (u * 10**e, y) if e >= 0 else (u, y * 10 ** (-e))
        q = abs(num) // abs(den)
        if (num < 0) != (den < 0):
            q = -q
        return Quantity.from_int(q, self.format) if _fits_int64(q) else Quantity(q, 0, self.format, dec=True)

    def neg(self) -> Quantity:
        if not self._dec and self._u != _MIN_INT64:
            return Quantity(-self._u, self._x, self.format)
        u, s = self._as_dec()
        return Quantity(-u, s, self.format, dec=True)

    # ---- Python protocol
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self.cmp(other) == 0

    def __lt__(self, other: Quantity) -> bool:
        return self.cmp(other) < 0

    def __le__(self, other: Quantity) -> bool:
        return self.cmp(other) <= 0

    def __gt__(self, other: Quantity) -> bool:
        return self.cmp(other) > 0

    def __ge__(self, other: Quantity) -> bool:
        return self.cmp(other) >= 0

    def __hash__(self) -> int:
        u, e = self._value_exp()
        if u == 0:
            return 0
        while u % 10 == 0:
            u //= 10
            e += 1
        return hash((u, e))

    def __repr__(self) -> str:
        return f"Quantity({str(self)!r})"

    def __str__(self) -> str:
        return self.canonical()

    def canonical(self) -> str:
        """resource.Quantity.String(): the canonical form."""
        if self._u == 0:
            return "0"
        fmt = self.format
        if fmt == BINARY_SI:
            if self.cmp(Quantity(-1024)) > 0 and self.cmp(Quantity(1024)) < 0:
                fmt = DECIMAL_SI
            else:
                u, e = self._value_exp()
                if e < 0 and u % 10 ** (-e) != 0:
                    fmt = DECIMAL_SI
        elif fmt not in (DECIMAL_SI, DECIMAL_EXPONENT):
            fmt = DECIMAL_EXPONENT
        sign = "-" if self._u < 0 else ""
        if fmt == BINARY_SI:
            u, e = self._value_exp()
            v = abs(u) * 10**e if e >= 0 else abs(u) // 10 ** (-e)
            exp = 0
            while v % 1024 == 0:
                v //= 1024
                exp += 1
            if exp == 0:
                return f"{sign}{v}"
            if exp * 10 in _BIN_SUFFIX_BY_EXP:
                return f"{sign}{v}{_BIN_SUFFIX_BY_EXP[exp * 10]}"
            fmt = DECIMAL_SI
        u, e = self._value_exp()
        mant = abs(u)
        while mant % 10 == 0:
            mant //= 10
            e += 1
        while e % 3 != 0:
            mant *= 10
            e -= 1
        if fmt == DECIMAL_EXPONENT:
            return f"{sign}{mant}" if e == 0 else f"{sign}{mant}e{e}"
        if e in _DEC_SUFFIX_BY_EXP:
            return f"{sign}{mant}{_DEC_SUFFIX_BY_EXP[e]}"
        if e < _NANO:
            return f"{sign}{mant}e{e}"
        # beyond "E": exponent notation rather than losing the magnitude
        return f"{sign}{mant}e{e}"


def _parse(s: str) -> Quantity:
    if not s:
        raise QuantityError(ERR_FORMAT_WRONG)
    if s == "0":
        return Quantity(0, 0, DECIMAL_SI)
    positive, value, num, denom, suf = _parse_quantity_string(s)
    interp = _interpret_suffix(suf)
    if interp is None:
        raise QuantityError(ERR_SUFFIX)
    base, exponent, fmt = interp

    precision = 0
    scale = 0
    mantissa = 1
    if fmt in (DECIMAL_EXPONENT, DECIMAL_SI):
        scale = exponent
        precision = _MAX_INT64_FACTORS - (len(num) + len(denom))
    else:
        if exponent >= 0 and not denom:
            mantissa = 1 << exponent
            precision = 15 - len(num) - int(exponent * 3 / 10) - 1
        else:
            precision = -1

    if precision >= 0:
        scale -= len(denom)
        if scale >= _NANO:
            v = _go_parse_int(num + denom)
            if v is None:
                raise QuantityError(ERR_NUMERIC)
            result = v * mantissa
            if _fits_int64(result):
                return Quantity(result if positive else -result, scale, fmt)

    amount = _inf_set_string(value)
    if amount is None:
        raise QuantityError(ERR_NUMERIC)
    unscaled, dscale = amount
    if base == 10:
        dscale -= exponent
    else:
        unscaled <<= exponent
    negative = unscaled < 0
    unscaled = abs(unscaled)
    if unscaled != 0:
        # Round (up, away from zero) to nano scale: inf.Dec.Round(amount, 9, RoundUp)
        if dscale <= 9:
            _check_exponent_gap(9 - dscale)
            unscaled *= 10 ** (9 - dscale)
        else:
            digits = dscale - 9
            if digits > _ndigits(unscaled):
                unscaled = 1
            else:
                q, r = divmod(unscaled, 10**digits)
                unscaled = q + (1 if r else 0)
        dscale = 9
    if fmt == BINARY_SI and _cmp_exact(unscaled, -dscale, _MAX_INT64, 0) > 0:
        unscaled, dscale = _MAX_INT64, 0
    if fmt == BINARY_SI and unscaled and _cmp_exact(unscaled, -dscale, 1, 0) < 0:
        fmt = DECIMAL_SI
    if negative:
        unscaled = -unscaled
    return Quantity(unscaled, dscale, fmt, dec=True)


@functools.lru_cache(maxsize=4096)
def parse_quantity(s: str) -> Quantity:
    """Parse a Kubernetes quantity string like ``resource.ParseQuantity``.

    Raises :class:`QuantityError` (a ``ValueError``) with upstream's message on a bad quantity.
    Results are immutable and cached by text.
    """
    if not isinstance(s, str):
        raise QuantityError(f"quantity must be a string, not {type(s).__name__}")
    return _parse(s)


def is_quantity(s: str) -> bool:
    """True if ``s`` parses as a quantity."""
    try:
        parse_quantity(s)
    except QuantityError:
        return False
    return True
