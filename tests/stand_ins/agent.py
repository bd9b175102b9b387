"""A stand-in agent CLI for executor tests: behaves as the task's ``stand_in`` field says.

    ok     write hello.txt, print an assistant event and a result event, exit 0
    hang   start a child that sleeps, print one event, then go silent forever (a stuck agent)
    busy   start a child that sleeps, print an assistant event, then a heartbeat every 0.1 s forever
           (only the wall limit ends it)

Usage: agent.py MODE MARKER COUNTER_FILE  (MARKER tags the child processes for pgrep;
each run appends a line to COUNTER_FILE, and each child's pid, once it runs, to
COUNTER_FILE.children: a test waits for it, or checks that the agent got that far)
"""

import json
import subprocess
import sys
import time
from pathlib import Path

mode, marker, counter = sys.argv[1], sys.argv[2], Path(sys.argv[3])
with counter.open("a") as handle:
    handle.write(f"{mode}\n")


def emit(event: dict[str, object]) -> None:
    print(json.dumps(event), flush=True)


def start_child() -> None:
    child = subprocess.Popen([sys.executable, "-c", f"import time; time.sleep(300)  # {marker}"])
    with Path(f"{counter}.children").open("a") as handle:
        handle.write(f"{child.pid}\n")


if mode == "ok":
    Path("hello.txt").write_text("HELLO\n")
    emit({"type": "assistant", "text": "writing hello.txt"})
    emit({"type": "result", "text": "done"})
elif mode == "hang":
    start_child()
    emit({"type": "assistant", "text": "thinking"})
    time.sleep(300)
elif mode == "busy":
    start_child()
    emit({"type": "assistant", "text": "working"})
    while True:
        emit({"type": "heartbeat"})
        time.sleep(0.1)
