def page(items, number, size=10):
    """Items of page `number` (pages are numbered from 1)."""
    start = number * size
    return items[start:start + size]


def page_count(total, size=10):
    """How many pages `total` items fill."""
    return total // size
