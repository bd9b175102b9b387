"""Gates on scripted val rounds: strict and paired-z, metrics, contamination, the registry, noise."""

from __future__ import annotations

import itertools
import math
import random
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest

from skilltune.errors import UsageError
from skilltune.gate import GATES, Gate, PairedZGate, StrictGate, contaminated, make_gate
from skilltune.metric import METRICS, Metric
from skilltune.runfiles import PairedZStatistic, RolloutRecord, RolloutStatus, StrictStatistic
from skilltune.score.base import Score
from skilltune.store import read_json
from skilltune.training import train
from tests.helpers import MOCK_SKILL, MOCK_SUITE

Scores = tuple[int, float, float]  # hard, soft, mixed


def rec(
    task: str,
    value: float | Scores | None,
    *,
    replicate: int = 0,
    status: RolloutStatus = "ok",
    candidate: str = "cand",
) -> RolloutRecord:
    """A val record; ``value`` is the mixed score (hard = value >= 0.5, soft = value) or (hard, soft, mixed)."""
    score = None
    if value is not None and status in ("ok", "task_failed", "timeout"):
        hard, soft, mixed = value if isinstance(value, tuple) else (int(value >= 0.5), value, value)
        score = Score(hard=hard, soft=soft, mixed=mixed, checks=[], contract="c")
    return RolloutRecord(
        task_id=task,
        split="val",
        phase="gate",
        replicate=replicate,
        seed=0,
        candidate=candidate,
        agent="mock",
        options_hash="o" * 64,
        task_hash="t" * 64,
        status=status,
        score=score,
        wall_s=0.0,
        started_at="2024-01-01T00:00:00+00:00",
    )


def arm(values: dict[str, float | Scores | None], candidate: str = "cand") -> list[RolloutRecord]:
    return [rec(task, v, candidate=candidate) for task, v in values.items()]


class FakeSampler:
    """Returns scripted (candidate, incumbent) records per round and remembers the calls."""

    def __init__(self, *rounds: tuple[list[RolloutRecord], list[RolloutRecord]]) -> None:
        self.rounds = list(rounds)
        self.calls: list[tuple[int, int]] = []

    def round(self, index: int, replicates: int) -> tuple[list[RolloutRecord], list[RolloutRecord]]:
        self.calls.append((index, replicates))
        cand, inc = self.rounds[index]
        return list(cand), list(inc)


def sampler(cand: dict[str, float | Scores | None], inc: dict[str, float | Scores | None]) -> FakeSampler:
    return FakeSampler((arm(cand), arm(inc, candidate="inc")))


# --- strict --------------------------------------------------------------------------------------


def test_strict_accepts_a_strictly_greater_mean() -> None:
    s = sampler({"t1": 0.75, "t2": 0.5, "t3": 0.5}, {"t1": 0.5, "t2": 0.5, "t3": 0.5})
    verdict = StrictGate(metric="mixed", reps=1).decide(s)
    assert verdict.decision == "accept" and verdict.accept
    assert verdict.metric == "mixed"
    assert verdict.val_candidate == round(1.75 / 3, 6)
    assert verdict.val_incumbent == 0.5
    assert len(verdict.rounds) == 1
    rnd = verdict.rounds[0]
    assert (rnd.index, rnd.replicates, rnd.n_pairs, rnd.rollouts) == (0, 1, 3, 6)
    assert rnd.statistic == StrictStatistic(mean_diff=round(0.25 / 3, 6))
    assert verdict.rollouts == 6
    assert s.calls == [(0, 1)]
    assert "0.583" in verdict.reason and "0.500" in verdict.reason


@pytest.mark.parametrize(
    "cand", [{"t1": 0.5, "t2": 0.25}, {"t1": 0.25, "t2": 0.5}, {"t1": 0.5, "t2": 0.0}], ids=str
)
def test_strict_rejects_equal_or_lower(cand: dict[str, float | Scores | None]) -> None:
    verdict = StrictGate().decide(sampler(cand, {"t1": 0.5, "t2": 0.25}))
    assert verdict.decision == "reject" and not verdict.accept
    assert verdict.val_candidate is not None and verdict.val_incumbent == 0.375
    assert verdict.val_candidate <= verdict.val_incumbent


def test_strict_tiny_gain_is_accepted() -> None:
    verdict = StrictGate().decide(sampler({"t1": 0.500001}, {"t1": 0.5}))
    assert verdict.accept


