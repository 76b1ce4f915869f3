"""The OpenSCAD program in a response, and the static check that keeps it off the host's files.

`extract_program` takes the response's last ```openscad / ```scad (or bare ```) block, else the whole
text. `file_access` scans the program the way OpenSCAD's lexer reads it (comments dropped, strings kept)
and names the first construct that reads a file: `import`, `include <...>`, `use <...>`, `surface`, the
deprecated `import_*` / `dxf_*` modules, or the identifier `file` (the `file=` argument of
`linear_extrude` and `rotate_extrude`). The check is deliberately conservative: such a word anywhere
outside a comment, inside a string included, rejects the program, so a harmless `echo("import")` is
rejected too. A rejected program is a model failure.

Guarantees: total on any text (no exception, linear time); a construct cannot hide from the scan in a
region the scan takes for a comment while OpenSCAD takes it for code, because strings follow OpenSCAD's
escape rule (a backslash escapes the next character) and are scanned as code. Not here: the sandbox
that confines whatever gets past this check (`posttrain.verify.cad`; docs/cad.md).
"""

from __future__ import annotations

import re

_FENCE = re.compile(r"```[ \t]*(?:openscad|scad)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)
_IDENTIFIER = re.compile(r"\$?[A-Za-z_][A-Za-z0-9_]*")
FILE_READERS: frozenset[str] = frozenset({
    "import", "include", "use", "surface", "file", "import_stl", "import_off", "import_dxf",
    "dxf_dim", "dxf_cross", "dxf_linear_extrude", "dxf_rotate_extrude",
})  # fmt: skip
"""Identifiers that make OpenSCAD read a file (or name one): never allowed in a graded program."""
MAX_PROGRAM_CHARS = 200_000
"""Longer programs are rejected before they reach the sandbox."""


def extract_program(response: str) -> str:
    """The last ```openscad, ```scad or bare ``` block of the response, else the whole text."""
    blocks = _FENCE.findall(response)
    return blocks[-1] if blocks else response


def code_without_comments(program: str) -> str:
    """`program` with its `//` and `/* */` comments replaced by spaces; strings (and what OpenSCAD would
    read as code) kept. An unterminated block comment runs to the end, as in OpenSCAD."""
    out: list[str] = []
    i, n = 0, len(program)
    while i < n:
        ch = program[i]
        if ch == '"':
            end = _string_end(program, i + 1)
            out.append(program[i:end])
            i = end
        elif program.startswith("//", i):
            end = program.find("\n", i)
            i = n if end < 0 else end
            out.append(" ")
        elif program.startswith("/*", i):
            end = program.find("*/", i + 2)
            i = n if end < 0 else end + 2
            out.append(" ")
        else:
            nxt = _next_special(program, i)
            out.append(program[i:nxt])
            i = nxt
    return "".join(out)


def _string_end(program: str, i: int) -> int:
    """The index just past the string whose body starts at `i` (the end of the text when unterminated)."""
    n = len(program)
    while i < n:
        ch = program[i]
        if ch == "\\":
            i += 2
        elif ch == '"':
            return i + 1
        else:
            i += 1
    return n


def _next_special(program: str, i: int) -> int:
    """The index of the next `"` or `/` at or after `i + 1` (or the end), so plain code is copied in runs."""
    j = i + 1
    positions = [p for p in (program.find('"', j), program.find("/", j)) if p >= 0]
    return min(positions) if positions else len(program)


def file_access(program: str) -> str | None:
    """The first file-reading identifier in the program's code and strings, or None when there is none
    (also the reason for a program longer than `MAX_PROGRAM_CHARS`)."""
    if len(program) > MAX_PROGRAM_CHARS:
        return f"program longer than {MAX_PROGRAM_CHARS} characters"
    for match in _IDENTIFIER.finditer(code_without_comments(program)):
        if match.group(0) in FILE_READERS:
            return match.group(0)
    return None
