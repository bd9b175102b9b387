"""Plug-in registries fed by entry points.

Built-in backends, scorers, gates and proposers are declared as entry points in
pyproject.toml, exactly like third-party ones, so there is one door in. Entry
points are loaded one by one when asked for by name, so a broken third-party
plug-in only breaks itself. ``register`` adds an object at run time (tests,
notebooks); it wins over an entry point of the same name.
"""

from __future__ import annotations

import threading
from importlib.metadata import EntryPoint, entry_points
from typing import Generic, TypeVar

from skilltune.errors import UsageError

T = TypeVar("T")


class Registry(Generic[T]):
    """Name -> plug-in object for one entry-point group."""

    def __init__(self, group: str, kind: str) -> None:
        self.group = group
        self.kind = kind
        self._points: dict[str, EntryPoint] | None = None
        self._loaded: dict[str, T] = {}
        self._runtime: dict[str, T] = {}
        self._lock = threading.Lock()

    def _entry_points(self) -> dict[str, EntryPoint]:
        with self._lock:
            if self._points is None:
                self._points = {ep.name: ep for ep in entry_points(group=self.group)}
            return self._points

    def register(self, name: str, obj: T) -> None:
        self._runtime[name] = obj

    def unregister(self, name: str) -> None:
        self._runtime.pop(name, None)

    def names(self) -> list[str]:
        return sorted(set(self._entry_points()) | set(self._runtime))

    def find(self, name: str) -> T | None:
        if name in self._runtime:
            return self._runtime[name]
        point = self._entry_points().get(name)
        if point is None:
            return None
        with self._lock:
            if name not in self._loaded:
                try:
                    self._loaded[name] = point.load()
                except Exception as exc:
                    raise UsageError(
                        f"the {self.kind} plug-in {name!r} ({point.value}) failed to load: "
                        f"{type(exc).__name__}: {exc}; reinstall or remove the package that provides it"
                    ) from None
            return self._loaded[name]

    def get(self, name: str) -> T:
        found = self.find(name)
        if found is None:
            known = ", ".join(self.names()) or "none: is skilltune installed (pip install -e .)?"
            raise UsageError(f"unknown {self.kind} {name!r} (known: {known})")
        return found
