"""Progress of a training run: a Rich live view on a terminal, plain lines otherwise."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Protocol, TextIO

from rich.console import Console
from rich.live import Live
from rich.table import Table

from skilltune.textfmt import duration, fmt


@dataclass
class RunProgress:
    """What the live view shows; every figure is also derivable from the run directory."""

    tag: str = ""
    step: int = 0
    max_steps: int = 0
    epoch: int = 0
    phase: str = ""
    rollouts_done: int = 0
    rollouts_planned: int = 0
    seed_val: float | None = None
    best_val: float | None = None
    last_verdict: str = ""
    started: float = field(default_factory=time.monotonic)
    session_rollouts: int = 0

    def eta_seconds(self) -> float | None:
        if self.session_rollouts == 0 or self.rollouts_planned <= self.rollouts_done:
            return None
        rate = (time.monotonic() - self.started) / self.session_rollouts
        return rate * (self.rollouts_planned - self.rollouts_done)


WARNING = "warning: "  # lines starting with this are shown even by a quiet reporter


class Reporter(Protocol):
    def update(self, progress: RunProgress) -> None: ...
    def line(self, text: str) -> None: ...
    def close(self) -> None: ...


class PlainReporter:
    """One line per event; nothing per rollout (logs stay short on overnight runs)."""

    def __init__(self, stream: TextIO | None = None, quiet: bool = False) -> None:
        self.stream = stream or sys.stderr
        self.quiet = quiet

    def update(self, progress: RunProgress) -> None:
        return None

    def line(self, text: str) -> None:
        if not self.quiet or text.startswith(WARNING):  # quiet hides progress, never a warning
            print(text, file=self.stream, flush=True)

    def close(self) -> None:
        return None


class LiveReporter:
    """A Rich live table: step, epoch, rollouts done / planned, current and best val, verdict, ETA."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.live = Live(console=console, refresh_per_second=4, transient=False)
        self.live.start()

    def _render(self, p: RunProgress) -> Table:
        table = Table(show_header=True, title=f"skilltune train {p.tag}", title_justify="left")
        for col in (
            "step",
            "epoch",
            "phase",
            "rollouts",
            "seed val",
            "best val",
            "last verdict",
            "ETA",
        ):
            table.add_column(col)
        table.add_row(
            f"{p.step}/{p.max_steps}",
            str(p.epoch),
            p.phase,
            f"{p.rollouts_done}/{p.rollouts_planned}",
            fmt(p.seed_val),
            fmt(p.best_val),
            p.last_verdict,
            duration(p.eta_seconds()),
        )
        return table

    def update(self, progress: RunProgress) -> None:
        self.live.update(self._render(progress))

    def line(self, text: str) -> None:
        self.live.console.print(text, highlight=False, markup=False)

    def close(self) -> None:
        self.live.stop()