def test_replicates_are_averaged_per_task_in_any_order() -> None:
    cand = [
        rec("t2", 1.0, replicate=1),
        rec("t1", 0.0, replicate=2),
        rec("t1", 1.0, replicate=0),
        rec("t2", 0.0, replicate=0),
        rec("t1", 1.0, replicate=1),
        rec("t2", 1.0, replicate=2),
    ]
    inc = [rec(t, 0.5, replicate=k, candidate="inc") for t in ("t1", "t2") for k in range(3)]
    verdicts = []
    for order in (cand, list(reversed(cand))):
        s = FakeSampler((order, inc))
        verdicts.append(StrictGate(reps=3).decide(s))
        assert s.calls == [(0, 3)]
    assert verdicts[0] == verdicts[1]
    v = verdicts[0]
    assert v.val_candidate == round(2 / 3, 6) and v.val_incumbent == 0.5
    assert v.rounds[0].n_pairs == 2 and v.rollouts == 12
    assert v.rounds[0].replicates == 3
    assert v.accept


# Per task (hard, soft, mixed): hard favours the incumbent, soft and mixed the candidate, by different margins.
METRIC_CAND: dict[str, float | Scores | None] = {"t1": (0, 0.9, 0.45), "t2": (1, 0.9, 0.95)}
METRIC_INC: dict[str, float | Scores | None] = {"t1": (1, 0.1, 0.55), "t2": (1, 0.5, 0.75)}


@pytest.mark.parametrize(
    ("metric", "decision", "cand", "inc"),
    [("hard", "reject", 0.5, 1.0), ("soft", "accept", 0.9, 0.3), ("mixed", "accept", 0.7, 0.65)],
)
def test_metric_selects_the_score(metric: Metric, decision: str, cand: float, inc: float) -> None:
    verdict = StrictGate(metric=metric).decide(sampler(METRIC_CAND, METRIC_INC))
    assert verdict.metric == metric
    assert verdict.decision == decision
    assert verdict.val_candidate == pytest.approx(cand)
    assert verdict.val_incumbent == pytest.approx(inc)


def test_metric_flips_mixed_against_hard() -> None:
    # Hard rises, soft falls by as much: mixed ties and a tie rejects.
    cand: dict[str, float | Scores | None] = {"t1": (1, 0.0, 0.5), "t2": (0, 0.5, 0.25)}
    inc: dict[str, float | Scores | None] = {"t1": (0, 1.0, 0.5), "t2": (0, 0.5, 0.25)}
    decisions = {m: StrictGate(metric=m).decide(sampler(cand, inc)).decision for m in METRICS}
    assert decisions == {"hard": "accept", "soft": "reject", "mixed": "reject"}
    # Hard rises more than soft falls: mixed follows hard.
    cand = {"t1": (1, 0.2, 0.6), "t2": (0, 0.6, 0.3)}
    inc = {"t1": (0, 0.8, 0.4), "t2": (0, 0.4, 0.2)}
    decisions = {m: StrictGate(metric=m).decide(sampler(cand, inc)).decision for m in METRICS}
    assert decisions == {"hard": "accept", "soft": "reject", "mixed": "accept"}


def test_unknown_metric_is_refused() -> None:
    with pytest.raises(UsageError, match="unknown metric 'accuracy': use hard, soft or mixed"):
        StrictGate(metric="accuracy")  # type: ignore[arg-type]  # what an untyped caller may pass


# --- contamination and missing pairs ---------------------------------------------------------------


@pytest.mark.parametrize("gate_cls", [StrictGate, PairedZGate])
@pytest.mark.parametrize("status", ["infra_error", "crashed"])
@pytest.mark.parametrize("side", ["candidate", "incumbent"])
def test_contaminated_round_is_never_decided(gate_cls: type[Gate], status: RolloutStatus, side: str) -> None:
    tasks = [f"t{i}" for i in range(8)]
    cand = [rec(t, 1.0) for t in tasks]
    inc = [rec(t, 0.0, candidate="inc") for t in tasks]
    bad = rec("t7", None, status=status, candidate="cand" if side == "candidate" else "inc")
    if side == "candidate":
        cand[-1] = bad
    else:
        inc[-1] = bad
    assert contaminated(cand + inc)
    verdict = gate_cls().decide(FakeSampler((cand, inc)))
    assert verdict.decision == "contaminated"
    assert not verdict.accept
    assert "infra" in verdict.reason
    assert verdict.rollouts == 16
    assert len(verdict.rounds) == 1 and verdict.rounds[0].n_pairs == 7


