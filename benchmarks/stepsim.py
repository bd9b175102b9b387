"""Simulated training runs whose steps ask a weak analyst for many small proposals (issue 31).

The model (every figure is a parameter of ``Tasks`` or ``Analyst``; the defaults are ours):

- **Tasks** fall in ``clusters`` clusters (a routing suite's labels: one rule can fix a cluster).
  Each run has ``RunShape.val`` val tasks and ``RunShape.population`` held-out tasks from the same
  clusters; train batches are drawn from the held-out population (as in runsim.py); the gain a user
  gets is the population's mean rate of the skill a run ends with minus S0's. Under S0 most tasks
  are steady (they pass with chance ``1 - eps`` or ``eps``: a near-deterministic target), the share
  that passes being the cluster's competence; a share ``flaky`` are coin flips (rate U(0.2, 0.8)).
- **Rules.** A skill is S0 plus a set of rules, each ``(kind, cluster, other, variant)``: ``RIGHT``
  fixes a share ``lift`` of its cluster's tasks (a second right rule for the cluster fixes nothing
  more), ``WRONG`` breaks a share ``drop`` of its cluster's ("route outages to Support"), ``HARM``
  breaks a share ``dent`` of every cluster's, ``TRADE`` fixes its cluster and breaks ``other`` (a
  contradicting rule), ``USELESS`` does nothing (a rider: "Be polite."). Which tasks a rule fixes or
  breaks is a property of the task, the same in every skill. Rules with the same kind, clusters and
  variant are the same text: ``variants`` texts per cluster rule, ``riders`` per general one (a weak
  analyst repeats itself).
- **The analyst.** An answer holds no rule with chance ``empty`` (dropped, never screened), else one
  rule, two with chance ``two``; a rule's kind is drawn from ``focused`` for a focused ask (one
  failure group of the batch: its rules are about that cluster) and from ``sample`` for an
  independent sample of the whole batch (about the cluster of a failed task drawn at random). A
  focused ask is more often right than a sample.

Designs (``StepDesign``): ``many`` is issue 31's step (N asks, one per failure group largest first,
the rest samples; each distinct proposal screened on the train tasks it targets plus a shared sample
of passing ones; selection by fixed - broken within the edit budget; leave-one-out; ``--carry
screen``; the sequential gate on val with spend, shared incumbent rollouts and the real gate's early
stops); ``one`` is today's step (one answer holding all its rules, screened on the whole batch,
``--carry screen``); ``strict`` is skill-trainer's strict K=3 gate on today's one proposal a step
(efficiency.py's model: the screen, the winner's rollouts as the reference); ``gepa`` keeps each
proposal that beats the current skill on the step's minibatch, scores each kept one on val once and
ends with the best val score (S0 included), as GEPA does, or (``pick="end"``) compares only the last
one with S0 on val. Epoch updates (all but ``gepa``) are runsim's: a restatement of what the epoch
kept (no effect), gated when the epoch kept something.

Every design runs the same simulated runs: the same tasks, and per step the same random numbers
(the train batch, each rollout's uniform draw, each ask's answer), so designs see the same
proposals as long as their bases agree. A rollout's outcome is ``uniform < rate``; every arm and
stage draws its own uniforms (no common random numbers between a candidate and its base).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from benchmarks.efficiency import STRICT_K, real_gate, strict
from benchmarks.gatesim import NEW_VETO, Design
from benchmarks.runsim import Decider, RunShape
from skilltune.gate.run import RunAlpha
from skilltune.propose.merge import EditBudget

RIGHT, WRONG, HARM, TRADE, USELESS = range(5)
KINDS = ("right", "wrong", "harm", "trade", "useless")
Rule = tuple[int, int, int, int]  # (kind, cluster or -1, other cluster or -1, variant)
Skill = frozenset[Rule]
S0: Skill = frozenset()
STAGES = ("baseline", "train", "screen", "loo", "gate", "epoch", "val")


@dataclass(frozen=True)
class Tasks:
    """The task population. Under S0 a steady task passes with chance ``eps`` or ``1 - eps`` (it
    passes with its cluster's competence, U(``competence_lo``, ``competence_hi``) a run), a flaky
    one (share ``flaky``) with a rate U(``flaky_lo``, ``flaky_hi``). A right rule for a cluster
    fixes a share ``lift`` of its tasks (rate ``1 - eps``), each wrong rule on a cluster breaks a
    share ``drop`` of its tasks (rate ``eps``), each harmful general rule a share ``dent`` of all
    tasks; which tasks is a property of the task (the same in every skill), and breaking wins."""

    clusters: int = 4
    competence_lo: float = 0.0
    competence_hi: float = 0.6
    flaky: float = 0.3
    flaky_lo: float = 0.2
    flaky_hi: float = 0.8
    eps: float = 0.03
    lift: float = 0.8
    drop: float = 0.5
    dent: float = 0.1


@dataclass(frozen=True)
class Analyst:
    """Chances of a rule's kind (right, wrong, harm, trade; the rest useless) by ask."""

    empty: float = 0.25
    two: float = 0.3
    focused: tuple[float, float, float, float] = (0.25, 0.15, 0.10, 0.0)
    sample: tuple[float, float, float, float] = (0.15, 0.10, 0.15, 0.0)
    variants: int = 3
    riders: int = 4

    def kind(self, u: float, focused: bool) -> int:
        edges = np.cumsum(self.focused if focused else self.sample)
        return int(np.searchsorted(edges, u, side="right"))


# A weak analyst (issue 31's 1.5B model: a third of answers empty or unusable, most rules useless
# or harmful, a focused ask right a quarter of the time); runsim's two proposal models' kind mixes
# mapped onto rules (``base``: 25% helpful, 30% harmful, 35% neutral, 10% empty; ``hard``: 25% help,
# 45% trade one cluster for another (its asymmetric and symmetric nulls), 30% harm), no focus.
ANALYSTS: dict[str, Analyst] = {
    "weak": Analyst(),
    "base": Analyst(empty=0.10, focused=(0.28, 0.15, 0.18, 0.0), sample=(0.28, 0.15, 0.18, 0.0)),
    "hard": Analyst(empty=0.10, focused=(0.25, 0.15, 0.15, 0.45), sample=(0.25, 0.15, 0.15, 0.45)),
}


@dataclass(frozen=True)
class StepDesign:
    name: str
    kind: Literal["many", "one", "strict", "gepa"] = "many"
    proposals: int = 4  # asks a step (many, gepa)
    passing: int = 4  # passing tasks in each screen (many)
    margin: int = 1  # a proposal is selected when fixed - broken >= margin (many)
    split: bool = False  # each rule of an answer screened as a proposal of its own (many)
    samples: bool = True  # asks beyond the failure groups are independent samples, or not asked (many)
    # without samples: the asks left over go round the failure groups again (focused, a draw of their
    # own), as skilltune's default does, instead of not being asked (many)
    repeat: bool = False
    # leave-one-out: "bundle" when the bundle holds >= 2 proposals, "always" also for a bundle of one
    # (the bundle without it is its base) (many)
    loo: Literal["bundle", "always"] = "bundle"
    # "gate": a step adding nothing gates the carried candidate (today's --carry screen); "carry":
    # it stays carried until the epoch's last step (many)
    idle: Literal["gate", "carry"] = "gate"
    # how far a candidate is carried at most: to the epoch's last step (today's --carry screen) or
    # the run's (many)
    horizon: Literal["epoch", "run"] = "epoch"
    carry: bool = True  # --carry screen (many, one)
    today_rules: int = 3  # today's answer holds 1..today_rules rules, within the edit budget (one, strict)
    pick: Literal["gepa", "end"] = "gepa"
    alpha: float = 0.05
    gate: Design = field(default=NEW_VETO)


MAX_ASKS = 6  # ask slots a unit draws for (the largest N swept)
RULES = 4  # rules an answer can hold (today's: up to the edit budget)
LOO_SLOTS = 2 * MAX_ASKS + 1  # the full bundle and one without each of its proposals
REFERENCES = 8  # Monte Carlo references of the sequential gate a unit's decisions draw from
LOOKS = NEW_VETO.max_looks  # val rounds a unit draws for (every design: the same random numbers)


class World:
    """The runs' tasks (shared by every design) and the rates of any skill on them: columns
    ``[:val]`` are the val tasks, the others the held-out population (train batches come from it)."""

    def __init__(self, tasks: Tasks, shape: RunShape, runs: int, seed: int) -> None:
        rng = np.random.default_rng((seed, 0))
        k, n, size = tasks.clusters, shape.val, shape.val + shape.population
        self.tasks, self.shape, self.runs = tasks, shape, runs
        competence = rng.uniform(tasks.competence_lo, tasks.competence_hi, (runs, k))
        self.cluster = rng.integers(0, k, (runs, size))
        steady = np.where(
            rng.random((runs, size)) < competence[np.arange(runs)[:, None], self.cluster],
            1.0 - tasks.eps,
            tasks.eps,
        )
        flaky = rng.uniform(tasks.flaky_lo, tasks.flaky_hi, (runs, size))
        self.seed_rate = np.where(rng.random((runs, size)) < tasks.flaky, flaky, steady)
        self.fix_u, self.break_u, self.dent_u = rng.random((3, runs, size))
        self.pop_cluster = self.cluster[:, n:]
        self.n = n
        self._cache: list[dict[Skill, tuple[np.ndarray, np.ndarray, float]]] = [{} for _ in range(runs)]

    def rates(self, r: int, skill: Skill) -> tuple[np.ndarray, np.ndarray, float]:
        """(population rates, val rates, population mean) of ``skill`` in run ``r``."""
        got = self._cache[r].get(skill)
        if got is None:
            t = self.tasks
            fixed, wrong, harm = np.zeros(t.clusters, dtype=bool), np.zeros(t.clusters), 0
            for kind, c, other, _ in skill:
                fixed[c] |= kind in (RIGHT, TRADE)
                wrong[c] += kind == WRONG
                if kind == TRADE:
                    wrong[other] += 1
                harm += kind == HARM
            cl = self.cluster[r]
            rate = np.where(fixed[cl] & (self.fix_u[r] < t.lift), 1.0 - t.eps, self.seed_rate[r])
            broken = (self.break_u[r] < 1.0 - (1.0 - t.drop) ** wrong[cl]) | (
                self.dent_u[r] < 1.0 - (1.0 - t.dent) ** harm
            )
            rate = np.where(broken, t.eps, rate)
            pop = rate[self.n :]
            got = (pop, rate[: self.n], float(pop.mean()))
            self._cache[r][skill] = got
        return got

    def useless_rules(self, r: int, cand: Skill, new: Iterable[Rule]) -> int:
        """How many of ``new`` (rules of ``cand``) do not raise the population mean in ``cand``."""
        whole = self.rates(r, cand)[2]
        return sum(whole - self.rates(r, cand - {rule})[2] <= 1e-12 for rule in new)


class Draws:
    """A unit's random numbers for every run (the same in every design)."""

    def __init__(self, seed: int, step: int, epoch: bool, runs: int, shape: RunShape) -> None:
        unit = (seed, 1, step, int(epoch))  # a step's numbers do not depend on the units before it
        rng = np.random.default_rng(unit)
        b, n, slots = shape.batch, shape.val, 2 * MAX_ASKS
        self.batch = np.argsort(rng.random((runs, shape.population)), axis=1)[:, :b]
        self.base = rng.random((runs, b))
        self.answer = rng.random((runs, slots, 2, 2))  # (ask slot, re-ask): empty, rule count
        self.rules = rng.random((runs, slots, 2, RULES, 4))  # kind, cluster, other, variant
        self.screen = rng.random((runs, slots, 2, 2, b))  # (ask slot, re-ask, rule when split)
        self.keys = rng.random((runs, b))  # which passing tasks the screens share
        self.loo = rng.random((runs, LOO_SLOTS, b))
        self.gate = rng.random((runs, LOOKS, n))
        self.refresh = rng.random((runs, LOOKS, n))  # a new incumbent's val rollouts
        self.gepa_val = rng.random((runs, 2 * MAX_ASKS, n))  # an accepted candidate's val pass
        self.refs = rng.integers(0, 2**31, REFERENCES)[rng.integers(0, REFERENCES, runs)]
        self.rng = np.random.default_rng((seed, 2, step, int(epoch)))


@dataclass(eq=False)
class Proposal:
    rules: Skill
    slot: int  # ask slot: a focused ask on group g is slot g, the s-th sample MAX_ASKS + s
    reask: int
    part: int  # which rule of a split answer (0 otherwise)
    targets: list[int]  # batch positions it targets (failed by the base)
    fixed: int = 0
    broken: int = 0
    tasks: list[int] = field(default_factory=list)  # batch positions of its screen


@dataclass
class RunState:
    incumbent: Skill = S0
    pending: Skill | None = None  # a carried candidate (--carry screen)
    pending_props: list[Skill] = field(default_factory=list)
    spent: set[Skill] = field(default_factory=set)  # proposals (or, one/strict, candidates) not kept
    history: list[bool] = field(default_factory=list)
    depth: int = 1  # incumbent val rounds in the pool (the baseline is round 0)
    kept: int = 0
    kept_epoch: bool = False
    useless: int = 0  # rules kept that did not help where they were added (and neutral keeps)
    bad_candidate: bool = False  # a kept candidate no better than its incumbent on the population
    calls: int = 0  # analyst asks, re-asks included
    screened: int = 0
    cost: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STAGES, 0.0))
    trail: list[tuple[Skill, float, int]] = field(default_factory=list)  # gepa: (skill, val, useless)


