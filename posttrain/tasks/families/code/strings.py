"""Functions of one string: `code/function/strings@{easy,medium,hard}`.

Easy is one method or slice; medium a count, replacement or filter; hard a loop over characters or
words (Caesar shift, run-length encoding, word order). Inputs are lowercase words, single-space
separated at the hard level; the empty string and a one-letter string are always tested.
"""

from __future__ import annotations

import random
import string
from itertools import groupby

from posttrain.tasks.families.code.procedural import CodeFamilySpec, Op, Params, constant

_LETTERS = string.ascii_lowercase
_LENGTH = {"easy": 5, "medium": 8, "hard": 10}


def _letter(rng: random.Random) -> Params:
    return {"c": rng.choice("aeiostr")}


def _two_letters(rng: random.Random) -> Params:
    a, b = rng.sample("aeiostrxyz", 2)
    return {"a": a, "b": b}


def _shift(p: Params, s: str) -> str:
    table = str.maketrans(_LETTERS, _LETTERS[p["k"]:] + _LETTERS[: p["k"]])
    return s.translate(table)


def _most_frequent(s: str) -> str:
    return max(s, key=s.count) if s else ""


EASY = (
    Op("{arg} in upper case", "return {arg}.upper()", lambda p, s: "".join(c.upper() for c in s), "str"),
    Op("{arg} reversed", "return {arg}[::-1]", lambda p, s: "".join(reversed(s)), "str"),
    Op("{arg} written twice", "return {arg} * 2", lambda p, s: s + s, "str"),
    Op("the length of {arg}", "return len({arg})", lambda p, s: sum(1 for _ in s), "int"),
    Op("{arg} followed by the letter {c!r}", "return {arg} + {c!r}", lambda p, s: f"{s}{p['c']}", "str", _letter),
)
MEDIUM = (
    Op("the number of times {c!r} occurs in {arg}", "return {arg}.count({c!r})",
       lambda p, s: sum(ch == p["c"] for ch in s), "int", _letter),
    Op("{arg} with every {a!r} replaced by {b!r}", "return {arg}.replace({a!r}, {b!r})",
       lambda p, s: "".join(p["b"] if ch == p["a"] else ch for ch in s), "str", _two_letters),
    Op("the first {k} characters of {arg}", "return {arg}[:{k}]", lambda p, s: s[: min(len(s), p["k"])], "str",
       constant(1, 4)),
    Op("every second character of {arg}, starting with the first", "return {arg}[::2]",
       lambda p, s: "".join(ch for i, ch in enumerate(s) if i % 2 == 0), "str"),
    Op("{arg} without its vowels (a, e, i, o, u)", "return ''.join(c for c in {arg} if c not in 'aeiou')",
       lambda p, s: s.translate(str.maketrans("", "", "aeiou")), "str"),
    Op("True if {arg} reads the same backwards, else False", "return {arg} == {arg}[::-1]",
       lambda p, s: all(s[i] == s[-1 - i] for i in range(len(s) // 2)), "bool"),
)
HARD = (
    Op("{arg} with each letter moved {k} places forward in the alphabet (z wraps to a; spaces kept)",
       "return ''.join(chr((ord(c) - 97 + {k}) % 26 + 97) if c != ' ' else c for c in {arg})",
       _shift, "str", constant(1, 25)),
    Op("{arg} with the order of its words reversed (words are separated by one space)",
       "return ' '.join(reversed({arg}.split(' ')))", lambda p, s: " ".join(s.split()[::-1]), "str"),
    Op("{arg} with the first letter of each word in upper case", "return ' '.join(w[:1].upper() + w[1:] for w in {arg}.split(' '))",
       lambda p, s: s.title(), "str"),
    Op("the run-length encoding of {arg}, e.g. 'aab c' -> 'a2b1 1c1'",
       "out = ''\ni = 0\nwhile i < len({arg}):\n    j = i\n    while j < len({arg}) and {arg}[j] == {arg}[i]:\n"
       "        j += 1\n    out += {arg}[i] + str(j - i)\n    i = j\nreturn out",
       lambda p, s: "".join(f"{ch}{len(list(run))}" for ch, run in groupby(s)), "str"),
    Op("the most frequent character of {arg}, the earliest on a tie ('' for an empty string)",
       "best = ''\nfor c in {arg}:\n    if best == '' or {arg}.count(c) > {arg}.count(best):\n        best = c\nreturn best",
       lambda p, s: _most_frequent(s), "str"),
    Op("{arg} with letters alternating upper and lower case, starting upper",
       "return ''.join(c.upper() if i % 2 == 0 else c for i, c in enumerate({arg}))",
       lambda p, s: "".join(ch.upper() if i % 2 == 0 else ch.lower() for i, ch in enumerate(s)), "str"),
)


def _random_text(rng: random.Random, level: str) -> str:
    letters = _LETTERS if level == "hard" else "abcdefghijklmnopqrst"
    word = "".join(rng.choice(letters) for _ in range(rng.randint(2, _LENGTH[level])))
    if level != "hard":
        return word
    words = [word[i : i + rng.randint(1, 4)] for i in range(0, len(word), 3)]
    return " ".join(words)


SPEC = CodeFamilySpec(
    name="strings", arg="s", arg_type="str", levels={"easy": EASY, "medium": MEDIUM, "hard": HARD},
    edge_inputs=("", "a"), random_input=_random_text,
)