def test_scoring_errors_are_not_contamination() -> None:
    cand = [rec("t1", 1.0), rec("t2", None, status="scoring_error"), rec("t3", 1.0)]
    inc = arm({"t1": 0.0, "t2": 0.0, "t3": 0.0}, candidate="inc")
    assert not contaminated(cand + inc)
    verdict = StrictGate().decide(FakeSampler((cand, inc)))
    assert verdict.decision == "accept"
    assert verdict.rounds[0].n_pairs == 2
    assert verdict.rollouts == 6


@pytest.mark.parametrize("gate_cls", [StrictGate, PairedZGate])
def test_no_paired_task_rejects(gate_cls: type[Gate]) -> None:
    verdict = gate_cls().decide(sampler({"t1": 1.0, "t2": None}, {"t2": 0.0, "t3": 0.0}))
    assert verdict.decision == "reject"
    assert "no val task" in verdict.reason
    assert verdict.rounds[0].n_pairs == 0
    assert verdict.val_candidate is None and verdict.val_incumbent is None  # means over paired tasks only


def test_nothing_scored_rejects_without_values() -> None:
    cand = [rec("t1", None, status="scoring_error")]
    inc = [rec("t1", None, status="scoring_error", candidate="inc")]
    verdict = StrictGate().decide(FakeSampler((cand, inc)))
    assert verdict.decision == "reject"
    assert verdict.val_candidate is None and verdict.val_incumbent is None
    assert verdict.rollouts == 2


def test_strict_decides_on_paired_tasks_only() -> None:
    # Paired on t1 only: the candidate is worse there (0.9 < 1.0); t2 is unscored for the candidate.
    cand = [rec("t1", 0.9), rec("t2", None, status="scoring_error")]
    inc = arm({"t1": 1.0, "t2": 0.0}, candidate="inc")
    verdict = StrictGate().decide(FakeSampler((cand, inc)))
    stat = verdict.rounds[0].statistic
    assert isinstance(stat, StrictStatistic) and stat.mean_diff == pytest.approx(-0.1)
    assert verdict.decision == "reject"


# --- paired-z ------------------------------------------------------------------------------------


def _pz(gains: list[float], base: float = 0.4) -> FakeSampler:
    tasks = [f"t{i}" for i in range(len(gains))]
    return sampler(
        {t: round(base + g, 6) for t, g in zip(tasks, gains, strict=True)}, dict.fromkeys(tasks, base)
    )


def test_paired_z_needs_six_pairs() -> None:
    verdict = PairedZGate().decide(_pz([0.5, 0.5, 0.4, 0.5, 0.6]))
    assert verdict.decision == "reject"
    assert "only 5 paired tasks" in verdict.reason
    assert verdict.rounds[0].n_pairs == 5
    assert PairedZGate.MIN_PAIRS == 6


def test_paired_z_accepts_a_consistent_gain() -> None:
    gains = [0.2, 0.3, 0.1, 0.2, 0.3, 0.2]
    verdict = PairedZGate(metric="mixed", reps=1).decide(_pz(gains))
    assert verdict.decision == "accept"
    stat = verdict.rounds[0].statistic
    assert isinstance(stat, PairedZStatistic) and stat.z is not None
    d = sum(gains) / 6
    se = math.sqrt(sum((g - d) ** 2 for g in gains) / 5) / math.sqrt(6)
    assert stat.mean_diff == pytest.approx(d, abs=1e-6)
    assert stat.se == pytest.approx(se, abs=1e-6)
    assert stat.z == pytest.approx(d / se, abs=1e-3)
    assert stat.z >= 1.645
    assert ">= 1.645 se" in verdict.reason


def test_paired_z_rejects_a_noisy_gain() -> None:
    gains = [0.6, -0.4, 0.5, -0.3, 0.4, -0.2, 0.3, -0.3]  # mean +0.075, se ~0.14
    verdict = PairedZGate().decide(_pz(gains))
    assert verdict.decision == "reject"
    assert verdict.val_candidate is not None and verdict.val_incumbent is not None
    assert verdict.val_candidate > verdict.val_incumbent  # strict would have taken it
    assert StrictGate().decide(_pz(gains)).accept
    stat = verdict.rounds[0].statistic
    assert isinstance(stat, PairedZStatistic) and stat.z is not None and stat.z < 1.645
    assert "below 1.645 se" in verdict.reason


