"""skilltune/metric.py: the metric names, and a misspelt one refused with the names there are."""

from __future__ import annotations

import pytest

from skilltune.errors import UsageError
from skilltune.metric import METRICS, as_metric


def test_every_metric_reads_as_itself_and_another_name_is_refused() -> None:
    assert METRICS == ("hard", "soft", "mixed")
    assert [as_metric(m) for m in METRICS] == list(METRICS)
    with pytest.raises(UsageError, match="unknown metric 'f1': use hard, soft or mixed"):
        as_metric("f1")
