"""Rollouts: one rollout from workspace to record (runner), its isolation, scoring, conversation and cache."""