class Simulation:
    """One design on ``runs`` simulated runs; ``run()`` returns per-run arrays."""

    def __init__(
        self, design: StepDesign, analyst: Analyst, tasks: Tasks, shape: RunShape, runs: int, seed: int
    ) -> None:
        self.d, self.a, self.t, self.shape, self.seed = design, analyst, tasks, shape, seed
        self.world = World(tasks, shape, runs, seed)
        self.runs = runs
        self.looks = STRICT_K if design.kind == "strict" else design.gate.max_looks
        self.decider: Decider = strict if design.kind == "strict" else real_gate(design.gate)
        self.budget = EditBudget(steps=shape.steps)
        self.states = [RunState() for _ in range(runs)]
        base = np.random.default_rng((seed, 3)).random((runs, LOOKS, shape.val))[:, : self.looks]
        self.pool = np.stack([(base[r] < self.world.rates(r, S0)[1]).astype(np.int8) for r in range(runs)])
        self.s0_val = self.pool[:, 0].mean(axis=1)
        for s in self.states:
            s.cost["baseline"] += shape.val

    # --- proposals -------------------------------------------------------------------------------

    def _answer(
        self, draws: Draws, r: int, slot: int, reask: int, cluster: int | None, pool: list[int], count: int
    ) -> Skill | None:
        """One answer: None when empty, else its rules (``count`` > 0: exactly that many)."""
        a, k = self.a, self.t.clusters
        u = draws.answer[r, slot, reask]
        if u[0] < a.empty:
            return None
        many = count or 1 + int(u[1] < a.two)
        rules = set()
        for j in range(many):
            uk, uc, uo, uv = draws.rules[r, slot, reask, j]
            kind = a.kind(float(uk), cluster is not None)
            c = cluster if cluster is not None else (pool[int(uc * len(pool))] if pool else int(uc * k))
            if kind in (HARM, USELESS):
                rules.add((kind, -1, -1, int(uv * a.riders)))
            else:
                other = (c + 1 + int(uo * (k - 1))) % k if kind == TRADE else -1
                rules.add((kind, c, other, int(uv * a.variants)))
        return frozenset(rules)

    def _asks(
        self,
        draws: Draws,
        r: int,
        base: Skill,
        fails: np.ndarray,
        idx: np.ndarray,
        asks: int,
        spent: set[Skill],
    ) -> list[Proposal]:
        """The step's distinct proposals: a focused ask per failure group (largest first), the rest
        samples; a repeat (of a spent proposal, of one of the step's, or nothing new) is re-asked once."""
        s = self.states[r]
        clusters = self.world.pop_cluster[r][idx]
        failed = [i for i in range(len(idx)) if fails[i]]
        groups: dict[int, list[int]] = {}
        for i in failed:
            groups.setdefault(int(clusters[i]), []).append(i)
        order = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[1][0]))
        out: list[Proposal] = []
        seen: set[Skill] = set()
        many = asks if self.d.samples or (self.d.repeat and order) else min(asks, len(order))
        for j in range(many):
            if j < len(order):
                slot, cluster, targets = j, order[j][0], order[j][1]
            elif not self.d.samples:  # a repeat of group j mod groups, on a draw slot of its own
                slot, cluster, targets = (
                    MAX_ASKS + j - len(order),
                    order[j % len(order)][0],
                    order[j % len(order)][1],
                )
            else:
                slot, cluster, targets = MAX_ASKS + j - len(order), None, failed
            pool = [int(clusters[i]) for i in failed]
            for reask in (0, 1):
                s.calls += 1
                got = self._answer(draws, r, slot, reask, cluster, pool, 0)
                if got is None:
                    break
                parts = [frozenset({rule}) for rule in sorted(got)] if self.d.split else [got]
                fresh = [(j, p - base) for j, p in enumerate(parts)]
                fresh = [(j, p) for j, p in fresh if p and p not in spent and p not in seen]
                for part, new in fresh:
                    seen.add(new)
                    out.append(Proposal(new, slot, reask, part, list(targets)))
                if fresh:
                    break
        return out

    def _screen(
        self, draws: Draws, r: int, base: Skill, prop: Proposal, idx: np.ndarray, sample: list[int]
    ) -> None:
        prop.tasks = prop.targets + sample
        rates = self.world.rates(r, base | prop.rules)[0][idx]
        ok = draws.screen[r, prop.slot, prop.reask, prop.part] < rates
        prop.fixed = int(ok[prop.targets].sum())
        prop.broken = int((~ok[sample]).sum())
        self.states[r].cost["screen"] += len(prop.tasks)
        self.states[r].screened += 1

    def _select(
        self, draws: Draws, r: int, base: Skill, props: list[Proposal], idx: np.ndarray, budget: int
    ) -> tuple[list[Proposal], list[Proposal]]:
        """(the bundle, the proposals judged not to earn a place): those with fixed - broken >= margin,
        strongest first within the edit budget; then leave-one-out drops each one whose removal
        costs nothing or helps on the union of their screen tasks (all of them, if so)."""
        good = [p for p in props if p.fixed - p.broken >= self.d.margin]
        bad = [p for p in props if p.fixed - p.broken < self.d.margin]
        good.sort(key=lambda p: (p.broken - p.fixed, p.broken, p.slot, p.part))
        bundle: list[Proposal] = []
        rules: set[Rule] = set()
        for p in good:
            if len(rules | p.rules) <= budget:
                bundle.append(p)
                rules |= p.rules
        if not bundle or (len(bundle) < 2 and self.d.loo == "bundle"):
            return bundle, bad
        tasks = sorted({i for p in bundle for i in p.tasks})
        whole = base.union(*(p.rules for p in bundle))
        full = int((draws.loo[r, 0, tasks] < self.world.rates(r, whole)[0][idx[tasks]]).sum())
        stay = []
        for j, p in enumerate(bundle):
            rest = base.union(*(q.rules for q in bundle if q is not p))
            without = int((draws.loo[r, 1 + j, tasks] < self.world.rates(r, rest)[0][idx[tasks]]).sum())
            if without < full:
                stay.append(p)
        self.states[r].cost["loo"] += (len(bundle) + 1) * len(tasks)
        return stay, bad + [p for p in bundle if p not in stay]

    def _base_run(self, draws: Draws, r: int, base: Skill) -> tuple[np.ndarray, np.ndarray]:
        idx = draws.batch[r]
        self.states[r].cost["train"] += len(idx)
        return idx, draws.base[r] >= self.world.rates(r, base)[0][idx]

    # --- steps -----------------------------------------------------------------------------------

    def _step_many(self, draws: Draws, r: int, step: int, last: bool) -> Skill | None:
        s = self.states[r]
        base = s.pending if s.pending is not None else s.incumbent
        idx, fails = self._base_run(draws, r, base)
        props = self._asks(draws, r, base, fails, idx, self.d.proposals, s.spent)
        passing = [int(i) for i in np.argsort(draws.keys[r]) if not fails[i]][: self.d.passing]
        props = [p for p in props if p.targets]  # nothing it targets failed: it cannot fix anything
        for p in props:
            self._screen(draws, r, base, p, idx, passing)
        bundle, bad = self._select(draws, r, base, props, idx, self.budget.at(step))
        s.spent |= {p.rules for p in bad}
        if bundle:
            cand = base.union(*(p.rules for p in bundle))
            s.pending_props += [p.rules for p in bundle]
            if self.d.carry and not last:  # every selected proposal beat its base on the screen
                s.pending = cand
                return None
            return cand
        if last or self.d.idle == "gate":
            return s.pending  # a step that adds nothing gates the carried candidate (or nothing)
        return None

    def _step_one(self, draws: Draws, r: int, step: int, last: bool) -> Skill | None:
        """Today's step: one answer holding all its rules, screened on the whole batch."""
        s = self.states[r]
        base = s.pending if s.pending is not None else s.incumbent
        idx, fails = self._base_run(draws, r, base)
        s.calls += 1
        clusters = self.world.pop_cluster[r][idx]
        pool = [int(clusters[i]) for i in range(len(idx)) if fails[i]]
        count = 1 + int(draws.answer[r, MAX_ASKS, 0, 1] * self.d.today_rules)
        got = self._answer(draws, r, MAX_ASKS, 0, None, pool, min(count, self.budget.at(step)))
        cand = None if got is None else base | got
        if cand is not None and (cand == base or cand in s.spent):
            cand = None  # a repeat of a rejected candidate: discarded without a screen
        carried = s.pending
        if cand is not None:
            s.cost["screen"] += len(idx)
            s.screened += 1
            after = int((draws.screen[r, MAX_ASKS, 0, 0] < self.world.rates(r, cand)[0][idx]).sum())
            before = int((~fails).sum())
            if after < before:
                cand = None
            elif self.d.carry and after > before and not last:
                s.pending = cand
                return None
        if cand is None:
            return carried if self.d.carry else None
        return cand

    def _step_gepa(self, draws: Draws, r: int) -> None:
        s = self.states[r]
        current = s.trail[-1][0] if s.trail else S0
        idx, fails = self._base_run(draws, r, current)
        props = self._asks(draws, r, current, fails, idx, self.d.proposals, set())
        score = int((~fails).sum())
        accepts = 0
        for p in props:
            cand = current | p.rules
            s.cost["screen"] += len(idx)
            s.screened += 1
            ok = draws.screen[r, p.slot, p.reask, p.part] < self.world.rates(r, cand)[0][idx]
            if int(ok.sum()) > score:
                useless = self.world.useless_rules(r, cand, cand - current)
                val = np.nan
                if self.d.pick == "gepa":
                    s.cost["val"] += self.shape.val
                    val = float((draws.gepa_val[r, accepts] < self.world.rates(r, cand)[1]).mean())
                prior = s.trail[-1][2] if s.trail else 0
                s.trail.append((cand, val, prior + useless))
                current, score, accepts = cand, int(ok.sum()), accepts + 1

    # --- the gate --------------------------------------------------------------------------------

    def _gate(self, draws: Draws, requests: list[tuple[int, Skill]], planned: int, epoch: bool) -> None:
        if not requests:
            return
        levels = RunAlpha(self.d.alpha, "spend", planned)
        rows = np.array([r for r, _ in requests])
        alphas = np.array([levels.level(self.states[r].history) for r in rows])
        live = alphas > 0
        cand_val = np.stack([self.world.rates(r, c)[1] for r, c in requests])
        cand_out = (draws.gate[rows] < cand_val[:, None, :]).astype(np.int8)[:, : self.looks]
        acc = np.zeros(rows.size, dtype=bool)
        used = np.zeros(rows.size, dtype=int)
        if live.any():
            got, rounds = self.decider(
                alphas[live], cand_out[live], self.pool[rows[live]], draws.refs[rows[live]], draws.rng
            )
            acc[live], used[live] = got, rounds
        n = self.shape.val
        for j, (r, cand) in enumerate(requests):
            s = self.states[r]
            props, s.pending, s.pending_props = s.pending_props, None, []
            if not live[j]:  # past the plan: rejected without rollouts
                continue
            s.history.append(bool(acc[j]))
            s.cost["gate"] += n * used[j] + n * max(0, used[j] - s.depth)
            s.depth = max(s.depth, int(used[j]))
            if not acc[j]:
                s.spent |= set(props) if self.d.kind == "many" else {cand}
                continue
            s.kept += 1
            s.kept_epoch |= not epoch
            old = self.world.rates(r, s.incumbent)[2]
            s.bad_candidate |= self.world.rates(r, cand)[2] <= old + 1e-12
            s.useless += 1 if epoch else self.world.useless_rules(r, cand, cand - s.incumbent)
            s.incumbent = cand
            if self.d.kind == "strict":  # skill-trainer: the winner's rollouts are the reference
                self.pool[r], s.depth = cand_out[j], self.looks
            else:
                self.pool[r] = (draws.refresh[r, : self.looks] < cand_val[j]).astype(np.int8)
                s.depth = 0

    # --- a run -----------------------------------------------------------------------------------

    def run(self) -> dict[str, np.ndarray]:
        shape = self.shape
        units = []
        for step in range(1, shape.steps + 1):
            units.append(("step", step))
            if step % shape.epoch_steps == 0 and self.d.kind != "gepa":
                units.append(("epoch", step))
        planned = shape.steps + shape.steps // shape.epoch_steps
        for number, (unit, step) in enumerate(units):
            draws = Draws(self.seed, step, unit == "epoch", self.runs, shape)
            final = all(kind != "step" for kind, _ in units[number + 1 :])
            last = final or (units[number + 1][0] == "epoch" and self.d.horizon == "epoch")
            requests: list[tuple[int, Skill]] = []
            for r, s in enumerate(self.states):
                if self.d.kind == "gepa":
                    self._step_gepa(draws, r)
                    continue
                if unit == "epoch":
                    if s.kept_epoch:
                        s.cost["epoch"] += 2 * shape.slow_sample
                        requests.append((r, s.incumbent))  # a slow update restates what was kept
                    s.kept_epoch = False
                    continue
                step_fn = self._step_many if self.d.kind == "many" else self._step_one
                cand = step_fn(draws, r, step, last)
                if cand is not None:
                    requests.append((r, cand))
            self._gate(draws, requests, planned, unit == "epoch")
        if self.d.kind == "gepa":
            self._gepa_pick()
        return self._arrays()

    def _gepa_pick(self) -> None:
        rng = np.random.default_rng((self.seed, 4))
        n = self.shape.val
        for r, s in enumerate(self.states):
            if not s.trail:
                continue
            if self.d.pick == "end":
                s.cost["val"] += n
                last = s.trail[-1][0]
                val = float((rng.random(n) < self.world.rates(r, last)[1]).mean())
                chosen = len(s.trail) if val > self.s0_val[r] else 0
            else:
                scores = [float(self.s0_val[r])] + [v for _, v, _ in s.trail]
                chosen = int(np.argmax(scores))  # the first best, as GEPA's max does
            if chosen:
                s.incumbent, _, s.useless = s.trail[chosen - 1]
                s.kept = chosen
                before = S0
                for skill, _, _ in s.trail[:chosen]:
                    s.bad_candidate |= self.world.rates(r, skill)[2] <= self.world.rates(r, before)[2] + 1e-12
                    before = skill

    def _arrays(self) -> dict[str, np.ndarray]:
        st = self.states
        s0 = np.array([self.world.rates(r, S0)[2] for r in range(self.runs)])
        end = np.array([self.world.rates(r, s.incumbent)[2] for r, s in enumerate(st)])
        out: dict[str, np.ndarray] = {
            "gain": end - s0,
            "training": np.array([sum(s.cost.values()) for s in st]),
            "useless_keeps": np.array([float(s.useless) for s in st]),
            "bad_candidate": np.array([float(s.bad_candidate) for s in st]),
            "kept": np.array([float(s.kept) for s in st]),
            "rules": np.array([float(len(s.incumbent)) for s in st]),
            "useful": np.array(
                [
                    float(len(s.incumbent) - self.world.useless_rules(r, s.incumbent, s.incumbent))
                    for r, s in enumerate(st)
                ]
            ),
            "calls": np.array([float(s.calls) for s in st]),
            "screened": np.array([float(s.screened) for s in st]),
        }
        for stage in STAGES:
            out[f"cost_{stage}"] = np.array([s.cost[stage] for s in st])
        return out


def simulate(
    design: StepDesign, analyst: Analyst, tasks: Tasks, shape: RunShape, runs: int, seed: int
) -> dict[str, np.ndarray]:
    """Per-run arrays of ``runs`` simulated runs of ``design`` (see ``Simulation``)."""
    return Simulation(design, analyst, tasks, shape, runs, seed).run()


def costs(per_run: dict[str, np.ndarray]) -> dict[str, float]:
    """Mean training rollouts a run by stage."""
    return {stage: float(per_run[f"cost_{stage}"].mean()) for stage in STAGES}
