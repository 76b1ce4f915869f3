"""Invented names the corpora share: people, cities, organisation words. None is a real company.

Filler prose never uses these lists, so a name found in a document is always evidence.
"""

from __future__ import annotations

import random

FIRST_NAMES = ("Amara", "Bastian", "Chiara", "Dmitri", "Elin", "Farida", "Gideon", "Hana", "Ilse", "Jonas",
               "Kalani", "Leona", "Marek", "Nadia", "Oskar", "Priya", "Quentin", "Rosalind", "Soren",
               "Talia", "Ulrich", "Vera", "Wendell", "Ximena", "Yusuf", "Zofia")  # fmt: skip
LAST_NAMES = ("Abernethy", "Brandvold", "Castellanos", "Delacroix", "Ekwueme", "Fairbairn", "Grunewald",
              "Halvorsen", "Ishikawa", "Jablonski", "Kowalczyk", "Lindqvist", "Montague", "Nakashima",
              "Okonkwo", "Pellegrini", "Quarshie", "Rasmussen", "Szabo", "Thorvaldsen", "Uchenna",
              "Vasquez", "Whitcombe", "Yilmaz", "Zeller")  # fmt: skip
CITIES = ("Rotterdam", "Gothenburg", "Leeds", "Lyon", "Porto", "Graz", "Tampere", "Ghent", "Bilbao",
          "Brno", "Aarhus", "Bologna", "Cork", "Basel", "Utrecht", "Malmo", "Dresden")  # fmt: skip
ORG_FIRST = ("Northwind", "Bluecrest", "Harbourline", "Silverfield", "Kestrel", "Ironbridge", "Meridian",
             "Copperleaf", "Alderbank", "Stonegate", "Larkspur", "Westmere", "Falconridge", "Brightwater")  # fmt: skip
ORG_SECOND = ("Holdings", "Industries", "Group", "Systems", "Technologies", "Partners", "Enterprises")


def person(rng: random.Random, taken: set[str]) -> str:
    """A full name not in `taken` (which it is added to)."""
    while True:
        name = f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}"
        if name not in taken:
            taken.add(name)
            return name


def organisation(rng: random.Random, avoid: str = "") -> str:
    """An invented organisation name, different from `avoid`."""
    while True:
        name = f"{rng.choice(ORG_FIRST)} {rng.choice(ORG_SECOND)}"
        if name != avoid:
            return name


def money(value: int) -> str:
    """An integer with thousands separators: 12,345."""
    return f"{value:,}"
