"""Judged scoring: settings, verdicts, the judge scoring mode, and its readiness and noise checks.

Import the modules themselves (``skilltune.suite.judge``...): this package imports nothing,
so the suite can read judge settings without loading the scorer or any model client.
"""
