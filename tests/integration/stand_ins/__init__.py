"""Stand-in executables for agent CLIs that cannot be installed here (cursor-agent)."""
