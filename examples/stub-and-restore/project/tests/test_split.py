import unittest

from kitty.split import allocate, round_to, split_evenly


class SplitEvenly(unittest.TestCase):
    def test_leftover_cents_go_to_the_first_people(self):
        self.assertEqual(split_evenly(1000, 3), [334, 333, 333])
        self.assertEqual(split_evenly(1001, 4), [251, 250, 250, 250])

    def test_exact_and_trivial(self):
        self.assertEqual(split_evenly(900, 3), [300, 300, 300])
        self.assertEqual(split_evenly(7, 1), [7])
        self.assertEqual(split_evenly(2, 5), [1, 1, 0, 0, 0])

    def test_refuses_nobody_and_negative_amounts(self):
        with self.assertRaises(ValueError):
            split_evenly(100, 0)
        with self.assertRaises(ValueError):
            split_evenly(-100, 2)


class Allocate(unittest.TestCase):
    def test_parts_add_up(self):
        for cents, weights in ((1000, [1, 1, 1]), (999, [2, 3, 5]), (1, [1, 1]), (12345, [7, 0, 13])):
            with self.subTest(cents=cents, weights=weights):
                self.assertEqual(sum(allocate(cents, weights)), cents)

    def test_largest_remainder(self):
        self.assertEqual(allocate(100, [1, 1, 1]), [34, 33, 33])
        self.assertEqual(allocate(100, [1, 2]), [33, 67])
        self.assertEqual(allocate(10, [3, 3, 4]), [3, 3, 4])
        self.assertEqual(allocate(11, [3, 3, 4]), [3, 3, 5])

    def test_zero_weight_gets_nothing(self):
        self.assertEqual(allocate(500, [0, 1]), [0, 500])

    def test_refuses_bad_weights(self):
        for weights in ([], [0, 0], [2, -1]):
            with self.subTest(weights=weights), self.assertRaises(ValueError):
                allocate(100, weights)


class RoundTo(unittest.TestCase):
    def test_nearest_multiple(self):
        self.assertEqual(round_to(1232, 5), 1230)
        self.assertEqual(round_to(1234, 5), 1235)
        self.assertEqual(round_to(1249, 100), 1200)

    def test_halves_round_away_from_zero(self):
        self.assertEqual(round_to(1225, 50), 1250)
        self.assertEqual(round_to(-1225, 50), -1250)
        self.assertEqual(round_to(-1224, 50), -1200)

    def test_refuses_a_step_below_one(self):
        with self.assertRaises(ValueError):
            round_to(100, 0)
