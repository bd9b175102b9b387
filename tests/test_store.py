"""Files on disk (skilltune/store.py): which keys are secrets, the modes written files get."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from skilltune.store import REDACTED, is_secret_key, read_json
from skilltune.training import resume
from tests.helpers import REPO, quiet, stopped_run


def test_secret_keys_match_whole_key_names_and_roles_do_not_block_resume(tmp_path: Path) -> None:
    """is_secret_key flags api_key-like names only; a run with proposer roles {"author": ...} resumes."""
    for key in ("api_key", "apiKey", "auth_token", "password", "secret", "OPENAI_API_KEY"):
        assert is_secret_key(key), key
    for key in ("author", "roles", "tokens_in", "api_key_env", "model"):
        assert not is_secret_key(key), key
    run = stopped_run(tmp_path, "r", max_steps=2, proposer_options={"roles": {"author": "x"}})
    stored = read_json(run.config)
    assert stored["proposer_options"] == {"roles": {"author": "x"}}
    assert REDACTED not in run.config.read_text()
    resumed = resume(run.root, reporter=quiet())
    assert resumed.state in ("success", "no-progress"), resumed.reason
    assert resumed.steps == 2


def test_write_text_files_are_readable_by_others_under_umask_022(tmp_path: Path) -> None:
    """Under umask 022, store.write_text makes files of mode 0o644 (not mkstemp's 0o600)."""
    target = tmp_path / "sub" / "file.json"
    code = "import sys; from pathlib import Path; from skilltune.store import write_text; write_text(Path(sys.argv[1]), 'x')"
    # A fresh interpreter started under umask 022 (skilltune.store reads the umask when imported).
    subprocess.run(
        ["sh", "-c", 'umask 022 && exec "$0" -c "$1" "$2"', sys.executable, code, str(target)],
        check=True,
        cwd=REPO,
    )
    assert target.read_text() == "x"
    assert target.stat().st_mode & 0o777 == 0o644
