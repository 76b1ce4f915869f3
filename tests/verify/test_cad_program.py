"""The OpenSCAD program in a response, and the static check against reading files: every way of naming
a file reader is caught, including ones hidden behind what looks like a comment."""

from __future__ import annotations

import pytest

from posttrain.verify.cad_program import (
    FILE_READERS,
    MAX_PROGRAM_CHARS,
    code_without_comments,
    extract_program,
    file_access,
)


def test_the_last_openscad_scad_or_bare_block_is_the_program() -> None:
    response = "first\n```openscad\ncube(1);\n```\nthen\n```scad\ncube(2);\n```\nend"
    assert extract_program(response) == "cube(2);\n"
    assert extract_program("```\nsphere(1);\n```") == "sphere(1);\n"
    assert extract_program("```OpenSCAD\ncube(3);\n```") == "cube(3);\n"


def test_without_a_block_the_whole_text_is_the_program() -> None:
    assert extract_program("cube(1);") == "cube(1);"
    assert extract_program("```python\nprint(1)\n```") == "```python\nprint(1)\n```"  # not OpenSCAD: no block


@pytest.mark.parametrize("program", [
    'import("/etc/passwd");',
    'import(file = "/usr/share/openscad/examples/x.stl");',
    "include </usr/share/openscad/libraries/MCAD/boxes.scad>",
    "use<MCAD/gears.scad>\ncube(1);",
    'surface(file = "/etc/hostname");',
    'linear_extrude(height = 2) import("/tmp/outline.dxf");',
    'rotate_extrude(file = "x.dxf");',
    'dxf_linear_extrude("x.dxf", height = 3);',
    'x = dxf_dim(file = "x.dxf", name = "w");',
    'import_stl("x.stl");',
    "module m() { import(str(\"/et\", \"c/passwd\")); } m();",
])  # fmt: skip
def test_every_file_reader_is_rejected(program: str) -> None:
    assert file_access(program) in FILE_READERS


def test_file_readers_inside_comments_are_allowed() -> None:
    program = "// import the base, include the holes, use the file\n/* surface(file=\"x\") */\ncube(1);"
    assert file_access(program) is None


def test_a_comment_marker_inside_a_string_does_not_hide_code() -> None:
    assert file_access('echo("http://x"); import("/etc/passwd");') == "import"
    assert file_access('echo("/*"); import("/etc/passwd"); echo("*/");') == "import"
    assert file_access('echo("a\\"//"); import("/etc/passwd");') == "import"


def test_words_inside_strings_are_rejected_too() -> None:
    # Conservative by design: a string is scanned as code, so a string the scan mis-ends cannot hide anything.
    assert file_access('echo("import");') == "import"


def test_unterminated_comments_and_strings_are_total() -> None:
    assert file_access("cube(1); /* never closed import(") is None
    assert file_access('echo("never closed import(') == "import"
    assert code_without_comments("a // b\nc") == "a  \nc"


def test_identifiers_are_whole_words() -> None:
    assert file_access("imported = 3; user = 2; profile = 1; cube([imported, user, profile]);") is None


def test_a_very_long_program_is_rejected_before_it_runs() -> None:
    assert file_access("cube(1);" * (MAX_PROGRAM_CHARS // 8 + 1)) is not None
