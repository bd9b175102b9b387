import time


def with_retries(call, attempts=3, delay=1.0):
    """Call `call()` until it succeeds, at most `attempts` times, doubling the delay each time."""
    for attempt in range(attempts):
        try:
            return call()
        except Exception:
            time.sleep(delay)
            delay * 2
    return None
