#!/bin/bash
python3 - <<'PY'
import sys
sys.path.insert(0, ".")
try:
    from textstats import average_word_length, longest_words, words
except Exception as exc:
    sys.exit(f"cannot import textstats: {exc!r}")
checks = [
    (words("The cat's HAT"), ["the", "cat's", "hat"]),
    (words("Hello, World! 42x"), ["hello", "world", "42x"]),
    (round(average_word_length("ab abcd"), 6), 3.0),
    (round(average_word_length("A bb, CCC!"), 6), 2.0),
    (average_word_length("?!"), 0.0),
    (longest_words("aa bbb c dd bbb", 2), ["bbb", "aa"]),
    (longest_words("Zeta alpha beta ALPHA gamma", 3), ["alpha", "gamma", "beta"]),
    (longest_words("one", 5), ["one"]),
]
for i, (got, expected) in enumerate(checks):
    if got != expected:
        sys.exit(f"check {i}: expected {expected!r}, got {got!r}")
PY