def test_paired_z_threshold() -> None:
    # Gains d + e_i with sample sd s: z = d * sqrt(n) / s. n = 6, e = +-0.1 alternating: s = 0.1095.
    s = math.sqrt(6 * 0.01 / 5)
    se = s / math.sqrt(6)
    for factor, decision in ((1.7, "accept"), (1.6, "reject")):
        d = factor * se
        gains = [d + e for e in (0.1, -0.1, 0.1, -0.1, 0.1, -0.1)]
        verdict = PairedZGate().decide(_pz(gains))
        assert verdict.decision == decision, (factor, verdict.reason)


def test_paired_z_equal_gains() -> None:
    assert PairedZGate().decide(_pz([0.25] * 6)).decision == "accept"
    assert PairedZGate().decide(_pz([0.0] * 6)).decision == "reject"
    assert PairedZGate().decide(_pz([-0.25] * 6)).decision == "reject"
    verdict = PairedZGate().decide(_pz([0.0] * 6))
    stat = verdict.rounds[0].statistic
    assert isinstance(stat, PairedZStatistic) and stat.z is None


# --- registry ------------------------------------------------------------------------------------


def test_gates_come_from_entry_points() -> None:
    names = GATES.names()
    assert {"strict", "paired-z"} <= set(names)
    declared = {ep.name: ep.value for ep in entry_points(group="skilltune.gates")}
    assert declared["strict"] == "skilltune.gate.onepass:StrictGate"
    assert declared["paired-z"] == "skilltune.gate.onepass:PairedZGate"
    assert GATES.get("strict") is StrictGate
    assert GATES.get("paired-z") is PairedZGate


def test_make_gate() -> None:
    gate = make_gate("paired-z", "soft", 3)
    assert isinstance(gate, PairedZGate)
    assert (gate.metric, gate.reps) == ("soft", 3)
    strict = make_gate("strict", "hard", 2)
    assert isinstance(strict, StrictGate)
    with pytest.raises(
        UsageError, match=r"unknown strict gate option 'extra' \(known: none\): fix the spelling"
    ):
        make_gate("strict", "hard", 2, extra=1)
    with pytest.raises(UsageError, match="sequential gate option max_reps: "):
        make_gate("sequential", "mixed", 1, max_reps=0)
    s = sampler({"t1": 1.0}, {"t1": 0.0})
    strict.decide(s)
    assert s.calls == [(0, 2)]


def test_unknown_gate_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match=r"unknown gate 'lenient'.*paired-z.*strict"):
        make_gate("lenient", "mixed", 1)


def test_runtime_registered_gate() -> None:
    class AlwaysGate(StrictGate):
        name = "always"

    GATES.register("always", AlwaysGate)
    try:
        assert "always" in GATES.names()
        assert isinstance(make_gate("always", "mixed", 1), AlwaysGate)
    finally:
        GATES.unregister("always")
    assert "always" not in GATES.names()


# --- pure noise ----------------------------------------------------------------------------------

NOISE_DECISIONS = 2000
NOISE_TASKS = 8


def _exact_accept_rates() -> tuple[float, float]:
    """Exact acceptance on pure noise (8 tasks, 1 replicate, p = 0.5): strict and paired-z."""
    strict = (1 - math.comb(2 * NOISE_TASKS, NOISE_TASKS) / 2 ** (2 * NOISE_TASKS)) / 2
    weight = {-1: 0.25, 0: 0.5, 1: 0.25}
    pz = 0.0
    for diffs in itertools.product((-1, 0, 1), repeat=NOISE_TASKS):
        n = len(diffs)
        d = sum(diffs) / n
        se = math.sqrt(sum((x - d) ** 2 for x in diffs) / (n - 1)) / math.sqrt(n)
        if d > 0 and (se == 0 or d >= PairedZGate.Z * se):
            pz += math.prod(weight[x] for x in diffs)
    return strict, pz


