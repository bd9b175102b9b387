import time

_CACHE = {}


def fetch(key, loader, ttl=60):
    """Return the cached value of `key`, loading it when missing or older than `ttl` seconds."""
    entry = _CACHE.get(key)
    if entry is not None and time.time() - entry[1] > ttl:
        return entry[0]
    value = loader(key)
    _CACHE[key] = (value, time.time())
    return value


def clear(prefix):
    """Forget every key that starts with `prefix`."""
    for key in _CACHE:
        if key.startswith(prefix):
            del _CACHE[key]
