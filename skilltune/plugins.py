"""Plug-in registries fed by entry points.

Built-in backends and scorers are declared as entry points in pyproject.toml,
exactly like third-party ones, so there is one door in. ``register`` adds an
object at run time (tests, notebooks); it wins over an entry point of the same name.
"""

from __future__ import annotations

import threading
from importlib.metadata import entry_points
from typing import Generic, TypeVar

from skilltune.errors import UsageError

T = TypeVar("T")


class Registry(Generic[T]):
    """Name -> plug-in object for one entry-point group, loaded lazily and once."""

    def __init__(self, group: str, kind: str) -> None:
        self.group = group
        self.kind = kind
        self._loaded: dict[str, T] = {}
        self._runtime: dict[str, T] = {}
        self._lock = threading.Lock()
        self._scanned = False

    def _scan(self) -> None:
        with self._lock:
            if self._scanned:
                return
            for ep in entry_points(group=self.group):
                if ep.name not in self._loaded:
                    self._loaded[ep.name] = ep.load()
            self._scanned = True

    def register(self, name: str, obj: T) -> None:
        self._runtime[name] = obj

    def unregister(self, name: str) -> None:
        self._runtime.pop(name, None)

    def names(self) -> list[str]:
        self._scan()
        return sorted(set(self._loaded) | set(self._runtime))

    def find(self, name: str) -> T | None:
        if name in self._runtime:
            return self._runtime[name]
        self._scan()
        return self._loaded.get(name)

    def get(self, name: str) -> T:
        found = self.find(name)
        if found is None:
            known = ", ".join(self.names()) or "none: is skilltune installed (pip install -e .)?"
            raise UsageError(f"unknown {self.kind} {name!r} (known: {known})")
        return found
