"""Running an agent CLI: its own process group, stdin closed, a wall limit, a liveness check.

The agent's stdout (its event stream) goes to a file in the rollout's record
folder, not a pipe, and is read line by line as it arrives; every byte is a
heartbeat. A file because a Node CLI that ends with ``process.exit()`` drops what
it has not yet written to a full pipe (64 KiB): a slow reader (a loaded machine)
lost the end of gemini's stream, its answer and result with it. Writes to a file
never wait on the reader, so nothing is lost however slowly it is read.
When the wall limit passes, or no output arrives for ``stall_s`` seconds, the
whole process group is terminated (SIGTERM, then SIGKILL after a grace period),
so no grandchild survives the rollout.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

GRACE_S = 5.0
_TAIL_CHARS = 4000


@dataclass
class ProcessOutcome:
    returncode: int | None
    stdout_lines: list[str]
    stderr_tail: str
    timed_out: bool = False
    stalled: bool = False
    started: bool = True  # False: the executable could not be started at all
    error: str | None = None
    errno: int | None = None  # why it could not be started (errno.E2BIG: argv too long, ENOENT...)


_LIVE: set[int] = set()  # process groups of agents still running (for reap_orphans)
_LIVE_LOCK = threading.Lock()
_INTERRUPTED = threading.Event()  # the harness is shutting down (Ctrl-C): agents are killed, not data


class RolloutInterrupted(BaseException):
    """The harness was interrupted while this rollout ran: its agent was killed, so what it did is no
    result (neither a task failure nor an infra error); no record is written and a resume runs it again.
    A BaseException, so the harness's own failure handling (``except Exception``) lets it through."""


def interrupt_agents() -> int:
    """Kill every running agent and make rollouts raise RolloutInterrupted until ``clear_interrupt``."""
    _INTERRUPTED.set()
    return reap_orphans()


def clear_interrupt() -> None:
    _INTERRUPTED.clear()


def interrupted() -> bool:
    """Whether the harness is interrupting its rollouts (a backend with no process polls this)."""
    return _INTERRUPTED.is_set()


def interruptible_sleep(seconds: float) -> None:
    """Sleep (a retry's backoff), ending at once with RolloutInterrupted when the harness is interrupted."""
    if _INTERRUPTED.wait(seconds):
        raise RolloutInterrupted


def kill_group(pgid: int, sig: int = signal.SIGKILL) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


RUN_MARKER = "SKILLTUNE_AGENT_RUN"  # in every agent's environment, inherited by all it starts


def _kill_where(holds: Callable[[Path], bool]) -> int:
    """SIGKILL every process but this one whose /proc entry ``holds``; how many. Three rounds: a process
    may fork while we look. Linux only (``/proc``); elsewhere a no-op."""
    own = str(os.getpid())
    killed = 0
    for _ in range(3):
        found = []
        for entry in Path("/proc").glob("[0-9]*"):
            try:
                if entry.name != own and holds(entry):
                    found.append(int(entry.name))
            except (OSError, ValueError):
                continue
        for pid in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        killed += len(found)
        if not found:
            break
    return killed


def kill_marked(token: str) -> int:
    """Kill the processes whose environment carries ``RUN_MARKER=token``; how many there were.

    They are what an agent started in sessions of their own (opencode spawns its tools
    ``detached``), which the group kill misses.
    """
    needle = f"{RUN_MARKER}={token}".encode()
    return _kill_where(lambda entry: needle in (entry / "environ").read_bytes().split(b"\0"))


def kill_writers(path: Path) -> int:
    """Kill the processes that hold ``path`` open for writing; how many there were. An agent's stdout is
    a file: a writer that escaped its group and its marker (a cleared environment in a session of its
    own) would otherwise grow the record folder's copy for as long as it lives. A reader (a person's
    ``tail -f``, ``skilltune view``) is left alone."""
    try:
        target = path.stat()
    except OSError:
        return 0
    inode = (target.st_dev, target.st_ino)

    def holds(entry: Path) -> bool:
        for fd in (entry / "fd").iterdir():
            with contextlib.suppress(OSError, ValueError):
                found = fd.stat()
                if (found.st_dev, found.st_ino) != inode:
                    continue
                info = (entry / "fdinfo" / fd.name).read_text()
                flags = int(info.split("flags:")[1].split()[0], 8)
                if flags & (os.O_WRONLY | os.O_RDWR):
                    return True
        return False

    return _kill_where(holds)


def reap_orphans() -> int:
    """Kill every agent process group this process started that is still alive; how many there were."""
    with _LIVE_LOCK:
        groups = list(_LIVE)
        _LIVE.clear()
    for pgid in groups:
        kill_group(pgid)
    return len(groups)


