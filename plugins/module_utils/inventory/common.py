# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""What every part of the fleet model shares: the pydantic import guard (``require_pydantic``), the strict base
model, Kubernetes name/label/quantity checks and limits, and the error translation (``parse()``,
``translate_errors()``: pydantic errors as ``path: reason`` lines, nothing of a credential shown).

Part of the fleet model; ``models.py`` is the façade other code imports.
"""

from __future__ import annotations

import re
import traceback
from collections.abc import Callable, Mapping
from typing import Annotated, Any

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import FleetValidationError, GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.redact import (
    describe,
    redact_text,
    redact_url,
    url_credentials,
)

try:
    # The other parts of the model import these from here (the stand-ins below without pydantic).
    from pydantic import (  # pylint: disable=unused-import
        AfterValidator,
        BaseModel,
        ConfigDict,
        Field,
        ValidationError,
        ValidationInfo,
        WithJsonSchema,
        field_validator,
        model_validator,
    )

    HAS_PYDANTIC = True
    PYDANTIC_IMPORT_ERROR = None
except ImportError:  # pragma: no cover - exercised by ansible-test's import sanity test
    HAS_PYDANTIC = False
    PYDANTIC_IMPORT_ERROR = traceback.format_exc()

    class BaseModel:  # type: ignore[no-redef]
        """Stand-in so this file imports without pydantic; every entry point calls require_pydantic()."""

    class ValidationError(Exception):  # type: ignore[no-redef]
        pass

    class ValidationInfo:  # type: ignore[no-redef]
        data: dict[str, Any]

    def ConfigDict(**kwargs: Any) -> dict[str, Any]:  # type: ignore[no-redef]
        return kwargs

    def AfterValidator(func: Any) -> Any:  # type: ignore[no-redef]
        return None

    def WithJsonSchema(schema: Any) -> Any:  # type: ignore[no-redef]
        return None

    def Field(*args: Any, **kwargs: Any) -> Any:  # type: ignore[no-redef]
        return None

    def field_validator(*args: Any, **kwargs: Any) -> Any:  # type: ignore[no-redef]
        return lambda f: f

    def model_validator(*args: Any, **kwargs: Any) -> Any:  # type: ignore[no-redef]
        return lambda f: f


def require_pydantic() -> None:
    if not HAS_PYDANTIC:
        raise GpufleetError(
            f"gpufleet.serving needs the Python library pydantic>=2 on the controller: {PYDANTIC_IMPORT_ERROR}"
        )


# --------------------------------------------------------------------------------------------------------------------
# Scalar checks
# --------------------------------------------------------------------------------------------------------------------

DNS_LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# A DRA attribute / capacity name: optional "<dns subdomain>/" domain, then a C identifier of at most 32 characters.
QUALIFIED_NAME_RE = re.compile(
    r"^(?:(?P<domain>[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)/)?(?P<id>[A-Za-z_][A-Za-z0-9_]{0,31})$"
)
TAINT_KEY_RE = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)


def check_dns_label(value: str) -> str:
    if len(value) > 63 or not DNS_LABEL_RE.fullmatch(value):  # fullmatch: "$" would let "name\n" through
        raise ValueError(
            f"{value!r} must be a DNS label: at most 63 lowercase letters, digits and '-', starting and ending alphanumeric"
        )
    return value


def check_dns_subdomain(value: str) -> str:
    if len(value) > 253 or not DNS_SUBDOMAIN_RE.fullmatch(value):
        raise ValueError(f"{value!r} must be a DNS subdomain (lowercase, e.g. gpu.nvidia.com)")
    return value


# Names and keys the API server validates in what we render (k8s.io/apimachinery/pkg/util/validation; the name rules
# themselves are contract.py's). Messages read "must be ... (got 'x')".
ANNOTATIONS_SIZE_MAX = 256 * 1024  # TotalAnnotationSizeLimitB: one object's annotation keys and values together
_DNS_LABEL_RULE = "a DNS label: at most 63 lowercase letters, digits and '-', starting and ending alphanumeric"
_DNS_SUBDOMAIN_RULE = "a DNS subdomain: at most 253 characters, DNS labels joined by '.'"
_QUALIFIED_NAME_RULE = (
    "an optional DNS subdomain prefix of at most 253 characters and '/', then a name of at most 63 letters, digits, "
    "'-', '_' and '.', starting and ending alphanumeric"
)
_LABEL_VALUE_RULE = "empty, or at most 63 letters, digits, '-', '_' and '.', starting and ending alphanumeric"


def check_k8s_name(value: str, what: str, *, subdomain: bool = False) -> str:
    """``value`` names a Kubernetes object: a DNS label (namespaces, ...) or a DNS subdomain (most other objects)."""
    from ansible_collections.gpufleet.serving.plugins.module_utils.contract import is_dns_label, is_dns_subdomain

    if not (is_dns_subdomain(value) if subdomain else is_dns_label(value)):
        raise ValueError(f"must be {what}, {_DNS_SUBDOMAIN_RULE if subdomain else _DNS_LABEL_RULE} (got {value!r})")
    return value


def check_label_key(value: Any, what: str = "a label key") -> str:
    """A label key, node-selector key or toleration key: Kubernetes' qualified name (IsQualifiedName)."""
    from ansible_collections.gpufleet.serving.plugins.module_utils.contract import is_label_key

    if not isinstance(value, str) or not is_label_key(value):
        raise ValueError(f"must be {what}, {_QUALIFIED_NAME_RULE} (got {value!r})")
    return value


