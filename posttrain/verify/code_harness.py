"""The trusted test harness of `code_tests` (function style); run inside the sandbox as `python3 -I -S -c <this>`.

Stdlib only, and only modules that cost nothing to import (`marshal`, `_signal`, `select`, `_ctypes`).
One run grades a batch of responses one after another (the host sends up to `code.MAX_RUN_ITEMS`):
the sandbox, this parent and the zygote start once per batch, the program of each response in a child
forked from the zygote.
Protocol on stdin: `<count>\\n`, then per response `<n>\\n` and the n bytes of its program, then the
secret part as `marshal` data (`nonce` and `items`: per response `prompt`, `setup`, `tests`,
`statements`, `is_test`, `entry_point`, `budget_s`; the host splits `check`'s body into `statements`).

Guarantees (the threat model is in docs/sandbox.md, "Code verification"):
- The parent makes itself non-dumpable and a child subreaper. Each response's program runs in a child
  forked by the zygote (`code_zygote.py`: a fresh interpreter spawned per run that never receives a
  program or a secret), with /dev/null for stdin, stdout and stderr and no descriptor but its socket to
  the parent: the program's process never held the tests, the nonce or another response's program.
- The child loads the program only when the parent has prepared the tests, and answers calls with
  results as `marshal` data, which holds only exact builtin types (a subclass is refused); the parent
  decodes them into fresh objects and accepts only plain data (`unpack`), so no object of the program's
  (a lying `__eq__`, a patched builtin) exists on its side.
- The parent runs `check`'s body statement by statement against a proxy of the entry point and writes
  one verdict line (`<nonce> <index> <status> <test,statuses> <message hex>`) on a duplicate of its
  stdout made at start (its own stdout is /dev/null). A verdict is written only by this code.
- Responses of a batch cannot reach each other: before each one starts, the guard (`code_guard.py`)
  kills every process below the parent but the zygote, removes files added under the directories the
  host names and checks that nothing changed what the parent passes on; the zygote is replaced if it
  changed, stopped or died. Only then does the parent write `<nonce> start <index>`. A change in the
  parent ends the batch with `<nonce> tampered <index of the previous response> <what, hex>`.
- A program that kills, stops or starves the parent leaves its own response started without a
  verdict (the host grades that as a failure) and the later ones not started (the host runs them again).
Not here: assembling the program, batching, or grading the verdict (`posttrain.verify.code`).
"""

from __future__ import annotations

import _signal
import builtins
import marshal
import os
import select
import sys
import time

try:  # noqa: SIM105 - on the host; in the sandbox their sources run first (`code.HARNESS_SOURCE`)
    from posttrain.verify.code_guard import Guard, kill_descendants
    from posttrain.verify.code_zygote import Zygote, read_bytes, zygote_main
except ImportError:
    pass

TYPE_CHECKING = False  # `typing` costs milliseconds to import, paid per response
if TYPE_CHECKING:
    from typing import Any

PR_GET_DUMPABLE, PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER = 3, 4, 36
MAX_FRAME_BYTES = 16 << 20
"""Largest encoded call or result; a larger result is the program's failure."""
MESSAGE_CHARS = 200


class HarnessError(Exception):
    """The harness cannot run these tests (bad gold data or a harness bug): never the program's fault."""


class CandidateError(Exception):
    """The program raised, exited, hung, or returned something that is not plain data."""


MARSHAL_VERSION = 4
_ATOMS = (type(None), bool, int, float, complex, str, bytes)
_CONTAINERS = (list, tuple, set, frozenset)
MAX_DEPTH = 200
"""Deepest nesting of a result the parent accepts."""


def pack(value: Any) -> bytes:
    """`value` as marshal data; `ValueError` unless it is built only of exact builtin types."""
    if not is_plain(value):
        raise ValueError(f"not plain data: {type(value).__name__}")
    return marshal.dumps(value, MARSHAL_VERSION)


def unpack(data: bytes) -> Any:
    """The value `pack` wrote, as fresh builtins; `ValueError` for anything else (code objects, ...)."""
    value = marshal.loads(data)
    if not is_plain(value):
        raise ValueError("not plain data")
    return value


def is_plain(value: Any, depth: int = 0) -> bool:
    """Built only of None, bool, int, float, complex, str, bytes, list, tuple, set, frozenset and dict,
    exactly (no subclasses), at most `MAX_DEPTH` deep."""
    kind = type(value)
    if kind in _ATOMS:
        return True
    if depth >= MAX_DEPTH:
        return False
    if kind in _CONTAINERS:
        return all(is_plain(item, depth + 1) for item in value)
    if kind is dict:
        return all(is_plain(k, depth + 1) and is_plain(v, depth + 1) for k, v in value.items())
    return False


