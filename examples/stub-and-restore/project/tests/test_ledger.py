import unittest

from kitty.ledger import Expense, Transfer, balances, settle

TRIP = [
    Expense("ana", 9000, {"ana": 1, "ben": 1, "cy": 1}),
    Expense("ben", 3000, {"ben": 1, "cy": 1}),
]


class Balances(unittest.TestCase):
    def test_payer_credited_sharers_charged(self):
        self.assertEqual(balances(TRIP), {"ana": 6000, "ben": -1500, "cy": -4500})

    def test_add_up_to_zero_with_leftover_cents(self):
        result = balances([Expense("ana", 1000, {"ana": 1, "ben": 1, "cy": 1})])
        self.assertEqual(result, {"ana": 666, "ben": -333, "cy": -333})
        self.assertEqual(sum(result.values()), 0)

    def test_weights_and_a_payer_who_does_not_share(self):
        result = balances([Expense("dee", 1200, {"ana": 1, "ben": 2})])
        self.assertEqual(result, {"ana": -400, "ben": -800, "dee": 1200})

    def test_keys_sorted_and_empty(self):
        self.assertEqual(list(balances([Expense("zed", 10, {"abe": 1})])), ["abe", "zed"])
        self.assertEqual(balances([]), {})


class Settle(unittest.TestCase):
    def test_largest_debtor_pays_largest_creditor(self):
        self.assertEqual(
            settle({"ana": 6000, "ben": -1500, "cy": -4500}),
            [Transfer("cy", "ana", 4500), Transfer("ben", "ana", 1500)],
        )

    def test_ties_by_name(self):
        self.assertEqual(
            settle({"ana": 100, "bo": 100, "cy": -100, "di": -100}),
            [Transfer("cy", "ana", 100), Transfer("di", "bo", 100)],
        )

    def test_every_balance_reaches_zero(self):
        start = {"a": 700, "b": -250, "c": -300, "d": 50, "e": -200}
        left = dict(start)
        for transfer in settle(start):
            left[transfer.payer] += transfer.cents
            left[transfer.payee] -= transfer.cents
        self.assertEqual(set(left.values()), {0})

    def test_nothing_to_settle_and_bad_balances(self):
        self.assertEqual(settle({"ana": 0}), [])
        with self.assertRaises(ValueError):
            settle({"ana": 5, "ben": -4})