def check_label_value(value: Any, what: str = "a label value") -> str:
    from ansible_collections.gpufleet.serving.plugins.module_utils.contract import is_label_value

    if not is_label_value(value):
        raise ValueError(f"must be {what}: a string, {_LABEL_VALUE_RULE} (got {value!r})")
    return value


def check_annotation_key(value: Any) -> str:
    """An annotation key: a qualified name once lower-cased (ValidateAnnotations lower-cases the key first)."""
    from ansible_collections.gpufleet.serving.plugins.module_utils.contract import is_label_key

    if not isinstance(value, str) or not is_label_key(value.lower()):
        raise ValueError(f"must be an annotation key, {_QUALIFIED_NAME_RULE} (got {value!r})")
    return value


def label_errors(labels: Any, path: str, what: str = "label") -> list[tuple[str, str]]:
    """``(path, reason)`` for a ``{key: value}`` map of labels or node-selector terms at ``path``."""
    if not isinstance(labels, Mapping):
        return [(path, f"must be a mapping of {what} keys to values (got {type(labels).__name__})")]
    out: list[tuple[str, str]] = []
    for key, value in labels.items():
        try:
            check_label_key(key, f"a {what} key")
            check_label_value(value, f"a {what} value")
        except ValueError as exc:
            out.append((format_loc(path, (key,)), str(exc)))
    return out


def annotation_errors(annotations: Any, path: str) -> list[tuple[str, str]]:
    """``(path, reason)`` for an object's annotations at ``path``: qualified-name keys, string values, 256 KiB in all."""
    if not isinstance(annotations, Mapping):
        return [(path, f"must be a mapping of annotation keys to values (got {type(annotations).__name__})")]
    out: list[tuple[str, str]] = []
    size = 0
    for key, value in annotations.items():
        try:
            check_annotation_key(key)
        except ValueError as exc:
            out.append((format_loc(path, (key,)), str(exc)))
            continue
        if not isinstance(value, str):
            out.append((format_loc(path, (key,)), f"must be a string (got {type(value).__name__}): quote it"))
            continue
        size += len(key.encode()) + len(value.encode())
    if size > ANNOTATIONS_SIZE_MAX:
        out.append((path, f"total {size} bytes of keys and values; Kubernetes allows at most {ANNOTATIONS_SIZE_MAX}"))
    return out


# Strict scalars: YAML 1.1 turns ``yes``/``on``/``true`` into booleans, and a boolean is an int subclass in Python, so a
# lax int field would read ``replicas: yes`` as 1. Fleet data takes real integers and real booleans only.
StrictInt = Annotated[int, Field(strict=True)]
StrictBool = Annotated[bool, Field(strict=True)]

# Kubernetes' limits on DRA attribute values (resource.k8s.io/v1 DeviceAttribute) and names.
ATTRIBUTE_STRING_MAX = 64
ATTRIBUTE_VERSION_MAX = 64
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
QUALIFIED_DOMAIN_MAX = 63
DRIVER_NAME_MAX = 63