def write_frame(fd: int, payload: bytes, deadline: float) -> None:
    """Length-prefixed frame; `TimeoutError` if the reader does not take it by `deadline`."""
    data = memoryview(len(payload).to_bytes(4, "big") + payload)
    while data:
        if not select.select([], [fd], [], max(0.0, deadline - time.monotonic()))[1]:
            raise TimeoutError("write timed out")
        data = data[os.write(fd, data[: 1 << 16]):]


def read_exact(fd: int, size: int, deadline: float | None) -> bytes:
    chunks, left = [], size
    while left:
        if deadline is not None and not select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
            raise TimeoutError("read timed out")
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise EOFError("pipe closed")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_frame(fd: int, deadline: float | None) -> bytes:
    size = int.from_bytes(read_exact(fd, 4, deadline), "big")
    if size > MAX_FRAME_BYTES:
        raise ValueError(f"frame of {size} bytes")
    return read_exact(fd, size, deadline)


def read_rest(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def read_line() -> bytes:
    """One short header line of stdin, byte by byte (so nothing after it is read)."""
    header = b""
    while not header.endswith(b"\n"):
        byte = os.read(0, 1)
        if not byte or len(header) > 20:
            raise HarnessError("bad header")
        header += byte
    return header


def read_program() -> bytes:
    """Exactly one program: its length line, then its bytes (nothing secret is read)."""
    return read_exact(0, int(read_line()), None)


# ---------------------------------------------------------------- child: runs the program, answers calls
def child_main(call_r: int, result_w: int) -> None:
    """The program's process (forked by the zygote with only its socket open beside /dev/null): waits
    for `("load", program)`, runs the program, then answers calls until the socket closes."""
    os.closerange(max(call_r, result_w) + 1, 1 << 16)  # nothing else should be open; make sure
    _signal.signal(_signal.SIGPIPE, _signal.SIG_DFL)
    _signal.signal(_signal.SIGINT, _signal.default_int_handler)
    try:
        _, program = marshal.loads(read_frame(call_r, None))  # sent once the parent has prepared the tests
    except BaseException:
        os._exit(0)
    namespace: dict[str, Any] = {"__name__": "solution", "__builtins__": builtins}
    try:
        exec(compile(program, "solution.py", "exec"), namespace)  # noqa: S102 - the sandboxed program
        answer: tuple[Any, ...] = ("ok",)
    except BaseException as exc:  # noqa: BLE001 - anything the program does is reported, not raised
        answer = ("raise", _name(exc), _text(exc))
    _reply(result_w, answer)
    while True:
        try:
            name, args, kwargs = marshal.loads(read_frame(call_r, None))
        except BaseException:
            os._exit(0)
        try:
            result = namespace[name](*args, **kwargs)
            answer = ("ok", result)
        except BaseException as exc:  # noqa: BLE001
            answer = ("raise", _name(exc), _text(exc))
        _reply(result_w, answer)


def _name(exc: BaseException) -> str:
    name = type(exc).__name__
    return name if type(name) is str else "Exception"


def _text(exc: BaseException) -> str:
    try:
        text = str(exc)
        return text[:MESSAGE_CHARS] if type(text) is str else ""
    except BaseException:  # noqa: BLE001 - a __str__ that raises
        return ""


def _reply(fd: int, answer: tuple[Any, ...]) -> None:
    try:
        payload = pack(answer)
    except BaseException as exc:  # noqa: BLE001 - not plain data, or nested too deep
        payload = pack(("unencodable", _name(exc), type(answer[-1]).__name__))
    try:
        write_frame(fd, payload, time.monotonic() + 3600)
    except BaseException:
        os._exit(0)


# ---------------------------------------------------------------- parent: trusted, runs the tests
class Child:
    """The program's process as seen by the parent: calls with a deadline, decoded results."""

    def __init__(self, pid: int, call_w: int, result_r: int, deadline: float) -> None:
        self.pid, self.call_w, self.result_r, self.deadline = pid, call_w, result_r, deadline
        self.gone: str | None = None

    def ask(self, frame: tuple[Any, ...]) -> tuple[Any, ...]:
        if self.gone is not None:
            raise CandidateError(self.gone)
        try:
            payload = pack(frame)
        except (ValueError, RecursionError) as exc:
            raise HarnessError(f"test arguments are not plain data: {exc}") from None
        try:
            write_frame(self.call_w, payload, self.deadline)
            answer = unpack(read_frame(self.result_r, self.deadline))
        except TimeoutError:
            self.stop("timeout")
            raise CandidateError("timeout") from None
        except (OSError, EOFError):
            self.stop("the program exited")
            raise CandidateError("the program exited") from None
        except (ValueError, TypeError, RecursionError, MemoryError):  # what unpack raises on junk
            self.stop("malformed answer")
            raise CandidateError("malformed answer") from None
        if type(answer) is not tuple or not answer or type(answer[0]) is not str:
            self.stop("malformed answer")
            raise CandidateError("malformed answer")
        return answer

    def call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        answer = self.ask((name, args, kwargs))
        if answer[0] == "ok" and len(answer) == 2:
            return answer[1]
        raise _rebuilt_exception(answer)

    def stop(self, reason: str) -> None:
        if self.gone is None:
            self.gone = reason
            try:  # noqa: SIM105 - contextlib would cost an import per response
                os.kill(self.pid, _signal.SIGKILL)
            except OSError:  # already gone
                pass


_CONTROL_FLOW = (StopIteration, StopAsyncIteration)
"""Never rebuilt: raised from the candidate inside `map`/`all`/`any` they would end the tests' iteration
early (`all(map(candidate, xs))` would pass)."""


def _rebuilt_exception(answer: tuple[Any, ...]) -> Exception:
    """A builtin exception of the name the program raised (tests may expect one), else CandidateError."""
    name = answer[1] if len(answer) > 1 and type(answer[1]) is str else ""
    text = answer[2] if len(answer) > 2 and type(answer[2]) is str else ""
    kind = getattr(builtins, name, None) if answer[0] == "raise" else None
    if isinstance(kind, type) and issubclass(kind, Exception) and not issubclass(kind, _CONTROL_FLOW):
        try:
            return kind(text[:MESSAGE_CHARS])
        except Exception:  # noqa: BLE001 - some need more arguments (UnicodeDecodeError)
            pass
    return CandidateError(f"{answer[0]}: {name}: {text}"[:MESSAGE_CHARS])


def run_tests(child: Child, secret: dict[str, Any], program: bytes) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "tests", "__builtins__": builtins}
    try:
        exec(compile(secret["prompt"], "<prompt>", "exec"), namespace)  # noqa: S102 - task data
        exec(compile(secret["setup"], "<setup>", "exec"), namespace)  # noqa: S102
        exec(compile(secret["tests"], "<tests>", "exec"), namespace)  # noqa: S102
        statements = [compile(source, "<tests>", "exec") for source in secret["statements"]]
        is_test = secret["is_test"]
    except Exception as exc:  # noqa: BLE001 - gold data the harness cannot run
        raise HarnessError(f"cannot prepare the tests: {type(exc).__name__}: {exc}") from None
    entry = secret["entry_point"]

    def candidate(*args: Any, **kwargs: Any) -> Any:
        return child.call(entry, args, kwargs)

    namespace["candidate"] = namespace[entry] = candidate  # tests may also call it by name
    try:
        loaded = child.ask(("load", program))
    except CandidateError as exc:
        loaded = ("raise", "timeout" if str(exc) == "timeout" else "exited", "")
    if loaded[0] != "ok":
        kind = loaded[1] if len(loaded) > 1 and type(loaded[1]) is str else ""
        status = {"SyntaxError": "syntax_error", "IndentationError": "syntax_error", "TabError": "syntax_error",
                  "timeout": "timeout"}.get(kind, "load_error")
        message = f"{kind}: {loaded[2] if len(loaded) > 2 else ''}"[:MESSAGE_CHARS]
        return {"status": status, "tests": ["error"] * sum(is_test), "message": message}
    results: list[str] = []
    failed_outside = ""
    for statement, counts in zip(statements, is_test, strict=True):
        if child.gone == "timeout":
            results += ["not_run"] * counts
            continue
        outcome, note = _run_statement(statement, namespace)
        if counts:
            results.append(outcome)
        elif outcome != "pass":
            failed_outside = failed_outside or f"a statement outside the asserts: {note}"[:MESSAGE_CHARS]
    status = "timeout" if child.gone == "timeout" else ("statement_failed" if failed_outside else "ok")
    return {"status": status, "tests": results, "message": failed_outside}


