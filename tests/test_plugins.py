"""Plug-in registries (skilltune/plugins.py): a broken entry point breaks only itself."""

from __future__ import annotations

import json
from importlib.metadata import EntryPoint
from typing import Any

import pytest

from skilltune.errors import UsageError
from skilltune.plugins import Registry


def test_a_broken_plugin_only_breaks_itself() -> None:
    """A registry with a good and a broken entry point loads the good one; get("bad") names the bad one."""
    group = "skilltune.regression-test"
    registry: Registry[Any] = Registry(group, "widget")
    registry._points = {
        "good": EntryPoint(name="good", value="json:dumps", group=group),
        "bad": EntryPoint(name="bad", value="no_such_module_xyz:Thing", group=group),
    }
    assert registry.names() == ["bad", "good"]
    with pytest.raises(UsageError, match=r"widget plug-in 'bad'.*no_such_module_xyz"):
        registry.get("bad")
    assert registry.get("good") is json.dumps
    with pytest.raises(UsageError, match="'bad'"):
        registry.find("bad")
