import unittest

from kitty.money import format_amount, parse_amount


class ParseAmount(unittest.TestCase):
    def test_whole_and_decimal(self):
        self.assertEqual(parse_amount("12"), 1200)
        self.assertEqual(parse_amount("12.5"), 1250)
        self.assertEqual(parse_amount("0.07"), 7)

    def test_thousands_separators_and_spaces(self):
        self.assertEqual(parse_amount(" 1,234.56 "), 123456)
        self.assertEqual(parse_amount("1,000,000"), 100000000)

    def test_negative(self):
        self.assertEqual(parse_amount("-3"), -300)
        self.assertEqual(parse_amount("-0.10"), -10)

    def test_rejects_what_is_not_an_amount(self):
        for text in ("", "abc", "1.234", "1,23", "12,34.5", "1.", "--2"):
            with self.subTest(text=text), self.assertRaises(ValueError):
                parse_amount(text)


class FormatAmount(unittest.TestCase):
    def test_two_decimals_and_separators(self):
        self.assertEqual(format_amount(123456), "1,234.56")
        self.assertEqual(format_amount(100000000), "1,000,000.00")
        self.assertEqual(format_amount(0), "0.00")

    def test_small_and_negative(self):
        self.assertEqual(format_amount(5), "0.05")
        self.assertEqual(format_amount(-5), "-0.05")
        self.assertEqual(format_amount(-123456), "-1,234.56")

    def test_round_trip(self):
        for cents in (0, 1, 99, 100, 101, 99999, -250, 1234567):
            with self.subTest(cents=cents):
                self.assertEqual(parse_amount(format_amount(cents)), cents)
