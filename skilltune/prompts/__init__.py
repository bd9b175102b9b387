"""Prompt templates, read as package data: the model proposers' (reflect, focus, describe, rewrite,
slow update) and the trigger drafter's (draft_queries, draft_check)."""
