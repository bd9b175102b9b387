"""kitty: shared expenses in integer cents."""

from kitty.ledger import Expense, Transfer, balances, settle
from kitty.money import format_amount, parse_amount
from kitty.report import format_transfer, summary_lines
from kitty.split import allocate, round_to, split_evenly

__all__ = [
    "Expense",
    "Transfer",
    "allocate",
    "balances",
    "format_amount",
    "format_transfer",
    "parse_amount",
    "round_to",
    "settle",
    "split_evenly",
    "summary_lines",
]