def run_agent_process(
    argv: list[str],
    *,
    cwd: Path,
    env: dict[str, str],
    wall_limit_s: float,
    stall_s: float | None,
    stdout_path: Path,
    stderr_path: Path | None = None,
    stdin_text: str | None = None,
) -> ProcessOutcome:
    """Run ``argv`` to completion or until a limit; never raises for the agent's own failure."""
    if _INTERRUPTED.is_set():
        raise RolloutInterrupted
    t0 = time.monotonic()
    token = uuid.uuid4().hex
    out_file = stdout_path.open("wb")  # the agent holds its own copy; ours closes once it runs
    stderr_file = stderr_path.open("wb") if stderr_path else None
    try:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env={**env, RUN_MARKER: token},
            stdin=subprocess.PIPE if stdin_text is not None else subprocess.DEVNULL,
            stdout=out_file,
            stderr=stderr_file if stderr_file is not None else subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError as exc:
        if stderr_file is not None:
            stderr_file.close()
        return ProcessOutcome(
            None, [], str(exc), started=False, error=f"{type(exc).__name__}: {exc}", errno=exc.errno
        )
    finally:
        out_file.close()
    with _LIVE_LOCK:
        _LIVE.add(proc.pid)
    lines: list[str] = []
    last = [time.monotonic()]
    ended = threading.Event()  # set once no process of the agent's is left to write

    def pump() -> None:
        pending = bytearray()  # the line being written
        limit: int | None = None  # once no writer is left: the file's size then, all there is to read
        with stdout_path.open("rb") as source:
            while True:
                if limit is None and ended.is_set():
                    limit = os.fstat(source.fileno()).st_size
                want = 1 << 16 if limit is None else min(1 << 16, limit - source.tell())
                chunk = source.read(want) if want > 0 else b""
                if chunk:
                    last[0] = time.monotonic()
                    start = len(pending)
                    pending += chunk
                    cut = pending.rfind(b"\n", start)  # only the new bytes are searched
                    if cut >= 0:
                        lines.extend(line.decode("utf-8", "replace") for line in pending[:cut].split(b"\n"))
                        del pending[: cut + 1]
                elif limit is not None:
                    break
                else:
                    ended.wait(0.05)
        if pending:  # a last line without its newline
            lines.append(pending.decode("utf-8", "replace"))

    reader = threading.Thread(target=pump, name="skilltune-agent-stdout", daemon=True)
    reader.start()
    if stdin_text is not None:  # a prompt too long for argv (128 KiB per argument): written, then closed

        def feed() -> None:
            assert proc.stdin is not None
            with contextlib.suppress(BrokenPipeError, OSError):
                proc.stdin.write(stdin_text.encode("utf-8"))
            with contextlib.suppress(BrokenPipeError, OSError):
                proc.stdin.close()

        # In a thread: an agent that never reads its stdin must not block the wall limit.
        threading.Thread(target=feed, name="skilltune-agent-stdin", daemon=True).start()
    timed_out = stalled = False
    try:
        while True:
            try:
                proc.wait(timeout=0.2)
                break
            except subprocess.TimeoutExpired:
                if _INTERRUPTED.is_set():  # started while interrupt_agents ran: killed here instead
                    kill_group(proc.pid, signal.SIGKILL)
                    proc.wait()
                    break
                now = time.monotonic()
                if now - t0 > wall_limit_s:
                    timed_out = True
                elif stall_s is not None and now - last[0] > stall_s:
                    stalled = True
                if timed_out or stalled:
                    kill_group(proc.pid, signal.SIGTERM)
                    try:
                        proc.wait(timeout=GRACE_S)
                    except subprocess.TimeoutExpired:
                        kill_group(proc.pid, signal.SIGKILL)
                        proc.wait()
                    break
    finally:
        kill_group(proc.pid, signal.SIGKILL)  # whatever the agent left behind in its group
        kill_marked(token)  # and what it started outside its group
        kill_writers(stdout_path)  # and any writer of its stdout left after both
        with _LIVE_LOCK:
            _LIVE.discard(proc.pid)
        ended.set()
        reader.join()  # bounded: it reads what the file holds now, and no writer is left
        if stderr_file is not None:
            stderr_file.close()
    if _INTERRUPTED.is_set():  # killed by interrupt_agents: not the agent's outcome
        raise RolloutInterrupted
    tail = ""
    if stderr_path and stderr_path.is_file():
        data = stderr_path.read_bytes()
        tail = data[-_TAIL_CHARS:].decode("utf-8", "replace")
    return ProcessOutcome(
        returncode=proc.returncode,
        stdout_lines=lines,
        stderr_tail=tail,
        timed_out=timed_out,
        stalled=stalled,
    )