# Kubernetes' limits on ResourceClaims and ResourceSlices (k8s.io/api/resource/v1 types.go).
CLAIM_DEVICES_MAX = 32  # AllocationResultsMaxSize: devices one claim can be allocated
DEVICE_REQUESTS_MAX = 32  # DeviceRequestsMaxSize
DEVICE_CONSTRAINTS_MAX = 32  # DeviceConstraintsMaxSize
DEVICE_SELECTORS_MAX = 32  # DeviceSelectorsMaxSize
FIRST_AVAILABLE_MAX = 8  # FirstAvailableDeviceRequestMaxSize
SLICE_DEVICES_MAX = 128  # ResourceSliceMaxDevices: devices one driver publishes for a node in one slice
SLICE_DEVICES_ADVANCED_MAX = 64  # ResourceSliceMaxDevicesWithAdvancedFeatures: when a device has taints or counters


def check_quantity(value: Any) -> str:
    """Accept a Kubernetes quantity (``23034Mi``, ``80Gi``, ``1.5``); ints are accepted and normalised to str."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValueError(f"{describe(value)} must be a Kubernetes quantity such as 80Gi")
    text = str(value)
    from ansible_collections.gpufleet.serving.plugins.module_utils.quantity import parse_quantity

    try:
        parse_quantity(text)
    except ValueError as exc:
        raise ValueError(f"{text!r} is not a Kubernetes quantity ({exc})") from None
    return text


def check_positive_quantity(value: Any) -> str:
    """:func:`check_quantity`, greater than zero (a volume size: ``0`` or ``-5Gi`` is no size)."""
    text = check_quantity(value)
    from ansible_collections.gpufleet.serving.plugins.module_utils.quantity import parse_quantity

    if parse_quantity(text).sign() <= 0:
        raise ValueError(f"must be greater than zero, such as 20Gi (got {text!r})")
    return text


class _Strict(BaseModel):
    """Our own snake_case objects: unknown keys are errors (a typo must not be silently ignored)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


def _check_source_url(value: str, secret_hint: str) -> str:
    """An http(s) URL without credentials. Error messages never repeat the URL (it may hold a secret)."""
    if not re.match(r"^https?://[^\s/@?#]+", value) or re.search(r"\s", value):
        raise ValueError(f"must be an http(s) URL without whitespace (got {redact_url(value)!r})")
    found = url_credentials(value)
    if found:
        raise ValueError(
            f"carries {found}: credentials never go into fleet data (they would be copied into every cluster's Job, "
            f"annotations and logs); {secret_hint}"
        )
    return value


# --------------------------------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------------------------------


def _no_duplicates(names: list[str], what: str) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ValueError(f"duplicate {what} {name!r}")
        seen.add(name)


def _check_driver(value: str) -> str:
    if len(value) > DRIVER_NAME_MAX:
        raise ValueError(f"{value!r} is {len(value)} characters; a DRA driver name has at most {DRIVER_NAME_MAX}")
    return check_dns_subdomain(value)


def _check_taint_key(value: str) -> str:
    if len(value) > 253 or not TAINT_KEY_RE.fullmatch(value):
        raise ValueError(f"{value!r} is not a valid taint key (a label key such as gpufleet.io/maintenance)")
    return value


def format_loc(prefix: str, loc: tuple[Any, ...]) -> str:
    """``('engines', 0, 'members', 1, 'role')`` -> ``prefix.engines[0].members[1].role``."""
    out = prefix
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(part, str) and re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", part):
            out += f".{part}" if out else part
        else:
            out += f"[{str(part)!r}]"
    return out


_ALIASES = {"class_": "class", "bool_": "bool", "int_": "int"}


# Fields whose values are credentials or hold them (an inline kubeconfig carries a bearer token or a client key): an
# error shows what kind of value was given, never the value (redact.describe with secret=True).
SECRET_FIELDS = frozenset({"kubeconfig", "gpufleet_kubeconfig", "secret"})


def _is_secret(err: Mapping[str, Any]) -> bool:
    return any(isinstance(part, str) and part in SECRET_FIELDS for part in err.get("loc", ()))


