"""Sealed rollouts: an agent's process group in a mount namespace that holds only what it needs.

bubblewrap (``bwrap``) starts the agent CLI with, at their own paths:

- the system folders read-only (/usr, /bin, /sbin, /lib*, /etc, /sys, /opt);
- the CLI's installation read-only (its ``node_modules`` tree, or the folder of its binary,
  and its interpreter's when the script names one with ``#!/usr/bin/env``);
- the rollout's private HOME and its workspace read-write, and the user's credential files the
  CLI links into that HOME (read-write: a refreshed token must reach the user's file);
- what an agent option adds (``sandbox_ro``, ``sandbox_rw``: a CLI that needs more);
- /proc, /dev and /tmp fresh, its own PID namespace, killed with its parent.

Nothing else exists inside: not the suite, the run directory, the user's home, other
workspaces. The network is shared (the agent must reach its model endpoint). ``--sandbox auto``
(the default) seals when the machine can (Linux, and ``bwrap ... true`` runs); the probe runs
once per process.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from skilltune.errors import UsageError

SandboxChoice = Literal["auto", "bwrap", "none"]
SANDBOX_CHOICES: tuple[SandboxChoice, ...] = ("auto", "bwrap", "none")
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/sys", "/opt")
SEAL_OPTIONS = ("sandbox_ro", "sandbox_rw")  # the agent options that add binds (agents/cli.py)
INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap)"
)


@dataclass(frozen=True)
class Seal:
    """How a command's rollouts run: ``kind`` ``bwrap`` (sealed) or ``none``; ``reason`` says why
    they are not sealed (None when sealed)."""

    kind: Literal["bwrap", "none"]
    reason: str | None = None

    @property
    def sealed(self) -> bool:
        return self.kind == "bwrap"

    def describe(self) -> str:
        """One line for ``agents``, ``smoke`` and warnings."""
        if self.sealed:
            return "rollouts are sealed (bwrap: the agent sees its workspace, its private HOME and the system folders)"
        return f"rollouts are NOT sealed: {self.reason}"


UNSEALED = Seal("none", "--sandbox none")


def _base_args(executable: str) -> list[str]:
    args = [executable]
    for folder in SYSTEM_DIRS:
        args += ["--ro-bind-try", folder, folder]
    return [
        *args,
        *("--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"),
        *("--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent"),
    ]


@functools.cache
def bwrap_problem() -> str | None:
    """Why rollouts cannot be sealed on this machine (None: they can). Probed once per process:
    bwrap exists and ``bwrap <the sandbox's own options> true`` succeeds."""
    if not sys.platform.startswith("linux"):
        return (
            f"not Linux ({sys.platform}): bubblewrap needs Linux namespaces; run skilltune in a Linux "
            "VM or container to seal rollouts (docs/sandbox.md)"
        )
    executable = shutil.which("bwrap")
    if executable is None:
        return f"bwrap is not installed: {INSTALL_HINT}"
    try:
        probe = subprocess.run(
            [*_base_args(executable), "true"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap could not run ({type(exc).__name__}: {exc})"
    if probe.returncode != 0:
        said = (probe.stderr or probe.stdout).strip().splitlines()
        return (
            f"bwrap cannot run here ({said[0] if said else f'exit {probe.returncode}'}): user namespaces may be "
            "off (sysctl kernel.unprivileged_userns_clone=1, or the container's seccomp/AppArmor profile)"
        )
    return None


def resolve(choice: SandboxChoice) -> Seal:
    """The seal ``--sandbox CHOICE`` gives on this machine. ``bwrap`` where bwrap cannot run is a
    UsageError (exit 2); ``auto`` then falls back to none with the reason."""
    if choice not in SANDBOX_CHOICES:
        raise UsageError(f"--sandbox {choice!r}: use auto, bwrap or none")
    if choice == "none":
        return UNSEALED
    problem = bwrap_problem()
    if problem is None:
        return Seal("bwrap")
    if choice == "bwrap":
        raise UsageError(f"--sandbox bwrap: {problem}; or pass --sandbox none to run rollouts unsealed")
    return Seal("none", problem)


def _system(path: Path) -> bool:
    return any(path == Path(d) or path.is_relative_to(d) for d in SYSTEM_DIRS)


def installation(executable: str) -> list[Path]:
    """The folders an agent CLI's executable needs readable: its ``node_modules`` tree (npm packages
    load their platform binaries from siblings) or its folder, the folder of the link PATH found
    it by, and the same for the interpreter a ``#!/usr/bin/env NAME`` line names. System folders
    are left out (bound anyway)."""
    found = shutil.which(executable) or executable
    path = Path(found)
    if not path.is_absolute():
        return []
    folders = [path.parent, *_tree_of(path.resolve())]
    interpreter = _env_interpreter(path.resolve())
    named = shutil.which(interpreter) if interpreter is not None else None
    if named is not None:  # node or python installed outside the system folders (nvm, pyenv): its prefix
        real = Path(named).resolve()
        folders += [Path(named).parent, *_tree_of(real)]
        if real.parent.name == "bin":
            folders.append(real.parent.parent)
    return sorted({f for f in folders if not _system(f)})


def _tree_of(real: Path) -> list[Path]:
    """The top ``node_modules`` folder above ``real``, else its folder."""
    tops = [p for p in real.parents if p.name == "node_modules"]
    return [tops[-1]] if tops else [real.parent]


def _env_interpreter(script: Path) -> str | None:
    """NAME of a ``#!/usr/bin/env [-S] NAME`` first line, or None."""
    try:
        with script.open("rb") as handle:
            first = handle.readline(200)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    words = first[2:].decode("utf-8", "replace").split()
    if len(words) >= 2 and Path(words[0]).name == "env":
        names = [w for w in words[1:] if not w.startswith("-")]
        return names[0] if names else None
    return None


def sealed_argv(
    argv: list[str],
    *,
    workspace: Path,
    home: Path,
    readable: Iterable[Path] = (),
    writable: Iterable[Path] = (),
) -> list[str]:
    """``argv`` run under bwrap: ``workspace`` (the working folder) and ``home`` read-write,
    ``readable`` read-only, ``writable`` read-write (a missing path is skipped), besides the
    system folders; see the module's docstring for the rest."""
    executable = shutil.which("bwrap")
    if executable is None:  # a Ray worker without bwrap: no rollout could run sealed there
        raise UsageError(
            f"rollouts are sealed (--sandbox) but this machine has no bwrap: {INSTALL_HINT}, "
            "or pass --sandbox none"
        )
    args = _base_args(executable)
    for path in readable:
        args += ["--ro-bind-try", str(path), str(path)]
    for path in (home, workspace):
        args += ["--bind", str(path), str(path)]
    for path in writable:
        args += ["--bind-try", str(path), str(path)]
    return [*args, "--chdir", str(workspace), "--", *argv]


def extra_paths(values: Iterable[str]) -> list[Path]:
    """An agent option's paths (``sandbox_ro``/``sandbox_rw``), ``~`` expanded, made absolute."""
    return [Path(v).expanduser().absolute() for v in values]


RolloutSandbox = Literal["bwrap", "inert", "none"]


def rollout_sandbox(seal: Seal, support: Literal["process", "inert", "none"]) -> RolloutSandbox:
    """How a backend's rollouts run under ``seal`` (what record.json says): ``bwrap`` (its process
    sealed), ``inert`` (it starts no process and reads only its workspace: nothing to seal) or
    ``none`` (not sealed: ``--sandbox none``, bwrap unavailable, or a backend that cannot be sealed)."""
    if support == "inert":
        return "inert"
    return "bwrap" if seal.sealed and support == "process" else "none"
