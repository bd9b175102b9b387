"""``python -m skilltune``: the ``skilltune`` command (as ``python -m skilltune.cli``)."""

from skilltune.cli import main

if __name__ == "__main__":
    main()
