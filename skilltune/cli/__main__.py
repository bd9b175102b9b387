"""``python -m skilltune.cli``: the ``skilltune`` command."""

from skilltune.cli import main

if __name__ == "__main__":
    main()
