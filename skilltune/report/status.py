"""``skilltune status``: one terminal screen (Rich) for a live or finished run."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from skilltune.report.model import BudgetLine, RunSummary
from skilltune.textfmt import duration, fmt, signed

STATE_STYLE = {
    "success": "bold green", "no-progress": "bold", "running": "bold blue", "stopped": "bold yellow",
    "exhausted": "bold yellow", "interrupted": "bold yellow", "blocked": "bold red", "crash": "bold red",
}  # fmt: skip
LAST_VERDICTS = 5
# a verdict's colour (discard: the terminal's default); carried: a step carried on ungated, not a discard
VERDICT_STYLE = {"keep": "green", "carried": "cyan", "running": "blue", "unfinished": "yellow"}


def status_screen(s: RunSummary) -> RenderableType:
    """State, step, ETA, best val, the last verdicts, budget left and infra errors of the run."""
    head = Text.assemble((f"{s.tag}  ", "bold"), (s.state, STATE_STYLE.get(s.state, "bold")), f"  {s.reason}")
    facts = Table.grid(padding=(0, 2))
    facts.add_column(style="dim")
    facts.add_column()
    steps = sum(1 for u in s.finished_units if u.kind == "step")
    facts.add_row(
        "step",
        f"{steps} of {s.planned_steps} steps ({len(s.finished_units)} of {s.planned_units} units, {s.kept} kept)",
    )
    if s.current:
        facts.add_row("now", s.current)
    if s.live:
        facts.add_row("ETA", f"{duration(s.eta_seconds)} (remaining units at the mean unit's wall time)")
    facts.add_row("val", f"seed {fmt(s.seed_val)} -> best {fmt(s.best_val)} ({s.best[:12]})")
    gain = s.gain
    if gain is not None:
        held = s.held_out
        split = held.split if held else "test"
        source = f" (from {held.source}/comparison.json)" if held and held.source else ""
        facts.add_row(
            "held-out",
            f"best - S0 on {split}: {gain.diff:+.3f} [{signed(gain.low)}, {signed(gain.high)}] ({gain.verdict})"
            + source,
        )
    triggers = [(a.name, a.trigger) for a in (s.held_out.arms if s.held_out else []) if a.trigger]
    if triggers:  # trigger tasks: precision and recall, each query counted once
        facts.add_row("trigger", "\n".join(f"{name} {stats.line()}" for name, stats in triggers))
    own = next((t.table for t in s.transfers if t.own and t.table is not None), None)
    if own is not None:  # several agents: each one's held-out difference (final/transfer.json)
        facts.add_row(
            "per agent",
            "; ".join(
                f"{c.label} {p.b} - {p.a} {p.diff:+.3f} ({p.verdict})"
                for c in own.agents
                for p in c.pairs[:1]
            ),
        )
    harms = [harm.line() for harm in s.hurt]
    if harms:  # the pooled figure above may gain while an agent loses: said beside it, in red
        facts.add_row("hurt", Text("\n".join(harms), style="bold red"))
    if gain is None and s.held_out_missing:
        facts.add_row("held-out", "\n".join(["none. " + s.held_out_missing, *s.held_out_commands]))
    proposals = s.proposal_counts
    if proposals is not None:  # steps of several asks (--proposals): what became of the proposals
        others = proposals.others()
        facts.add_row("proposals", proposals.sentence() + (f"; not kept: {others}" if others else ""))
    t = s.totals
    spent = f"{t.rollouts:,} rollouts, {t.tokens:,} tokens, ${t.usd:.2f}, {duration(t.seconds)} wall"
    facts.add_row("spent", spent + (f" ({t.cached:,} rollouts from the cache)" if t.cached else ""))
    for line in s.budgets:
        facts.add_row(f"budget {line.name}", _budget_left(line))
    if not s.budgets:
        facts.add_row("budget", "none set")
    failures: dict[str, int] = {}
    for f in s.infra_errors:
        failures[f.status] = failures.get(f.status, 0) + 1
    facts.add_row(
        "infra errors",
        ", ".join(f"{n} {status}" for status, n in sorted(failures.items())) if failures else "none",
    )

    verdicts = Table(title="last verdicts", title_justify="left", show_edge=False, pad_edge=False)
    columns = ["unit", "verdict", "val cand.", "val inc.", *(["proposals"] if proposals else []), "reason"]
    if proposals:
        verdicts.caption, verdicts.caption_justify = "proposals: asked / screened / kept", "left"
    for col in columns:
        verdicts.add_column(col, no_wrap=col != "reason", justify="right" if col == "proposals" else "left")
    for u in s.units[-LAST_VERDICTS:]:
        style = VERDICT_STYLE.get(u.verdict, "")
        asked = [u.proposal_counts.short() if u.proposal_counts else "-"] if proposals else []
        verdicts.add_row(
            u.name,
            Text(u.verdict, style=style),
            fmt(u.val_candidate),
            fmt(u.val_incumbent),
            *asked,
            u.reason or u.decision,
        )
        for a in u.agents:  # several agents: each one's evidence in this gate, a line each
            hurt = a.hurt and u.agents_gate == "no-worse"
            verdicts.add_row(
                f"  {a.label}",
                Text("hurt" if a.hurt else "", style="red" if hurt else "yellow"),
                fmt(a.val_candidate),
                fmt(a.val_incumbent),
                *([""] if proposals else []),
                _agent_note(a.mean_diff, a.p_value, veto=hurt),
            )
    parts: list[RenderableType] = [head, facts]
    if s.units:
        parts.append(verdicts)
    if s.infra_errors:
        last = s.infra_errors[-3:]
        parts.append(
            Text(
                "\n".join(f"  {f.where} {f.task_id}: {f.status}: {f.reason[:120]}" for f in last), style="red"
            )
        )
    shown = [w for w in s.warnings if not any(w.startswith(line) for line in harms)]  # the hurt row says them
    for warning in shown[:4]:
        parts.append(Text(f"warning: {warning}", style="yellow"))
    return Group(*parts)


def _agent_note(diff: float | None, p_value: float | None, *, veto: bool) -> str:
    """One agent's line in the verdicts: its difference, its regression test's p and the veto."""
    parts = [f"diff {diff:+.3f}" if diff is not None else "diff -"]
    if p_value is not None:
        parts.append(f"p(worse) {p_value:.3g}")
    if veto:
        parts.append("vetoes a keep (--agents-gate no-worse)")
    return ", ".join(parts)


def _budget_left(line: BudgetLine) -> str:
    """What is left of a budget (hours as a duration); a unit may run past it (budgets are checked
    before each unit): then none is left, and by how much it went over."""

    def show(value: float) -> str:
        return duration(value * 3600) if line.name == "hours" else f"{value:,.6g}"

    if line.left < 0:
        return f"none left of {show(line.limit)} (over by {show(-line.left)})"
    return f"{show(line.left)} left of {show(line.limit)}"
