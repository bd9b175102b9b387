"""The judge behind an API (OpenAI-compatible or Anthropic): wired to the model-call module."""

from __future__ import annotations

from pathlib import Path

from skilltune.errors import UsageError
from skilltune.judge.models import JudgeModel, JudgeReply
from skilltune.judge.settings import JudgeSettings, find_key


class APIJudgeModel(JudgeModel):
    def __init__(self, settings: JudgeSettings, suite_root: Path) -> None:
        self.settings = settings
        self.suite_root = suite_root
        self.name = str(settings.effective_model)

    def check(self) -> None:
        key, _, where = find_key(self.settings, self.suite_root)
        if key is None and not self.settings.local:
            raise UsageError(f"the judge needs a key: set {where}, or put it in a .env file")

    def ask(self, system: str, user: str) -> JudgeReply:
        raise UsageError("the API judge is wired to the model-call module (not merged yet)")