def test_pure_noise_strict_accepts_often_paired_z_rarely() -> None:
    """Why strict is a weak gate: on pure noise it takes ~40% of candidates (ties reject)."""
    rng = random.Random(20240601)
    tasks = [f"t{i}" for i in range(NOISE_TASKS)]
    accepted = {"strict": 0, "paired-z": 0}
    gates: dict[str, Gate] = {"strict": StrictGate(), "paired-z": PairedZGate()}
    for _ in range(NOISE_DECISIONS):
        s = sampler(
            {t: float(rng.random() < 0.5) for t in tasks}, {t: float(rng.random() < 0.5) for t in tasks}
        )
        for name, gate in gates.items():
            accepted[name] += gate.decide(s).accept
    strict_rate = accepted["strict"] / NOISE_DECISIONS
    pz_rate = accepted["paired-z"] / NOISE_DECISIONS
    exact_strict, exact_pz = _exact_accept_rates()
    figures = (
        f"strict {strict_rate:.1%} (exact {exact_strict:.1%}), paired-z {pz_rate:.1%} "
        f"(exact {exact_pz:.1%}) over {NOISE_DECISIONS} noise decisions"
    )
    assert 0.37 <= strict_rate <= 0.50, figures
    assert pz_rate <= 0.12, figures
    assert pz_rate < strict_rate / 3, figures
    for rate, exact in ((strict_rate, exact_strict), (pz_rate, exact_pz)):
        assert abs(rate - exact) <= 3 * math.sqrt(exact * (1 - exact) / NOISE_DECISIONS), figures


def test_gate_options_cannot_set_alpha_and_only_the_sequential_gate_records_one(tmp_path: Path) -> None:
    from skilltune.progress import PlainReporter

    quiet: dict[str, Any] = {"reporter": PlainReporter(quiet=True), "runs_dir": str(tmp_path), "seed": 1}
    with pytest.raises(UsageError, match="run-wide alpha"):
        train(MOCK_SUITE, MOCK_SKILL, tag="a", gate_options={"alpha": 0.2}, **quiet)
    assert not (tmp_path / "a").exists()
    train(MOCK_SUITE, MOCK_SKILL, tag="s", gate="strict", max_steps=2, **quiet)
    verdicts = [read_json(p) for p in (tmp_path / "s" / "steps").glob("*/gate.json")]
    assert verdicts and all(v["alpha"] is None for v in verdicts)


def test_val_size_notes_say_when_fewer_steps_cannot_help() -> None:
    """skill-trainer's sql-queries example has 4 val tasks: no plan can keep an edit at --alpha 0.05
    (one decision needs 5), so the note's impossible threshold is left out and the advice is only to
    add val tasks; with 5 val tasks fewer steps do help."""
    from skilltune.gate import suite_size_notes, val_size_notes
    from skilltune.gate.run import RunAlpha

    levels = RunAlpha(0.05, "spend", 2).planned_levels()
    note, warning = val_size_notes(4, levels, 0.05)
    assert note == ""
    assert warning == (
        "warning: with 4 val tasks the gate cannot keep any edit at decisions 1-2 of 2 (levels below 2^-4 = "
        "0.0625); even a single decision at the run's whole --alpha 0.05 needs 5: add val tasks (6 for every "
        "level of this run)"
    )
    note, warning = val_size_notes(5, levels, 0.05)
    assert note.startswith("gate: to be kept, an edit must improve at least 5 of the 5 val tasks")
    assert warning is not None and warning.endswith(
        "add val tasks (6 for every level of this run) or plan fewer steps"
    )
    size, _ = suite_size_notes(4, levels, 0.05)
    assert "(these 4 val tasks are too few for any of them)" in size
    assert "(these 5 val tasks are too few for some of them)" in suite_size_notes(5, levels, 0.05)[0]


def test_val_size_notes_count_agent_task_units_with_several_agents() -> None:
    """With three agents the gate tests 12 (agent, task) units of 4 val tasks: the decisions 4 tasks
    cannot reach are within reach, and the advice to add tasks is in tasks, not units."""
    from skilltune.gate import suite_size_notes, val_size_notes
    from skilltune.gate.run import RunAlpha

    levels = RunAlpha(0.05, "spend", 2).planned_levels()
    note, warning = val_size_notes(4, levels, 0.05, agents=3)
    assert warning is None
    assert note.startswith(
        "gate: to be kept, an edit must improve at least 5 of the 12 (agent, task) units (3 agents x 4"
    )
    size, harm = suite_size_notes(4, levels, 0.05, agents=3)
    assert "changes at least 5 (agent, task) units" in size and "of these 12)" in size
    assert "val tasks with 3 agents to be keepable" in size and "among 4 val tasks" in harm
    few = RunAlpha(0.05, "spend", 12).planned_levels()
    _, warning = val_size_notes(2, few, 0.05, agents=3)
    assert warning is not None and "with 6 (agent, task) units (3 agents x 2 val tasks)" in warning
    assert warning.endswith("with 3 agents) or plan fewer steps")


