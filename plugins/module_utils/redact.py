# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""What an error may show of a value: the collection's one redaction.

A few inputs carry credentials: an inline kubeconfig (a bearer token, a client key), a URL with ``user:password@``
or a signature / token query parameter (a source, an S3 endpoint, a proxy, a package index), an environment value
(``HF_TOKEN``, a proxy password). An error that repeats its input is printed by Ansible several times (``msg``,
``errors``, the failed result), logged by AWX and kept in CI output, so every error that can carry such a value shows
it through :func:`describe` (a mapping by its keys, a list by its length, a string with every URL redacted), and
free text built from such values through :func:`redact_text`. The action plugins' failure shape passes its message
and reasons through :func:`redact_text` once more.

:func:`credential_name` and :func:`value_credentials` say whether an environment variable looks like a credential
(the model cache role refuses those as plain values: they would be rendered into every hydration Job).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

# A query parameter whose name looks like it carries a credential (presigned S3/GCS/Azure URLs, API keys, tokens).
CREDENTIAL_PARAM_RE = re.compile(r"(sig|signature|token|credential|secret|passw|pwd|auth|key|session)", re.IGNORECASE)
# A URL inside free text: a scheme, then everything up to whitespace or a quote.
_URL_IN_TEXT_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>`]*")
# ``scheme://user:password@``, the password possibly with ``/`` in it (then a URL parser reads it as the path).
_USERINFO_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/?#@]*:[^?#@]*@")
# ``user:password@host`` without a scheme (a proxy as HTTPS_PROXY often spells it).
_BARE_USERINFO_RE = re.compile(r"^[^\s/@:]+:[^\s/@]*@[^\s@]+")
# Words of a variable name that mean it holds a credential: TOKEN, SECRET, PASSWORD, PASSWD, CREDENTIAL anywhere in a
# word (HF_TOKEN, HFTOKEN, CREDENTIALS); PASS as a word; AUTH starting (AUTH, AUTHORIZATION, not AUTHOR) or ending
# (OAUTH, BASICAUTH) a word; KEY ending a word (KEY, API_KEY, APIKEY, ACCESSKEY, not KEYBOARD).
_CREDENTIAL_WORD_RE = re.compile(
    r"TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|^PASS$|^AUTH(?!OR(?!IZ))|AUTH$|KEYS?$",
)
_SHOWN_KEYS = 8
_SHOWN_CHARS = 120


def redact_url(url: str) -> str:
    """``url`` without ``user:password@`` and with every query value hidden: safe to print, render or annotate.

    A password may hold a ``/`` (AWS secret keys do), which ends the host part for a URL parser: everything from the
    scheme to the last ``@`` that follows a ``:`` is dropped, even if that ``@`` is in the path."""
    from urllib.parse import urlsplit, urlunsplit

    url = _USERINFO_RE.sub(r"\1", url)
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable URL>"
    netloc = parts.netloc.rsplit("@", 1)[-1]
    query = "&".join(f"{item.split('=', 1)[0]}=<redacted>" for item in parts.query.split("&") if item)
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def url_credentials(url: str) -> str | None:
    """What in ``url`` looks like a credential (``user:password@``, a signature or token query parameter), or None."""
    from urllib.parse import parse_qsl, urlsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return "it cannot be parsed"
    if "@" in parts.netloc:
        return "a user name or password (user:password@host)"
    names = sorted({k for k, _v in parse_qsl(parts.query, keep_blank_values=True) if CREDENTIAL_PARAM_RE.search(k)})
    if names:
        return f"credential query parameter(s) {', '.join(names)} (a presigned or token URL)"
    return None


def has_userinfo(url: str) -> bool:
    """Whether ``url`` carries ``user@`` or ``user:password@`` (also with a ``/`` in the password)."""
    from urllib.parse import urlsplit

    if _USERINFO_RE.match(url):
        return True
    try:
        return "@" in urlsplit(url).netloc
    except ValueError:
        return False


def _redact_match(match: re.Match[str]) -> str:
    url = match.group(0)
    return redact_url(url) if re.search(r"[@?]", url.split("#", 1)[0]) else url


def redact_text(text: str) -> str:
    """``text`` with every URL in it redacted (:func:`redact_url`); URLs without user info or a query are kept."""
    return _URL_IN_TEXT_RE.sub(_redact_match, text)


def describe(value: Any, *, secret: bool = False) -> str:
    """What an error shows of ``value``, which may carry a credential.

    ``None``, booleans and numbers as they are; a mapping by its keys (``a mapping with keys apiVersion, users``),
    never its values; a list by its length; a string quoted with every URL in it redacted and cut at 120 characters,
    or, when ``secret``, by its length only.
    """
    if value is None or isinstance(value, (bool, int, float)):
        return repr(value)
    if isinstance(value, Mapping):
        keys = sorted(redact_text(str(k))[:40] for k in value)
        if not keys:
            return "an empty mapping"
        more = f", ... ({len(keys)} keys)" if len(keys) > _SHOWN_KEYS else ""
        return f"a mapping with keys {', '.join(keys[:_SHOWN_KEYS])}{more}"
    if isinstance(value, (list, tuple)):
        return "an empty list" if not value else f"a list of {len(value)} item{'' if len(value) == 1 else 's'}"
    if isinstance(value, str):
        if secret:
            return f"a string of {len(value)} characters (not shown)"
        text = redact_text(value)
        return repr(text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "...")
    return f"a {type(value).__name__}"


def credential_name(name: str) -> bool:
    """Whether an environment variable called ``name`` looks like it holds a credential (``HF_TOKEN``,
    ``AWS_SECRET_ACCESS_KEY``, ``PROXY_PASSWORD``, ``API_KEY``, ``BASIC_AUTH``; not ``KEYBOARD``, ``GIT_AUTHOR``)."""
    return any(_CREDENTIAL_WORD_RE.search(word) for word in re.split(r"[^A-Z0-9]+", name.upper()) if word)


def value_credentials(value: str) -> str | None:
    """What in a plain value looks like a credential: a URL in it with user info or a token query parameter, or a
    scheme-less ``user:password@host``; None when nothing does."""
    for match in _URL_IN_TEXT_RE.finditer(value):
        found = url_credentials(match.group(0))
        if found:
            return found
    if _BARE_USERINFO_RE.match(value.strip()):
        return "a user name or password (user:password@host)"
    return None
