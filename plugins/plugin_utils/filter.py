# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The one wrapper of the collection's filters: one error dialect for every ``plugins/filter/*.py``.

A filter is a function decorated with :func:`gpufleet_filter`; its name is the function's name. It raises
:class:`GpufleetError` (``FleetValidationError`` included: one line per ``path: reason``) for whatever its input gets
wrong -- argument checks included -- and the wrapper turns it into ``AnsibleFilterError("<filter>: <message>")``, the
same shape for every filter, as action plugins have ``{failed, msg, errors}`` (``action.py``). Anything else is a bug
and propagates with its traceback. ``plain=True`` hands the function its arguments as plain data (``to_plain``:
Ansible's tagged and lazy values stripped), a value that is not plain data being the filter's error too.

A file's ``FilterModule.filters()`` returns :func:`filter_map` of its filters.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar, overload

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.serving.plugins.module_utils.errors import GpufleetError
from ansible_collections.gpufleet.serving.plugins.module_utils.plain import to_plain

F = TypeVar("F", bound=Callable[..., Any])


def filter_error(name: str, exc: GpufleetError) -> AnsibleFilterError:
    """The error a filter named ``name`` raises for ``exc``: ``<name>: <message>``."""
    return AnsibleFilterError(f"{name}: {exc}")


@overload
def gpufleet_filter(func: F, /) -> F: ...


@overload
def gpufleet_filter(*, plain: bool = False) -> Callable[[F], F]: ...


def gpufleet_filter(func: F | None = None, /, *, plain: bool = False) -> F | Callable[[F], F]:
    """Make ``func`` one of the collection's filters (``@gpufleet_filter`` or ``@gpufleet_filter(plain=True)``)."""

    def wrap(function: F) -> F:
        name = function.__name__

        @functools.wraps(function)
        def run(*args: Any, **kwargs: Any) -> Any:
            try:
                if plain:
                    args = tuple(to_plain(a, f"argument {i}") for i, a in enumerate(args))
                    kwargs = {k: to_plain(v, k) for k, v in kwargs.items()}
                return function(*args, **kwargs)
            except GpufleetError as exc:
                raise filter_error(name, exc) from exc

        run.gpufleet_filter = name  # type: ignore[attr-defined]  # what tests check every filter carries
        return run  # type: ignore[return-value]

    return wrap if func is None else wrap(func)


def filter_map(*filters: Callable[..., Any]) -> dict[str, Callable[..., Any]]:
    """``{name: filter}`` for ``FilterModule.filters()``."""
    return {f.__name__: f for f in filters}
