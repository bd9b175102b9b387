"""How a run file is versioned: read checks ``schema_version``, migrates older files, refuses newer."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Self

from pydantic import BaseModel, SerializerFunctionWrapHandler, ValidationError, model_serializer

from skilltune.errors import UsageError
from skilltune.store import write_json
from skilltune.validation import field_problems

SCHEMA_VERSION = 10
Migration = Callable[[dict[str, Any]], dict[str, Any]]


class RunFileError(UsageError):
    """A run file this skilltune cannot read (exit 2: nothing is written)."""


class NewerRunFileError(RunFileError):
    """Written by a newer skilltune."""


class OldRunFileError(RunFileError):
    """Written by an older skilltune whose format cannot be migrated."""


def upgrade(raw: dict[str, Any], migrations: dict[int, Migration], what: str) -> dict[str, Any]:
    version = raw.get("schema_version", 1)  # files of schema 1 often carried none
    if not isinstance(version, int) or version < 1:
        raise RunFileError(f"{what}: schema_version {version!r} is not a version number")
    if version > SCHEMA_VERSION:
        raise NewerRunFileError(
            f"{what} was written by a newer skilltune (run schema {version}; this one reads up to "
            f"{SCHEMA_VERSION}): upgrade skilltune (pip install -U skilltune) to read or resume this run"
        )
    while version < SCHEMA_VERSION:
        step = migrations.get(version, _same_shape)
        if step is _REFUSED:
            raise OldRunFileError(
                f"{what} was written by an older skilltune (run schema {version}) in a form this one "
                f"cannot read (schema {SCHEMA_VERSION}); finish it with the skilltune that started it, "
                "or start a new run"
            )
        raw = step(dict(raw))
        version += 1
        raw["schema_version"] = version
    return raw


def _same_shape(raw: dict[str, Any]) -> dict[str, Any]:
    return raw


def _refused(raw: dict[str, Any]) -> dict[str, Any]:
    raise AssertionError("never called: marks a version that cannot be migrated")


_REFUSED: Migration = _refused


class RunFile(BaseModel):
    """A JSON file of a run: ``read`` checks and migrates its version, ``write`` stamps the current one.

    ``MIGRATIONS[v]`` turns the raw dict of version ``v`` into version ``v + 1`` (a version
    missing from it changed nothing in this file; ``_REFUSED`` marks one that cannot be read).
    """

    MIGRATIONS: ClassVar[dict[int, Migration]] = {}
    # Fields left out of the file while empty (None, [] or {}): fields added within a schema version
    # for what only some runs have, so the files of the others stay byte for byte as they were.
    OMIT_WHEN_EMPTY: ClassVar[tuple[str, ...]] = ()

    schema_version: int = SCHEMA_VERSION

    @model_serializer(mode="wrap")
    def _omit_empty(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict):
            for key in self.omitted(data):
                data.pop(key, None)
        return data

    def omitted(self, data: dict[str, Any]) -> list[str]:
        """The keys of ``data`` (this file dumped) that the file leaves out: ``OMIT_WHEN_EMPTY``'s empty ones."""
        return [key for key in self.OMIT_WHEN_EMPTY if key in data and data[key] in (None, [], {})]

    @classmethod
    def parse(cls, raw: Any, what: str) -> Self:
        """Validate ``raw`` (a decoded JSON object) read from ``what`` (a path, for messages)."""
        if not isinstance(raw, dict):
            raise RunFileError(f"{what}: expected a JSON object, found {type(raw).__name__}")
        raw = upgrade(raw, cls.MIGRATIONS, what)
        try:
            return cls.model_validate(raw)
        except ValidationError as exc:
            first = field_problems(exc, limit=1)[0]
            raise RunFileError(
                f"{what}: not a valid {cls.__name__} ({first}); the file is damaged: "
                "restore it, or delete its unit folder to run that unit again"
            ) from None

    @classmethod
    def read(cls, path: Path) -> Self:
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise RunFileError(f"{path}: not valid JSON ({exc}); the file is damaged") from None
        return cls.parse(raw, str(path))

    def write(self, path: Path) -> None:
        write_json(path, self.model_copy(update={"schema_version": SCHEMA_VERSION}))
