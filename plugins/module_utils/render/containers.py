# Copyright: gpufleet.serving contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Reading and editing a pod template's containers: command/args as tokens, flags, the model a vLLM engine serves,
environment variables. Shared by the renderer and the backends (a container is a template's plain dict)."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

_SHELLS = frozenset({"sh", "bash", "dash", "ash", "zsh", "ksh"})


def engine_container(spec: dict[str, Any]) -> dict[str, Any]:
    return spec["containers"][0]


def container_tokens(container: Mapping[str, Any]) -> list[str]:
    """Command + args as shell-like tokens (a ``sh -c`` script is split into its words)."""
    out: list[str] = []
    for item in [*(container.get("command") or []), *(container.get("args") or [])]:
        text = str(item)
        if any(ch.isspace() for ch in text):
            try:
                out.extend(shlex.split(text))
            except ValueError:
                out.extend(text.split())
        else:
            out.append(text)
    return out


def flag_value(tokens: list[str], *flags: str) -> str | None:
    for i, token in enumerate(tokens):
        for flag in flags:
            if token.startswith(f"{flag}="):
                return token.split("=", 1)[1]
            if token == flag and i + 1 < len(tokens):
                return tokens[i + 1]
    return None


def is_vllm(container: Mapping[str, Any]) -> bool:
    return "vllm" in str(container.get("image", "")).lower() or any(
        "vllm" in str(part).lower() for part in container.get("command") or []
    )


def is_sglang(container: Mapping[str, Any]) -> bool:
    """SGLang: ``sglang`` in the image (lmsysorg/sglang) or in the command line (``python3 -m sglang.launch_server``)."""
    return "sglang" in str(container.get("image", "")).lower() or any(
        "sglang" in token.lower() for token in container_tokens(container)
    )


#: The HTTP path that answers 200 once an engine serves (and not while it loads), by engine.
HEALTH_PATHS: dict[str, str] = {"vllm": "/health", "sglang": "/health"}


def engine_kind(container: Mapping[str, Any]) -> str | None:
    """``vllm``, ``sglang`` or None (an engine the collection knows no health endpoint of)."""
    if is_vllm(container):
        return "vllm"
    if is_sglang(container):
        return "sglang"
    return None


def health_path(container: Mapping[str, Any]) -> str | None:
    """The engine's health endpoint (:data:`HEALTH_PATHS`), or None: probe the port over TCP."""
    kind = engine_kind(container)
    return None if kind is None else HEALTH_PATHS[kind]


def is_shell(container: Mapping[str, Any]) -> bool:
    command = [str(c) for c in container.get("command") or []]
    return (
        bool(command)
        and command[0].rsplit("/", 1)[-1] in _SHELLS
        and "-c" in [*command, *(container.get("args") or [])]
    )


def model_arg(container: Mapping[str, Any], tokens: list[str]) -> str | None:
    """The model a vLLM container names: ``--model[=]X``, ``vllm serve X`` or (image entrypoint) a first arg ``X``."""
    value = flag_value(tokens, "--model")
    if value is not None:
        return value
    for i in range(len(tokens) - 2):
        if tokens[i].rsplit("/", 1)[-1] == "vllm" and tokens[i + 1] == "serve" and not tokens[i + 2].startswith("-"):
            return tokens[i + 2]
    args = container.get("args") or []
    if not container.get("command") and args and not str(args[0]).startswith("-"):
        return str(args[0])  # vllm/vllm-openai's entrypoint is `vllm serve`: a first positional arg is the model
    return None


def drop_model_args(container: dict[str, Any]) -> None:
    """Remove ``--model[=]X`` and a leading positional model from ``args`` (KServe's presets serve /mnt/models)."""
    args = [str(a) for a in container.get("args") or []]
    out: list[str] = []
    skip = False
    for i, arg in enumerate(args):
        if skip:
            skip = False
            continue
        if arg.startswith("--model="):
            continue
        if arg == "--model":
            skip = True
            continue
        if i == 0 and not arg.startswith("-"):
            continue
        out.append(arg)
    if out:
        container["args"] = out
    else:
        container.pop("args", None)


def set_env(container: dict[str, Any], entry: dict[str, Any], *, override: bool) -> None:
    env = container.setdefault("env", [])
    for i, existing in enumerate(env):
        if isinstance(existing, Mapping) and existing.get("name") == entry["name"]:
            if override:
                env[i] = entry
            return
    env.append(entry)


def has_env(container: Mapping[str, Any], name: str) -> bool:
    return any(isinstance(e, Mapping) and e.get("name") == name for e in container.get("env") or [])
