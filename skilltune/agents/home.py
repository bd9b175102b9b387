"""A CLI's files: where the user's are (by the CLI's own variables), how its private settings are written.

A CLI backend declares the user's files it needs (credential files, a settings key or two) as
``UserFile`` locations and its private settings as one document; ``CLIBackend`` links the
former and writes the latter (JSON, or TOML for a ``.toml`` path), with the user's option
merged over skilltune's defaults by ``deep_merge``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def user_home() -> Path:
    """The user's HOME (``$HOME``, else the account's home directory)."""
    return Path(os.environ.get("HOME") or Path.home())


@dataclass(frozen=True)
class UserFile:
    """Where a CLI looks for one of the user's files: ``name`` in the directory the user's
    ``variable`` names when it is set (``CLAUDE_CONFIG_DIR``, ``XDG_DATA_HOME``...), else in
    ``home_dir`` of the user's HOME. A set variable is authoritative, as it is for the CLI:
    the file is never looked for in the HOME default then."""

    name: str
    variable: str | None = None
    home_dir: str = ""

    def path(self) -> Path:
        configured = os.environ.get(self.variable) if self.variable else None
        base = Path(configured).expanduser() if configured else user_home() / self.home_dir
        return base / self.name


def deep_merge(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """``extra`` over ``base``: mappings present in both merge key by key, any other value of
    ``extra`` replaces ``base``'s (a list included). Neither argument is changed."""
    out = dict(base)
    for key, value in extra.items():
        current = out.get(key)
        if isinstance(value, Mapping) and isinstance(current, Mapping):
            out[key] = deep_merge(current, value)
        else:
            out[key] = value
    return out


def render_settings(path: str, document: Mapping[str, Any]) -> str:
    """The text of a settings file at ``path``: TOML for a ``.toml`` file, JSON otherwise."""
    if path.endswith(".toml"):
        return toml_document(document)
    return json.dumps(document, indent=2) + "\n"


_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def toml_value(value: Any) -> str:
    """A TOML literal for a str, bool, int, float or a list of those (strings as basic strings)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    text = json.dumps(str(value), ensure_ascii=False)  # JSON string escapes are valid TOML escapes
    return text.replace("\x7f", "\\u007f")


def _toml_key(key: str) -> str:
    return key if _BARE_KEY.match(key) else json.dumps(key, ensure_ascii=False)


def toml_document(document: Mapping[str, Any]) -> str:
    """``document`` as TOML: each level's plain values as ``key = value``, then its tables as
    ``[dotted.name]`` sections (a table holding only tables gets no header of its own)."""
    lines: list[str] = []

    def table(name: tuple[str, ...], values: Mapping[str, Any]) -> None:
        plain = [(k, v) for k, v in values.items() if not isinstance(v, Mapping)]
        nested = [(k, v) for k, v in values.items() if isinstance(v, Mapping)]
        if name and (plain or not nested):
            lines.extend(["", "[" + ".".join(_toml_key(part) for part in name) + "]"])
        lines.extend(f"{_toml_key(k)} = {toml_value(v)}" for k, v in plain)
        for key, value in nested:
            table((*name, key), value)

    table((), document)
    return "\n".join(lines).lstrip("\n") + "\n"
