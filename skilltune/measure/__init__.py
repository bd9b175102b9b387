"""Measuring a skill: run (evaluate), compare, calibrate and smoke, each over a rollout session."""
