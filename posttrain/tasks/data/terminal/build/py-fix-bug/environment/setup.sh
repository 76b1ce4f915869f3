#!/bin/bash
cat > textstats.py <<'PY'
"""Small text statistics."""
import re


def words(text):
    """Words are runs of letters, digits and apostrophes, lower-cased."""
    return re.findall(r"[a-z0-9']+", text)


def average_word_length(text):
    found = words(text)
    if not found:
        return 0.0
    return sum(len(w) for w in found) / len(text)


def longest_words(text, n):
    """The n longest distinct words, longest first, ties alphabetically."""
    distinct = sorted(set(words(text)), key=lambda w: (len(w), w), reverse=True)
    return distinct[: n - 1]
PY
cat > test_textstats.py <<'PY'
import unittest

from textstats import average_word_length, longest_words, words


class TextStatsTest(unittest.TestCase):
    def test_words_are_lower_case(self):
        self.assertEqual(words("The cat's HAT"), ["the", "cat's", "hat"])

    def test_average(self):
        self.assertAlmostEqual(average_word_length("ab abcd"), 3.0)
        self.assertEqual(average_word_length("!!"), 0.0)

    def test_longest(self):
        self.assertEqual(longest_words("aa bbb c dd bbb", 2), ["bbb", "aa"])


if __name__ == "__main__":
    unittest.main()
PY
