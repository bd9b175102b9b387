"""A pydantic ValidationError as the project's messages: one per refused field, naming it and the fix."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

if TYPE_CHECKING:
    from pydantic import BaseModel, ValidationError
    from pydantic_core import ErrorDetails

# Errors whose text a validator wrote for the user: shown as they are.
_OWN_MESSAGE = ("value_error", "assertion_error")
_SHOWN_CHARS = 60


class Wording(TypedDict, total=False):
    """How ``field_problem`` words its messages (see there)."""

    model: type[BaseModel] | None
    raw: Mapping[str, Any] | None
    owner: str | None
    noun: str
    top: str
    described: bool
    unknown_hint: str


def field_problems(
    error: ValidationError, *, limit: int | None = None, **wording: Unpack[Wording]
) -> list[str]:
    """One message per error of ``error`` (repeats dropped, at most ``limit``); see ``field_problem``."""
    messages: list[str] = []
    for err in error.errors():
        message = field_problem(err, **wording)
        if message not in messages:
            messages.append(message)
    return messages[:limit]


def field_problem(
    err: ErrorDetails,
    *,
    model: type[BaseModel] | None = None,
    raw: Mapping[str, Any] | None = None,
    owner: str | None = None,
    noun: str = "",
    top: str = "(top)",
    described: bool = False,
    unknown_hint: str = "fix the spelling or remove it",
) -> str:
    """One error of a ValidationError as a fix-it message.

    ``model`` is the model that refused (its fields are listed for an unknown key); ``raw`` what
    it was given (the field is then named by its key in ``raw`` and the value shown is the
    field's, not a part of it); ``owner`` ("exact mode",
    "claude") who asks for the fields: a missing one reads "exact mode needs 'expected'", an
    unknown one "unknown agent option 'x' for claude"; ``noun`` ("agent option") is what a field
    is called ("agent option model: ..."; without one the field's name is quoted), ``top`` names
    the object itself (an error at no field). ``described``: the model's field
    descriptions say what a field must hold (the suite's), so a refused value reads "'x' must be
    <description>"; ``unknown_hint`` is the fix for an unknown key. A validator's own ValueError
    is shown as written (with the field's name when it does not say it).
    """
    loc = err["loc"]
    name = str(loc[0]) if loc else ""
    key = ".".join(str(part) for part in loc) or top
    shown_key = name if raw is not None and loc else key
    label = f"{noun} {shown_key}" if noun else repr(shown_key) if loc else key
    declared = {info.alias or field: info for field, info in model.model_fields.items()} if model else {}
    what = declared[name].description if described and name in declared else None
    if err["type"] == "missing":
        message = f"{owner} needs {key!r}" if owner else f"missing {key!r}"
        return message + (f" ({what})" if what else "")
    if err["type"] == "extra_forbidden":
        message = f"unknown {noun or 'field'} {key!r}" + (f" for {owner}" if owner else "")
        if model is not None:
            message += f" (known: {', '.join(sorted(declared)) or 'none'})"
        return f"{message}: {unknown_hint}"
    shown = _shown(raw.get(name) if raw is not None and name in raw else err.get("input"))
    if err["type"] in _OWN_MESSAGE and "error" in err.get("ctx", {}):
        own = str(err["ctx"]["error"])
        return own if not loc or name in own else f"{label}: {own}"
    if what:
        return f"{label} must be {what} (got {shown})"
    return f"{label}: {err['msg']} (got {shown})"


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 3] + "..."
