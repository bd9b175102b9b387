"""Skills and candidates: loading, hashing, linting, and the ``skilltune lint`` command."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest
from typer.testing import CliRunner

from skilltune.cli import app
from skilltune.errors import UsageError
from skilltune.skill import Candidate, LintIssue, lint_candidate, load_skill
from tests.helpers import MOCK_SKILL

REPO = Path(__file__).parents[1]
EXAMPLE_SKILL = REPO / "examples" / "mock-demo" / "skill"

DESCRIPTION = "Formats release notes. Use when asked to write or review release notes."
BODY = """\
# Release notes

Follow the checklist in [the checklist](references/x.md) and run [the script](scripts/y.py).
"""


def skill_md(name: str = "release-notes", description: str | None = DESCRIPTION, body: str = BODY) -> str:
    lines = ["---", f"name: {name}"]
    if description is not None:
        lines.append(f"description: {description}")
    lines.append("---")
    return "\n".join(lines) + "\n" + body


def write_skill(folder: Path, files: Mapping[str, str | bytes]) -> Path:
    for rel, content in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return folder


def full_skill(folder: Path) -> Path:
    return write_skill(
        folder,
        {
            "SKILL.md": skill_md(),
            "references/x.md": "# Checklist\n\n- one\n- two\n",
            "scripts/y.py": "print('release')\n",
        },
    )


def lint_errors(candidate: Candidate) -> list[LintIssue]:
    return lint_candidate(candidate)


def candidate(body: str, **extra: str) -> Candidate:
    return Candidate({"SKILL.md": skill_md(body=body), **extra})


# --- loading -------------------------------------------------------------------------------------


def test_folder_skill_loads_every_file(tmp_path: Path) -> None:
    skill = load_skill(full_skill(tmp_path / "release-notes"))
    assert dict(skill.files) == {
        "SKILL.md": skill_md(),
        "references/x.md": "# Checklist\n\n- one\n- two\n",
        "scripts/y.py": "print('release')\n",
    }
    assert skill.main == "SKILL.md"
    assert skill.kind == "folder"
    assert skill.name == "release-notes"
    assert skill.description == DESCRIPTION
    assert skill.text == skill_md()
    assert len(skill.hash) == 64
    assert skill.short == skill.hash[:12]


def test_folder_skill_accepts_a_str_path(tmp_path: Path) -> None:
    folder = full_skill(tmp_path / "s")
    assert load_skill(str(folder)).hash == load_skill(folder).hash


def test_dot_files_and_pycache_are_skipped(tmp_path: Path) -> None:
    folder = full_skill(tmp_path / "s")
    write_skill(
        folder,
        {
            ".hidden": "secret",
            ".git/config": "[core]\n",
            "references/.DS_Store": b"\x00\x01\xff",
            "scripts/__pycache__/y.cpython-311.pyc": b"\xff\xfe\x00binary",
        },
    )
    skill = load_skill(folder)
    assert sorted(skill.files) == ["SKILL.md", "references/x.md", "scripts/y.py"]


def test_hash_depends_on_content_not_location(tmp_path: Path) -> None:
    one = load_skill(full_skill(tmp_path / "one"))
    two = load_skill(full_skill(tmp_path / "elsewhere" / "two"))
    assert one.hash == two.hash
    assert one == two


@pytest.mark.parametrize(
    ("rel", "text"),
    [
        ("SKILL.md", skill_md(body=BODY + "\nOne more rule.\n")),
        ("references/x.md", "# Checklist\n\n- one\n- two\n- three\n"),
        ("scripts/y.py", "print('release!')\n"),
        ("references/new.md", "a new file\n"),
    ],
)
def test_hash_changes_when_any_file_changes(tmp_path: Path, rel: str, text: str) -> None:
    base = load_skill(full_skill(tmp_path / "base"))
    changed_folder = full_skill(tmp_path / "changed")
    (changed_folder / rel).write_text(text, encoding="utf-8")
    changed = load_skill(changed_folder)
    assert changed.hash != base.hash
    assert changed.short != base.short


def test_hash_changes_when_a_file_is_renamed(tmp_path: Path) -> None:
    base = load_skill(full_skill(tmp_path / "base"))
    folder = full_skill(tmp_path / "renamed")
    (folder / "scripts" / "y.py").rename(folder / "scripts" / "z.py")
    assert load_skill(folder).hash != base.hash


def test_replace_file_gives_a_new_candidate(tmp_path: Path) -> None:
    skill = load_skill(full_skill(tmp_path / "s"))
    edited = skill.replace_file("references/x.md", "changed\n")
    assert edited.hash != skill.hash
    assert skill.files["references/x.md"] == "# Checklist\n\n- one\n- two\n"
    assert edited.replace_file("references/x.md", skill.files["references/x.md"]).hash == skill.hash


@pytest.mark.parametrize(
    ("filename", "name"),
    [("AGENTS.md", "agents"), ("CLAUDE.md", "claude"), ("system-prompt.txt", "system-prompt")],
)
def test_single_file_skill(tmp_path: Path, filename: str, name: str) -> None:
    path = tmp_path / filename
    text = "# Instructions\n\nAlways run the tests before committing.\n"
    path.write_text(text, encoding="utf-8")
    skill = load_skill(path)
    assert skill.kind == "file"
    assert skill.main == filename
    assert dict(skill.files) == {filename: text}
    assert skill.name == name
    assert lint_errors(skill) == []


def test_single_file_hash_is_content_based(tmp_path: Path) -> None:
    text = "Be brief.\n"
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "AGENTS.md").write_text(text, encoding="utf-8")
    (tmp_path / "b" / "AGENTS.md").write_text(text, encoding="utf-8")
    assert load_skill(tmp_path / "a" / "AGENTS.md").hash == load_skill(tmp_path / "b" / "AGENTS.md").hash
    (tmp_path / "b" / "AGENTS.md").write_text("Be very brief.\n", encoding="utf-8")
    assert load_skill(tmp_path / "a" / "AGENTS.md").hash != load_skill(tmp_path / "b" / "AGENTS.md").hash


# --- bad input -----------------------------------------------------------------------------------


def assert_usage_error(path: Path, *fragments: str) -> None:
    with pytest.raises(UsageError) as info:
        load_skill(path)
    message = str(info.value)
    assert str(path) in message
    for fragment in fragments:
        assert fragment in message


def test_missing_folder(tmp_path: Path) -> None:
    assert_usage_error(tmp_path / "nope", "no such skill")


def test_folder_without_skill_md(tmp_path: Path) -> None:
    folder = write_skill(tmp_path / "s", {"README.md": "# not a skill\n"})
    assert_usage_error(folder, "SKILL.md")


def test_skill_md_without_front_matter(tmp_path: Path) -> None:
    folder = write_skill(tmp_path / "s", {"SKILL.md": "# Just a body\n\nNo front matter here.\n"})
    assert_usage_error(folder, "front matter")


def test_skill_md_with_unclosed_front_matter(tmp_path: Path) -> None:
    folder = write_skill(tmp_path / "s", {"SKILL.md": "---\nname: x\ndescription: y\n# body\n"})
    assert_usage_error(folder, "never closed")


def test_skill_md_with_invalid_yaml(tmp_path: Path) -> None:
    folder = write_skill(tmp_path / "s", {"SKILL.md": "---\nname: [unclosed\n---\nbody\n"})
    assert_usage_error(folder, "YAML")


@pytest.mark.parametrize("name", ["Release-Notes", "release_notes", "-release", "a" * 65, "release--notes"])
def test_bad_name(tmp_path: Path, name: str) -> None:
    folder = write_skill(tmp_path / "s", {"SKILL.md": skill_md(name=name)})
    assert_usage_error(folder, "name", "64")


def test_name_of_64_characters_is_fine(tmp_path: Path) -> None:
    folder = write_skill(tmp_path / "s", {"SKILL.md": skill_md(name="a" * 64)})
    assert load_skill(folder).name == "a" * 64


def test_missing_name(tmp_path: Path) -> None:
    folder = write_skill(tmp_path / "s", {"SKILL.md": f"---\ndescription: {DESCRIPTION}\n---\nbody\n"})
    assert_usage_error(folder, "no 'name'")


def test_missing_description(tmp_path: Path) -> None:
    folder = write_skill(tmp_path / "s", {"SKILL.md": skill_md(description=None)})
    assert_usage_error(folder, "description")


def test_description_too_long(tmp_path: Path) -> None:
    folder = write_skill(tmp_path / "s", {"SKILL.md": skill_md(description="d" * 1025)})
    assert_usage_error(folder, "1025", "1024")


def test_description_of_1024_characters_is_fine(tmp_path: Path) -> None:
    folder = write_skill(tmp_path / "s", {"SKILL.md": skill_md(description="d" * 1024)})
    assert load_skill(folder).description == "d" * 1024


def test_non_utf8_file_in_the_folder(tmp_path: Path) -> None:
    folder = full_skill(tmp_path / "s")
    (folder / "references" / "logo.bin").write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe\x00")
    assert_usage_error(folder, "logo.bin", "UTF-8")


def test_non_utf8_single_file(tmp_path: Path) -> None:
    path = tmp_path / "AGENTS.md"
    path.write_bytes(b"caf\xe9\n")
    assert_usage_error(path, "UTF-8")


def test_candidate_without_its_main_file() -> None:
    with pytest.raises(UsageError, match=r"SKILL\.md"):
        Candidate({"references/x.md": "x"})


# --- lint ----------------------------------------------------------------------------------------


def test_clean_candidate_has_no_issues(tmp_path: Path) -> None:
    assert lint_candidate(load_skill(full_skill(tmp_path / "s"))) == []


def test_long_body_is_an_issue() -> None:
    body = "".join(f"- rule {i}\n" for i in range(501))
    issues = lint_errors(candidate(body))
    assert len(issues) == 1
    assert "501 lines" in issues[0].message
    assert issues[0].file == "SKILL.md"
    assert issues[0].line == 5  # the body's first line, after four lines of front matter


def test_body_of_500_lines_is_fine() -> None:
    body = "".join(f"- rule {i}\n" for i in range(500))
    assert lint_errors(candidate(body)) == []


def test_link_to_a_missing_reference_is_an_issue() -> None:
    body = "# T\n\nSee [missing](references/missing.md).\n"
    issues = lint_errors(candidate(body, **{"references/x.md": "x"}))
    assert len(issues) == 1
    assert "references/missing.md" in issues[0].message
    assert issues[0].line == 7  # line 3 of the body


@pytest.mark.parametrize(
    "link",
    [
        "[x](references/x.md)",
        "[x](./references/x.md)",
        "[x](references/x.md#a-section)",
        "[x](<references/x.md>)",
        '[x](references/x.md "the checklist")',
        "[folder](references/)",
        "![diagram](references/x.md)",
        "[web](https://example.com/references/missing.md)",
        "[plain](http://example.com)",
        "[mail](mailto:someone@example.com)",
        "[anchor](#rules)",
    ],
)
def test_links_that_are_fine(link: str) -> None:
    body = f"# T\n\n## Rules\n\nSee {link}.\n"
    assert lint_errors(candidate(body, **{"references/x.md": "x"})) == []


@pytest.mark.parametrize(
    "link",
    [
        "[x](references/missing.md)",
        "[x](references/missing.md#part)",
        "[x](missing.md)",
        "[x](../outside.md)",
        "[x](scripts/y.py)",
    ],
)
def test_links_that_are_broken(link: str) -> None:
    body = f"# T\n\nSee {link}.\n"
    issues = lint_errors(candidate(body, **{"references/x.md": "x"}))
    assert len(issues) == 1
    assert "not in the skill" in issues[0].message


def test_protected_block_well_formed() -> None:
    body = "# T\n\n<!-- PROTECTED:conventions -->\nkeep this\n<!-- /PROTECTED -->\n"
    assert lint_errors(candidate(body)) == []


def test_unclosed_protected_block_is_an_issue() -> None:
    body = "# T\n\n<!-- PROTECTED:x -->\nkeep this\n"
    issues = lint_errors(candidate(body))
    assert len(issues) == 1
    assert "PROTECTED:x" in issues[0].message
    assert "never closed" in issues[0].message


def test_stray_protected_close_is_an_issue() -> None:
    body = "# T\n\nkeep this\n<!-- /PROTECTED -->\n"
    issues = lint_errors(candidate(body))
    assert len(issues) == 1
    assert "closes no block" in issues[0].message


def test_nested_protected_block_is_an_issue() -> None:
    body = "<!-- PROTECTED:a -->\n<!-- PROTECTED:b -->\nx\n<!-- /PROTECTED -->\n"
    issues = lint_errors(candidate(body))
    assert any("opens inside PROTECTED:a" in i.message for i in issues)


def test_lint_single_file_without_front_matter_is_fine() -> None:
    agents = Candidate({"AGENTS.md": "# Rules\n\nSee [docs](docs/missing.md).\n"}, "AGENTS.md", "file")
    issues = lint_errors(agents)
    assert [i.kind for i in issues] == ["lint"]  # the broken link, but no front-matter complaint
    assert "docs/missing.md" in issues[0].message


def test_example_skill_lints_clean() -> None:
    skill = load_skill(EXAMPLE_SKILL)
    assert skill.kind == "folder"
    assert lint_candidate(skill) == []


# --- CLI -----------------------------------------------------------------------------------------

runner = CliRunner()


def test_cli_lint_example_skill() -> None:
    result = runner.invoke(app, ["lint", str(EXAMPLE_SKILL)])
    assert result.exit_code == 0, result.output
    skill = load_skill(EXAMPLE_SKILL)
    assert f"ok: {skill.name} ({skill.short})" in result.output


def test_cli_lint_broken_link(tmp_path: Path) -> None:
    folder = write_skill(
        tmp_path / "s", {"SKILL.md": skill_md(body="# T\n\nSee [gone](references/missing.md).\n")}
    )
    result = runner.invoke(app, ["lint", str(folder)])
    assert result.exit_code == 1, result.output
    assert "references/missing.md" in result.output
    assert "error" in result.output
    assert "Traceback" not in result.output


def test_cli_lint_reports_a_missing_front_matter_with_the_other_errors(tmp_path: Path) -> None:
    folder = write_skill(tmp_path / "s", {"SKILL.md": "# T\n\nSee [gone](missing.md).\n"})
    result = runner.invoke(app, ["lint", str(folder)])
    assert result.exit_code == 1, result.output  # lint errors, not bad input
    assert "no front matter" in result.output and "missing.md" in result.output


def test_cli_lint_missing_path(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-skill"
    result = runner.invoke(app, ["lint", str(missing)])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert isinstance(result.exception, SystemExit)
    assert "no such skill" in result.output


def test_cli_lint_bad_front_matter(tmp_path: Path) -> None:
    folder = write_skill(tmp_path / "s", {"SKILL.md": skill_md(name="Bad_Name")})
    result = runner.invoke(app, ["lint", str(folder)])
    assert result.exit_code == 1, result.output  # a lint finding (other commands refuse it: exit 2)
    assert "Traceback" not in result.output
    assert "Bad_Name" in result.output


def test_candidate_load_ignores_temp_files_and_save_replaces_the_folder(tmp_path: Path) -> None:
    """Candidate.load skips dot-files (an interrupted write's temp file); Candidate.save leaves no old file."""
    seed = load_skill(MOCK_SKILL)
    folder = tmp_path / "candidate"
    seed.save(folder)
    (folder / ".SKILL.md.abc.tmp").write_text("half a write")
    loaded = Candidate.load(folder, seed)
    assert loaded.hash == seed.hash and set(loaded.files) == {"SKILL.md"}
    bigger = seed.replace_file("notes.md", "extra\n")
    bigger.save(folder)
    assert Candidate.load(folder, seed).hash == bigger.hash
    seed.save(folder)
    assert sorted(p.name for p in folder.iterdir()) == ["SKILL.md"]
    assert Candidate.load(folder, seed).hash == seed.hash
