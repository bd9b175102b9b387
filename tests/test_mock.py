"""The mock agent: rule matching, seeded noise, placements, extensions."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from skilltune.agents import AgentRequest, get_backend
from skilltune.agents.mock import MockOptions, run_mock_rules
from skilltune.suite import Task
from tests.helpers import rule_task


def _task(**fields: object) -> Task:
    base = rule_task("t1", ["state-a-default"])
    base.update(fields)
    return Task.model_validate({**base, "split": "train"})


def _run(task: Task, skill: str, rng_seed: int = 0) -> tuple[str, bool]:
    return run_mock_rules(task, skill, random.Random(rng_seed), header="MOCK")


def test_rule_satisfied_by_normalised_id() -> None:
    out, solved = _run(_task(), "Always State a Default!")
    assert solved
    assert "PASS:state-a-default" in out
    assert out.rstrip().endswith("RESULT: solved")


def test_missing_rule_prints_symptom_not_rule() -> None:
    out, solved = _run(_task(), "Be nice.")
    assert not solved
    assert "SYMPTOM: symptom of missing state-a-default" in out
    assert "PASS:" not in out
    assert "RESULT: unsolved" in out


def test_match_phrase_and_regex_group_on_one_line() -> None:
    task = _task(
        match={"state-a-default": ["recommend one option"]},
        match_regex={"state-a-default": ["default", "option|choice"]},
    )
    assert _run(task, "Please recommend one option.")[1]
    assert _run(task, "Give a default for each choice.")[1]
    # The regex group must match on a single line, not across lines.
    assert not _run(task, "Give a default.\nList every choice.")[1]


def test_noise_flips_with_its_probability() -> None:
    task = _task(noise=0.3)
    fails = sum(not _run(task, "state a default", seed)[1] for seed in range(4000))
    assert 0.26 < fails / 4000 < 0.34


def test_empty_requires_is_pure_noise() -> None:
    task = Task.model_validate(
        {"id": "n", "prompt": "p", "requires": [], "noise": 0.5, "scoring": {"required": ["RESULT: solved"]}}
    )
    solved = sum(_run(task, "", seed)[1] for seed in range(4000))
    assert 0.46 < solved / 4000 < 0.54
    # ... and independent of the skill text.
    assert [_run(task, "a", s)[1] for s in range(50)] == [_run(task, "b", s)[1] for s in range(50)]


def test_forbids_and_p_follow() -> None:
    task = _task(forbids=["always ask the user"], forbid_hint="it stalled waiting for answers")
    out, solved = _run(task, "State a default. Always ask the user.")
    assert not solved
    assert "it stalled waiting for answers" in out
    soft = _task(forbids=["always ask the user"], forbid_penalty=0.0)
    assert _run(soft, "State a default. Always ask the user.")[1]
    follow = _task(p_follow=0.5)
    rate = sum(_run(follow, "state a default", s)[1] for s in range(4000)) / 4000
    assert 0.45 < rate < 0.55


def test_an_agent_that_ignores_a_rule_misses_it_even_when_the_skill_states_it() -> None:
    task = Task.model_validate({**rule_task("t2", ["state-a-default", "cite-a-source"]), "split": "train"})
    skill = "State a default. Cite a source."
    assert run_mock_rules(task, skill, random.Random(0), header="M")[1]
    out, solved = run_mock_rules(task, skill, random.Random(0), header="M", ignores=["cite-a-source"])
    assert not solved
    assert "PASS:state-a-default" in out and "PASS:cite-a-source" not in out
    assert "SYMPTOM: symptom of missing cite-a-source" in out
    # a rule the task does not require changes nothing
    assert run_mock_rules(task, skill, random.Random(0), header="M", ignores=["other-rule"])[1]


def test_an_agent_harmed_by_a_rule_fails_when_the_skill_states_it() -> None:
    task = _task()
    out, solved = run_mock_rules(
        task, "State a default.", random.Random(0), header="M", harmed_by=["state-a-default"]
    )
    assert not solved
    assert "this agent followed the rule 'state-a-default'" in out
    # a phrase counts as well, whether or not the task requires it; unstated, it harms nothing
    assert not run_mock_rules(
        task, "State a default. Be terse.", random.Random(0), header="M", harmed_by=["be terse"]
    )[1]
    assert run_mock_rules(task, "State a default.", random.Random(0), header="M", harmed_by=["be terse"])[1]


def test_rule_options_take_one_or_many_and_stay_out_of_the_dump_when_empty() -> None:
    assert MockOptions.model_validate({"ignores": "a", "harmed_by": ["b", "c"]}).ignores == ["a"]
    assert "ignores" not in MockOptions().model_dump(mode="json")
    assert "harmed_by" not in MockOptions().model_dump(mode="json")  # cache keys as before
    assert MockOptions(ignores=["a"]).model_dump(mode="json")["ignores"] == ["a"]


def test_ignores_and_harmed_by_are_part_of_the_cache_identity(tmp_path: Path) -> None:
    from skilltune.rollout.runner import RolloutRunner
    from skilltune.suite import load_suite
    from tests.helpers import MOCK_SUITE

    backend = get_backend("mock")
    suite = load_suite(MOCK_SUITE)

    def key(**options: object) -> str:
        runner = RolloutRunner(suite=suite, backend=backend, options=MockOptions(**options), out=tmp_path)
        return runner.options_hash

    keys = {key(), key(ignores=["a"]), key(ignores=["b"]), key(harmed_by=["a"])}
    assert len(keys) == 4


def _request(tmp_path: Path, task: Task, **kw: object) -> AgentRequest:
    fields: dict[str, object] = {
        "task": task,
        "prompt": task.prompt,
        "workspace": tmp_path,
        "log_dir": tmp_path,
        "candidate_hash": "abc",
        "options": MockOptions(),
    }
    fields.update(kw)
    return AgentRequest.model_validate(fields)


def test_noise_is_seeded_per_candidate_unless_crn(tmp_path: Path) -> None:
    backend = get_backend("mock")
    task = _task(noise=0.5)
    system = "state a default"

    def outcomes(cand: str, crn: bool) -> list[bool]:
        opts = MockOptions(placement="system", crn=crn)
        return [
            "RESULT: solved"
            in backend.run(
                _request(tmp_path, task, candidate_hash=cand, replicate=k, system_prompt=system, options=opts)
            ).final_text
            for k in range(200)
        ]

    assert outcomes("a", False) == outcomes("a", False)
    assert outcomes("a", False) != outcomes("b", False)
    assert outcomes("a", True) == outcomes("b", True)


@pytest.mark.parametrize("placement", ["native", "system", "prepend"])
def test_placements_reach_the_mock(tmp_path: Path, placement: str) -> None:
    from skilltune.rollout.workspace import place_skill
    from skilltune.skill import Candidate

    backend = get_backend("mock")
    skill = Candidate({"SKILL.md": "---\nname: x\ndescription: d\n---\nState a default.\n"})
    task = _task()
    placed = place_skill(skill, tmp_path, backend, placement, task.prompt)  # type: ignore[arg-type]
    request = _request(
        tmp_path,
        task,
        prompt=placed.prompt,
        system_prompt=placed.system_prompt,
        skill_name="x",
        options=MockOptions(placement=placement),
    )
    assert "RESULT: solved" in backend.run(request).final_text
    if placement == "native":
        assert (tmp_path / ".agents/skills/x/SKILL.md").is_file()


def test_mock_writes_files_only_when_solved(tmp_path: Path) -> None:
    backend = get_backend("mock")
    task = _task(mock_writes={"out/answer.md": "# done\n"})
    opts = MockOptions(placement="system")
    backend.run(_request(tmp_path, task, system_prompt="nothing useful", options=opts))
    assert not (tmp_path / "out/answer.md").exists()
    backend.run(_request(tmp_path, task, system_prompt="state a default", options=opts))
    assert (tmp_path / "out/answer.md").read_text() == "# done\n"


def test_scripted_infra_errors(tmp_path: Path) -> None:
    backend = get_backend("mock")
    task = _task(mock_infra_errors=1)
    assert backend.run(_request(tmp_path, task, attempt=0)).status == "infra_error"
    assert backend.run(_request(tmp_path, task, attempt=1)).status == "ok"


# --- load decisions (trigger mode) ---------------------------------------------------------------

RELEASE_NOTES = "Writes release notes from merged pull requests. Use when the user asks for release notes."


def test_key_terms_come_from_the_use_when_clause() -> None:
    from skilltune.agents.mock import trigger_terms

    assert trigger_terms(RELEASE_NOTES) == {"releas", "note"}  # stemmed; "user", "asks" are stop words
    assert trigger_terms("Formats SQL queries.") == {"format", "query"}  # no clause: the whole description
    assert trigger_terms("Use this skill whenever a spreadsheet is involved.") == {"spreadsheet", "involv"}


@pytest.mark.parametrize(
    ("prompt", "loads", "matched"),
    [
        ("Draft the release notes for v2.4", True, ["note", "releas"]),
        ("Releasing 3.0: what goes in the notes?", True, ["note", "releas"]),  # -ing, plural
        ("update CHANGELOG.md with the merged PRs", False, []),  # a miss: the description never says it
        ("Release the lock on the orders table", True, ["releas"]),  # a near miss it takes
        ("Rename getUser to fetchUser", False, []),
    ],
)
def test_the_mock_loads_a_skill_when_the_prompt_names_a_key_term(
    prompt: str, loads: bool, matched: list[str]
) -> None:
    from skilltune.agents.mock import loads_skill

    assert loads_skill(RELEASE_NOTES, prompt) == (loads, matched)


@pytest.mark.parametrize("placement", ["native", "system", "prepend"])
def test_the_load_decision_reaches_the_result_in_every_placement(tmp_path: Path, placement: str) -> None:
    from skilltune.rollout.workspace import place_skill
    from skilltune.skill import Candidate

    backend = get_backend("mock")
    assert backend.reports_skill_loads
    skill = Candidate({"SKILL.md": f"---\nname: x\ndescription: {RELEASE_NOTES}\n---\nState a default.\n"})
    decisions = []
    for prompt in ("Draft the release notes for v2.4", "Rename getUser to fetchUser"):
        task = _task(prompt=prompt)
        placed = place_skill(skill, tmp_path / prompt[:5], backend, placement, task.prompt)  # type: ignore[arg-type]
        request = _request(
            tmp_path / prompt[:5], task, prompt=placed.prompt, system_prompt=placed.system_prompt,
            skill_name="x", options=MockOptions(placement=placement),
        )  # fmt: skip
        result = backend.run(request)
        decisions.append(result.skill_loaded)
        event = next(e for e in result.events if e["type"] == "skill_load")
        assert event["loaded"] is result.skill_loaded
    assert decisions == [True, False]


def test_no_skill_loads_nothing_and_an_instruction_file_gets_no_decision(tmp_path: Path) -> None:
    backend = get_backend("mock")
    task = _task(prompt="Draft the release notes")
    assert backend.run(_request(tmp_path, task, candidate_hash="noskill")).skill_loaded is False
    (tmp_path / "AGENTS.md").write_text("State a default.\n")
    assert backend.run(_request(tmp_path, task, skill_name="skill")).skill_loaded is None
