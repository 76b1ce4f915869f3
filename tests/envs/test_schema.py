"""Tool schemas derived from type hints and docstrings, and argument checking against them."""

from __future__ import annotations

from typing import Any, Literal

import pytest

from posttrain.envs.schema import argument_error, function_schema, parse_docstring, type_schema


def book_flight(origin: str, seats: int, budget: float, cabin: Literal["economy", "business"] = "economy",
                direct: bool = False, stops: list[str] | None = None, extra: dict[str, Any] | None = None) -> str:
    """Book a flight for the user.

    Longer explanation that is not part of the description.

    Args:
        origin: The departure airport code,
            e.g. ZRH.
        seats (int): How many seats.
        budget: The most to pay, in euros.
        cabin: The cabin class.
    """
    return "ok"


def test_schema_has_the_function_shape_types_and_required_parameters() -> None:
    schema = function_schema(book_flight)
    assert schema["type"] == "function"
    fn = schema["function"]
    assert fn["name"] == "book_flight"
    assert fn["description"] == "Book a flight for the user."
    params = fn["parameters"]
    assert params["type"] == "object"
    assert params["required"] == ["origin", "seats", "budget"]  # defaults and `X | None` are optional
    props = params["properties"]
    assert props["origin"] == {"type": "string", "description": "The departure airport code, e.g. ZRH."}
    assert props["seats"] == {"type": "integer", "description": "How many seats."}
    assert props["budget"]["type"] == "number"
    assert props["cabin"] == {"enum": ["economy", "business"], "type": "string", "description": "The cabin class."}
    assert props["direct"] == {"type": "boolean"}
    assert props["stops"] == {"type": "array", "items": {"type": "string"}}
    assert props["extra"] == {"type": "object"}


def test_explicit_name_and_description_win() -> None:
    fn = function_schema(book_flight, name="book", description="Books.")["function"]
    assert (fn["name"], fn["description"]) == ("book", "Books.")


def test_a_type_json_cannot_carry_is_refused() -> None:
    with pytest.raises(TypeError):
        type_schema(complex)


def test_docstring_without_args_section() -> None:
    assert parse_docstring("One line.\nStill the first paragraph.\n\nMore.") == (
        "One line. Still the first paragraph.", {})


PARAMS = function_schema(book_flight)["function"]["parameters"]
GOOD = {"origin": "ZRH", "seats": 2, "budget": 300}


def test_valid_arguments_pass_and_an_int_is_a_number() -> None:
    assert argument_error(GOOD, PARAMS) is None
    assert argument_error({**GOOD, "budget": 299.5, "cabin": "business", "stops": ["FRA"]}, PARAMS) is None


@pytest.mark.parametrize(("arguments", "expected"), [
    ({"origin": "ZRH", "seats": 2}, "missing required argument 'budget'"),
    ({**GOOD, "meal": "veg"}, "unexpected argument 'meal'"),
    ({**GOOD, "seats": "2"}, "argument 'seats' must be of type integer, got string"),
    ({**GOOD, "seats": 2.0}, "argument 'seats' must be of type integer, got number"),
    ({**GOOD, "seats": True}, "argument 'seats' must be of type integer, got boolean"),
    ({**GOOD, "budget": False}, "argument 'budget' must be of type number, got boolean"),
    ({**GOOD, "cabin": "first"}, "argument 'cabin' must be one of"),
    ({**GOOD, "stops": ["FRA", 3]}, "argument 'stops'[1] must be of type string"),
    ({**GOOD, "extra": [1]}, "argument 'extra' must be of type object"),
])  # fmt: skip
def test_each_kind_of_bad_argument_gives_a_clear_error(arguments: dict[str, Any], expected: str) -> None:
    error = argument_error(arguments, PARAMS)
    assert error is not None and expected in error, error


def test_argument_check_is_total_on_odd_values() -> None:
    for value in [None, float("nan"), {"a": {"b": []}}, "\ud800", 10**400, [[[]]]]:
        assert isinstance(argument_error({**GOOD, "origin": value}, PARAMS), str | None)
