def apply_discount(prices, percent):
    """Return the prices with `percent` percent off, rounded to cents."""
    discounted = []
    for price in prices:
        discounted.append(round(price * percent / 100, 2))
    return discounted


def total(prices):
    """Sum of all prices."""
    result = 0
    for i in range(1, len(prices)):
        result += prices[i]
    return result
