"""Training runs: ``train()`` starts one, ``resume()`` continues one.

The package names the parts of a run: ``api`` (train/resume, the run directory's layout),
``config`` (settings, and what a resume may change), ``context`` (the parts a run works
with), ``session`` (signals, STOP, TERMINAL), ``units`` (their order and what finished
ones say), ``rollouts``, ``step``, ``epoch`` (the slow update), ``gating`` (lint, gate and
close, shared by both), ``final`` (the held-out comparison), ``budget`` and ``loop``.
"""

from __future__ import annotations

from skilltune.runfiles import TrainConfig
from skilltune.training.api import TrainResult, resume, train

__all__ = ["TrainConfig", "TrainResult", "resume", "train"]