def _run_statement(statement: Any, namespace: dict[str, Any]) -> tuple[str, str]:
    """(`pass` | `fail` | `error` | `timeout`, what was raised) for one statement of `check`."""
    try:
        exec(statement, namespace)  # noqa: S102 - the task's tests
        return "pass", ""
    except HarnessError:
        raise
    except AssertionError:
        return "fail", "AssertionError"
    except CandidateError as exc:
        return ("timeout" if str(exc) == "timeout" else "error"), str(exc)
    except Exception as exc:  # noqa: BLE001 - the test raised on what the program returned
        return "error", f"{type(exc).__name__}: {exc}"


def prctl(option: int, arg: int) -> int:
    """libc's `prctl(option, arg, 0, 0, 0)` through `_ctypes` directly: the `ctypes` package builds its
    type hierarchy on import, about 3 ms per run here, for these calls."""
    import _ctypes

    call = getattr(_ctypes, "call_function", None)
    if call is None:  # an interpreter without the private entry point: the public one, slower
        import ctypes

        return int(ctypes.CDLL(None).prctl(option, arg, 0, 0, 0))
    function = _ctypes.dlsym(_ctypes.dlopen(None, 0), "prctl")  # type: ignore[arg-type]  # None: this program
    return int(call(function, (option, arg, 0, 0, 0)))