def shown_input(err: Mapping[str, Any]) -> str:
    """What an error may show of a pydantic error's input (redact.describe: a mapping by its keys, URLs redacted,
    nothing of a credential field's value)."""
    return describe(err.get("input"), secret=_is_secret(err))


def _reason(err: Mapping[str, Any]) -> str:
    kind = err.get("type", "")
    ctx = err.get("ctx") or {}
    got = shown_input(err)
    if kind == "literal_error":
        expected = str(ctx.get("expected", ""))
        choices = re.findall(r"'([^']*)'", expected) or [expected]
        value = err.get("input")
        close = _closest(value, choices) if isinstance(value, str) and not _is_secret(err) else None
        hint = f"; did you mean {close!r}?" if close else ""
        return f"must be one of {', '.join(choices)} (got {got}{hint})"
    if kind == "missing":
        return "is required"
    if kind == "extra_forbidden":
        return "is not a known field (check the spelling)"
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        sym = {"greater_than_equal": ">=", "greater_than": ">", "less_than_equal": "<=", "less_than": "<"}[kind]
        bound = next(iter(ctx.values()), "?")
        return f"must be {sym} {bound} (got {got})"
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return f"must be an integer (got {got})"
    if kind in ("bool_type", "bool_parsing"):
        return f"must be true or false (got {got})"
    if kind == "string_type":
        return f"must be a string (got {got})"
    if kind in ("list_type",):
        return f"must be a list (got {type(err.get('input')).__name__})"
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        return f"must be a mapping (got {type(err.get('input')).__name__})"
    if kind == "too_short":
        return f"must have at least {ctx.get('min_length')} item(s)"
    if kind == "string_pattern_mismatch":
        return f"{got} does not match the expected form {ctx.get('pattern')}"
    if kind == "string_too_short":
        return "must not be empty"
    msg = str(err.get("msg", "is invalid"))
    return msg.removeprefix("Value error, ").removeprefix("Assertion failed, ")


def _closest(value: str, choices: list[str]) -> str | None:
    """The choice ``value`` is most likely a typo of (difflib; a difference of case counts as one)."""
    import difflib

    close = difflib.get_close_matches(value, choices, n=1, cutoff=0.6)
    return close[0] if close else next((c for c in choices if c.lower() == value.lower()), None)


def _scrub(text: str, err: Mapping[str, Any]) -> str:
    """A reason as shown: every URL redacted, and a credential field's value (which a validator's own message may
    quote) replaced."""
    value = err.get("input")
    if _is_secret(err) and isinstance(value, str) and value:
        text = text.replace(repr(value), "<hidden>")
        if len(value) >= 4:
            text = text.replace(value, "<hidden>")
    return redact_text(text)


def translate_errors(
    prefix: str,
    exc: ValidationError,
    rename_first: dict[str, str] | None = None,
    reason: Callable[[Mapping[str, Any]], str | None] | None = None,
) -> list[tuple[str, str]]:
    """pydantic errors -> ``(path, reason)``; ``rename_first`` maps a top-level field to the variable the user wrote;
    ``reason`` may word an error itself (``None``: the generic wording). No reason shows a credential: inputs are
    shown through :func:`shown_input` (redact.describe) and every reason is scrubbed of URL credentials."""
    out = []
    for err in exc.errors(include_url=False):
        loc = tuple(_ALIASES.get(p, p) if isinstance(p, str) else p for p in err.get("loc", ()))
        if rename_first and loc and isinstance(loc[0], str):
            loc = (rename_first.get(loc[0], loc[0]), *loc[1:])
        text = reason(err) if reason is not None else None
        out.append((format_loc(prefix, loc), _scrub(text if text is not None else _reason(err), err)))
    return out


_ADAPTERS: dict[Any, Any] = {}


def list_adapter(model: Any) -> Any:
    """A cached pydantic TypeAdapter for ``list[model]``: one (native) validation call for a whole list."""
    adapter = _ADAPTERS.get(model)
    if adapter is None:
        from pydantic import TypeAdapter

        adapter = _ADAPTERS[model] = TypeAdapter(list[model])
    return adapter


def parse(model: type[Any], data: Any, prefix: str) -> Any:
    """Validate ``data`` as ``model``; raise FleetValidationError naming ``prefix`` and the field path."""
    require_pydantic()
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise FleetValidationError(translate_errors(prefix, exc)) from None
