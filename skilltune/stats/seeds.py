"""Seeds derived from named parts: the same parts give the same seed, or random stream, on any machine."""

from __future__ import annotations

import hashlib
import random


def _digest(parts: tuple[object, ...]) -> bytes:
    return hashlib.sha256("|".join(str(p) for p in parts).encode("utf-8")).digest()


def derived_seed(*parts: object) -> int:
    """A 31-bit seed from ``parts`` (a model call's ``seed``, a replicate's)."""
    return int.from_bytes(_digest(parts)[:4], "big") & 0x7FFFFFFF


def seeded_random(*parts: object) -> random.Random:
    """A random stream seeded from ``parts`` (the mock agent's and the mock drafter's choices)."""
    return random.Random(int.from_bytes(_digest(parts)[:8], "big"))
