"""Prompt templates of the model proposers (reflect, rewrite, slow update), read as package data."""
