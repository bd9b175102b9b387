"""Who paid what, who owes whom, and the transfers that settle a group up."""

from __future__ import annotations

from typing import NamedTuple

from kitty.split import allocate


class Expense(NamedTuple):
    """``payer`` paid ``cents`` for the people in ``shares`` (name -> weight)."""

    payer: str
    cents: int
    shares: dict[str, int]


class Transfer(NamedTuple):
    payer: str
    payee: str
    cents: int


def balances(expenses: list[Expense]) -> dict[str, int]:
    """Each person's balance in cents: positive when the group owes them, negative when they owe.

    The payer of an expense is credited its full amount; each person in its
    ``shares`` is charged their part, as ``allocate`` divides it (names sorted,
    so the leftover cents fall the same way every time). Everyone who appears
    anywhere gets an entry; the balances add up to zero. The result's keys are
    sorted by name.
    """
    totals: dict[str, int] = {}
    for expense in expenses:
        totals[expense.payer] = totals.get(expense.payer, 0) + expense.cents
        names = sorted(expense.shares)
        parts = allocate(expense.cents, [expense.shares[n] for n in names])
        for name, part in zip(names, parts, strict=True):
            totals[name] = totals.get(name, 0) - part
    return dict(sorted(totals.items()))


def settle(balances: dict[str, int]) -> list[Transfer]:
    """Transfers that bring every balance to zero.

    Repeatedly the person who owes the most pays the person owed the most as much
    as settles one of them (ties broken by name, alphabetically first). Balances
    that do not add up to zero raise ValueError.
    """
    if sum(balances.values()) != 0:
        raise ValueError("balances must add up to zero")
    owed = {n: c for n, c in balances.items() if c > 0}
    owing = {n: -c for n, c in balances.items() if c < 0}
    transfers = []
    while owing:
        payer = min(owing, key=lambda n: (-owing[n], n))
        payee = min(owed, key=lambda n: (-owed[n], n))
        cents = min(owing[payer], owed[payee])
        transfers.append(Transfer(payer, payee, cents))
        for book, name in ((owing, payer), (owed, payee)):
            book[name] -= cents
            if book[name] == 0:
                del book[name]
    return transfers