def undumpable() -> None:
    if prctl(PR_SET_DUMPABLE, 0) != 0:
        os._exit(1)  # the parent sees no zygote start: an infra failure


def grade(program: bytes, item: dict[str, Any], zygote: Zygote) -> dict[str, Any]:
    try:
        zygote.ensure()
        pid, fd = zygote.fork()
    except OSError:  # died since the check (a signal from the previous program still on its way): once more
        try:
            zygote.stop()
            zygote.start()
            pid, fd = zygote.fork()
        except OSError as exc:
            raise HarnessError(f"cannot start the program's process: {exc}") from None
    child = Child(pid, fd, fd, time.monotonic() + float(item["budget_s"]))
    try:
        return run_tests(child, item, program)
    finally:
        child.stop("done")
        os.close(fd)


def verdict_line(nonce: str, index: int, verdict: dict[str, Any]) -> str:
    return " ".join([nonce, str(index), verdict["status"], ",".join(verdict["tests"]) or "-",
                     verdict["message"].encode("utf-8", "replace").hex() or "-"])  # fmt: skip


def main() -> None:
    if sys.argv[1:] == ["zygote"]:
        zygote_main(3, child_main, undumpable)
    if prctl(PR_SET_DUMPABLE, 0) != 0 or prctl(PR_GET_DUMPABLE, 0) != 0 or prctl(PR_SET_CHILD_SUBREAPER, 1) != 0:
        sys.exit("harness: cannot make itself non-dumpable and a subreaper")
    _signal.signal(_signal.SIGPIPE, _signal.SIG_IGN)
    # SIGINT would raise KeyboardInterrupt inside a test statement; every other signal a program may
    # send kills the parent (its response has no verdict: a model failure; the rest are run again).
    _signal.signal(_signal.SIGINT, _signal.SIG_IGN)
    verdict_fd = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    programs = [read_program() for _ in range(int(read_line()))]
    os.dup2(devnull, 1)  # a test's own prints must not mix with the verdicts
    secret = marshal.loads(read_rest(0))
    nonce, items = secret["nonce"], secret["items"]
    own = [os.fsdecode(arg) for arg in read_bytes("/proc/self/cmdline").split(b"\0")[1:-1]]  # -I -S -c <loader>
    zygote = Zygote([sys.executable or "/usr/bin/python3", *own, "zygote"], devnull)
    guard = Guard(secret["clean"])

    def say(line: str) -> None:
        os.write(verdict_fd, (line + "\n").encode())

    for index, (program, item) in enumerate(zip(programs, items, strict=True)):
        problem = guard.problem(keep=zygote.pid)
        if problem:
            say(f"{nonce} tampered {index - 1} {problem.encode().hex()}")
            break
        say(f"{nonce} start {index}")
        try:
            verdict = grade(program, item, zygote)
        except Exception as exc:  # noqa: BLE001 - HarnessError, or a bug here: never the program's doing
            verdict = {"status": "harness_error", "tests": [], "message": f"{type(exc).__name__}: {exc}"[:500]}
        say(verdict_line(nonce, index, verdict))
    zygote.stop()
    kill_descendants(guard.me)
    os._exit(0)


if __name__ == "__main__":
    main()
