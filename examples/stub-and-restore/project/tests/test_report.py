import unittest

from kitty.ledger import Transfer
from kitty.report import format_transfer, summary_lines


class FormatTransfer(unittest.TestCase):
    def test_sentence(self):
        self.assertEqual(format_transfer(Transfer("ben", "ana", 1250)), "ben pays ana 12.50")
        self.assertEqual(format_transfer(Transfer("cy", "di", 123456)), "cy pays di 1,234.56")


class SummaryLines(unittest.TestCase):
    def test_one_line_per_person_by_name(self):
        self.assertEqual(
            summary_lines({"cy": 0, "ben": -300, "ana": 1250}),
            ["ana is owed 12.50", "ben owes 3.00", "cy is settled up"],
        )

    def test_empty(self):
        self.assertEqual(summary_lines({}), [])