def test_the_harm_note_counts_only_the_tasks_the_veto_looks_at() -> None:
    """Trigger tasks are not vetoed one by one: a suite of them alone gets no harm arithmetic, and a
    mixed one counts its body tasks."""
    from skilltune.gate import suite_size_notes
    from skilltune.gate.run import RunAlpha

    levels = RunAlpha(0.05, "spend", 10).planned_levels()
    assert "among 28 val tasks" in suite_size_notes(28, levels, 0.05)[1]
    assert suite_size_notes(28, levels, 0.05, vetoed=0)[1].startswith(
        "harm: the val tasks are all trigger tasks"
    )
    mixed = suite_size_notes(28, levels, 0.05, vetoed=10)[1]
    assert "among 10 body tasks with chance 35%" in mixed


def test_a_run_gate_hands_each_decision_its_harm_scope() -> None:
    """The harm veto's inputs are given when a decision's gate is built, never set on it afterwards:
    the sequential gate gets the decision's HarmScope with its level and seed; strict, which looks at
    no task on its own, takes none."""
    from skilltune.gate import HarmScope, RunGate, SequentialGate, vetoes

    scope = HarmScope(trade_offs=frozenset({"t1"}), groups={"a/t2": "t2"})
    run = RunGate("sequential", "mixed", 1, {"max_reps": 4}, 0.05, "spend", 4)
    gate, level = run.for_decision([], 7, scope)
    assert isinstance(gate, SequentialGate) and gate.veto.scope is scope
    assert level == run.run_alpha.level([]) and gate.options.seed == 7 and gate.max_reps == 4
    plain, _ = run.for_decision([False], 8)
    assert isinstance(plain, SequentialGate) and plain.veto.scope == HarmScope()
    strict, none = RunGate("strict", "mixed", 1, {}, 0.05, "spend", 4).for_decision([False], 3, scope)
    assert isinstance(strict, StrictGate) and none is None
    assert vetoes(SequentialGate) and not vetoes(StrictGate)
    assert not hasattr(strict, "trade_offs") and not hasattr(gate, "harm_groups")


def test_the_trigger_note_counts_the_queries_a_trade_off_needs() -> None:
    """A description edit wins some queries and loses a few; with decisions that repeat, the sign-flip
    p is the binomial tail of the changed queries, and the note turns it into val queries."""
    from skilltune.gate import trigger_size_notes
    from skilltune.gate.run import RunAlpha
    from skilltune.gate.sizing import queries_needed, smallest_kept_gain, trade_off_p

    assert trade_off_p(8, 0) == 2.0**-8  # every changed query won: 2^-m
    assert trade_off_p(3, 1) == 5 / 16  # P(Bin(4, 1/2) >= 3)
    assert trade_off_p(2, 2) == 1.0  # no net gain
    levels = RunAlpha(0.05, "spend", 10).planned_levels()
    first = queries_needed(0.20, levels[0])
    last = queries_needed(0.20, levels[-1])
    assert first is not None and last is not None and first < last
    net = round(0.2 * first)
    assert trade_off_p(net + round(net / 2), round(net / 2)) <= levels[0]
    kept = smallest_kept_gain(first, levels[0])
    assert kept is not None and kept <= 0.20 < (smallest_kept_gain(first - 8, levels[0]) or 1.0)
    short = trigger_size_notes(28, levels)
    assert len(short) == 2 and "these 28 keep a net gain from +0.4" in short[0]
    assert f"+0.20 needs {first} val queries at the first, {last} at the last" in short[0]
    assert (
        short[1].startswith("trigger queries: 28 val queries are too few")
        and "skilltune draft triggers" in short[1]
    )
    enough = trigger_size_notes(first + 10, levels)
    assert len(enough) == 1  # no pointer to the drafting command when the split is long enough
    one = trigger_size_notes(28, [0.05])
    assert "at the decision's level (0.05)" in one[0] and "at the last" not in one[0]
