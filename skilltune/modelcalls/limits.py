"""Per-endpoint state shared by every thread of the process: rate limits, a 429's pause, and what
the endpoint taught us (the token-limit field it reads, parameters it refuses).

One ``EndpointState`` per endpoint URL, whoever calls it (proposer, targets, judge): the
limits held are the strictest any caller configured. Limits hold within one process; the
Ray executor refuses direct targets for that reason (see agents/chat.py).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from skilltune.modelcalls.settings import CallCancelled, CallSettings

WINDOW_S = 60.0
_POLL_S = 0.1


@dataclass
class Ticket:
    """One request admitted by the limits; ``release`` it with the tokens it really used."""

    started: float
    entry: list[float] | None  # [time, tokens] in the tokens-per-minute window


def _stricter(a: int | None, b: int | None) -> int | None:
    if a is None or b is None:
        return a if b is None else b
    return min(a, b)


class EndpointState:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.max_concurrent: int | None = None
        self.requests_per_minute: int | None = None
        self.tokens_per_minute: int | None = None
        self._in_flight = 0
        self._requests: deque[float] = deque()
        self._tokens: deque[list[float]] = deque()
        self._paused_until = 0.0
        # Learnt from the endpoint under token_param=auto: the field it reads, parameters it refused.
        self.token_param: str | None = None
        self.dropped: frozenset[str] = frozenset()
        self.said: set[str] = set()  # notes already given once for this endpoint

    def configure(self, settings: CallSettings) -> None:
        with self._cond:
            self.max_concurrent = _stricter(self.max_concurrent, settings.max_concurrent)
            self.requests_per_minute = _stricter(self.requests_per_minute, settings.requests_per_minute)
            self.tokens_per_minute = _stricter(self.tokens_per_minute, settings.tokens_per_minute)

    def pause(self, seconds: float) -> None:
        """A 429 with retry-after: no caller of this endpoint sends anything before it passes."""
        with self._cond:
            self._paused_until = max(self._paused_until, time.monotonic() + seconds)
            self._cond.notify_all()

    def learn(self, token_param: str | None = None, drop: str | None = None) -> None:
        with self._cond:
            if token_param is not None:
                self.token_param = token_param
            if drop is not None:
                self.dropped = self.dropped | {drop}

    def once(self, note: str) -> bool:
        """True the first time ``note`` is given for this endpoint (warnings are said once)."""
        with self._cond:
            if note in self.said:
                return False
            self.said.add(note)
            return True

    def _wait(self, now: float, tokens: int) -> float:
        """Seconds to wait before a request of ``tokens`` may start (0: now)."""
        while self._requests and self._requests[0] <= now - WINDOW_S:
            self._requests.popleft()
        while self._tokens and self._tokens[0][0] <= now - WINDOW_S:
            self._tokens.popleft()
        waits = [self._paused_until - now]
        if self.max_concurrent is not None and self._in_flight >= self.max_concurrent:
            waits.append(_POLL_S)  # a release notifies
        if self.requests_per_minute is not None and len(self._requests) >= self.requests_per_minute:
            waits.append(self._requests[0] + WINDOW_S - now)
        if self.tokens_per_minute is not None and self._tokens:
            used = sum(int(t) for _, t in self._tokens)
            if used + tokens > self.tokens_per_minute:  # one request larger than the limit goes alone
                waits.append(self._tokens[0][0] + WINDOW_S - now)
        return max(waits)

    def acquire(self, tokens: int, cancel: Callable[[], bool] | None) -> Ticket:
        """Wait until the limits admit a request of about ``tokens``; raises CallCancelled when
        ``cancel`` says so meanwhile."""
        with self._cond:
            while True:
                if cancel is not None and cancel():
                    raise CallCancelled("cancelled while waiting for the endpoint's rate limits")
                now = time.monotonic()
                wait = self._wait(now, tokens)
                if wait <= 0:
                    break
                self._cond.wait(min(wait, _POLL_S))
            self._in_flight += 1
            self._requests.append(now)
            entry = [now, float(tokens)] if self.tokens_per_minute is not None else None
            if entry is not None:
                self._tokens.append(entry)
            return Ticket(now, entry)

    def release(self, ticket: Ticket, tokens: int | None) -> None:
        with self._cond:
            self._in_flight -= 1
            if ticket.entry is not None and tokens is not None:
                ticket.entry[1] = float(tokens)
            self._cond.notify_all()


_STATES: dict[str, EndpointState] = {}
_STATES_LOCK = threading.Lock()


def endpoint_state(url: str) -> EndpointState:
    with _STATES_LOCK:
        if url not in _STATES:
            _STATES[url] = EndpointState()
        return _STATES[url]


def forget_endpoints() -> None:
    """Drop every endpoint's state (tests: each scripted server starts with a clean slate)."""
    with _STATES_LOCK:
        _STATES.clear()
