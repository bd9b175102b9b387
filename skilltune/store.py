"""Files on disk: atomic writes, canonical JSON, content hashes and secret redaction.

Every file skilltune writes goes through ``write_text``/``write_json`` (temp file
+ rename), so a killed process never leaves a half-written record behind. The run
directory's layout is in ``rundir.py``, its files' schemas in ``skilltune.runfiles``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace: the form every content hash is taken over."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


_UMASK = _umask()


def write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (temp file in the same folder + rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)  # mkstemp makes 0600; run files are as readable as any other
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: Path, value: Any) -> None:
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    write_text(path, json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False) + "\n")


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    write_text(path, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def iter_tree(root: Path, *, hidden: bool = False) -> Iterator[Path]:
    """Regular files under ``root`` in sorted order, skipping caches and (unless ``hidden``) dot-files."""
    if not root.is_dir():
        return
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if any(part == "__pycache__" or (part.startswith(".") and not hidden) for part in rel.parts):
            continue
        if path.is_file():
            yield path


# --- secrets: never written to disk ----------------------------------------------------------

_SECRET_WORDS = (
    "key",
    "token",
    "secret",
    "password",
    "passwd",
    "credential",
    "credentials",
    "auth",
    "cookie",
)
REDACTED = "***redacted***"


def is_secret_key(key: str) -> bool:
    """api_key, authToken, password... but not author, tokens_in or api_key_env (a variable's name)."""
    words = [w.lower() for w in re.findall(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])", key)]
    if not words or words[-1] in ("env", "var", "file", "path"):
        return False
    return words[-1] in _SECRET_WORDS


def redact(value: Any, key: str = "") -> Any:
    """Replace values under secret keys (api_key, token...) before anything is written."""
    if isinstance(value, dict):
        return {k: redact(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v, key) for v in value]
    if isinstance(value, str) and is_secret_key(key):
        return REDACTED
    return value
