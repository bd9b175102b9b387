def average(values):
    """Arithmetic mean of `values`."""
    return sum(values) / len(values)


def median(values):
    """Middle value of `values`."""
    values.sort()
    middle = len(values) // 2
    return values[middle]
