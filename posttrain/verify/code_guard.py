"""The part of `code_tests`'s harness that keeps the responses of one sandbox run apart (stdlib only).

The harness (`code_harness.py`) grades a batch of responses one after another in one run. Before each,
`Guard.problem()` brings the sandbox back to the state the run started in, or says why it cannot:
every process below the harness parent but the zygote is killed and reaped (the parent is a child
subreaper, so whatever a program leaves running, detached or not, is below it); entries added since the start under
the directories the host names are removed (links are removed, never followed; directories a program
made unreadable are opened up first), and entries there at the start must be unchanged; and what a
child inherits from the parent that another process of the same user can change (rlimits through
`prlimit`, nice, scheduling policy, CPU affinity, OOM score, autogroup) must be as it was.

Runs in the sandbox as part of the harness's source (the host puts it after the zygote's and in front
of the harness's), so it imports only modules that cost nothing. Not here: the test protocol (`code_harness.py`), what the
host does with a `tampered` line (`posttrain.verify.code`). Not covered: I/O priority (`ioprio_set` on
the parent), which Python cannot read without a syscall number per architecture; the parent only
reads the standard library, from the page cache.
"""

from __future__ import annotations

import _signal
import os
import select

try:  # noqa: SIM105 - on the host; in the sandbox the zygote's source runs first (`code.HARNESS_SOURCE`)
    from posttrain.verify.code_zygote import proc_attributes
except ImportError:
    pass

KILL_ROUNDS = 500
"""Rounds of kill-and-reap (about a millisecond each) before the sandbox counts as not clean."""


def _stat_fields(pid: str) -> list[bytes]:
    with open(f"/proc/{pid}/stat", "rb") as file:
        return file.read().rpartition(b")")[2].split()  # state, ppid, ... (the name may hold spaces)


def descendants(me: int, keep: int = 0) -> list[int]:
    """Every process below this one (orphans of the program's processes come back here: subreaper),
    except `keep` (the zygote; its children are included)."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:  # noqa: SIM105 - contextlib would cost an import per run
                children.setdefault(int(_stat_fields(name)[1]), []).append(int(name))
            except (OSError, IndexError, ValueError):  # exited meanwhile
                pass
    return [pid for pid in _walk(children, me) if pid != keep]


def _walk(children: dict[int, list[int]], root: int) -> list[int]:
    found, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return found


def reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def kill_descendants(me: int, keep: int = 0) -> bool:
    """SIGKILL to every descendant but `keep` until none is left; False if some survive `KILL_ROUNDS` rounds."""
    for _ in range(KILL_ROUNDS):
        if keep:  # a stopped zygote could not reap the children killed here
            try:  # noqa: SIM105 - contextlib would cost an import per run
                os.kill(keep, _signal.SIGCONT)
            except OSError:
                pass
        reap()
        left = descendants(me, keep)
        if not left:
            return True
        for pid in left:
            try:  # noqa: SIM105 - contextlib would cost an import per run
                os.kill(pid, _signal.SIGKILL)
            except OSError:
                pass
        select.select([], [], [], 0.001)
    return False


def _entries(directory: str) -> dict[str, tuple[int, int, int]]:
    with os.scandir(directory) as it:
        return {e.name: (e.inode(), e.stat(follow_symlinks=False).st_mtime_ns, e.stat(follow_symlinks=False).st_size)
                for e in it}  # fmt: skip


def remove_tree(path: str) -> None:
    """`path` and everything below it, links never followed (a directory made unreadable is opened up first)."""
    if os.path.isdir(path) and not os.path.islink(path):
        os.chmod(path, 0o700)
        for name in os.listdir(path):
            remove_tree(os.path.join(path, name))
        os.rmdir(path)
    else:
        os.unlink(path)


class Guard:
    """The state at start that every response must find again: no other process, the same files in the
    writable directories the host names, the same inherited attributes."""

    def __init__(self, directories: list[str]) -> None:
        self.me = os.getpid()
        self.files = {d: _entries(d) for d in map(os.path.abspath, directories) if os.access(d, os.W_OK)}
        self.attributes = proc_attributes("self")

    def problem(self, keep: int = 0) -> str:
        """The empty string when the state is back to the start (new files are removed), else what is not."""
        if not kill_descendants(self.me, keep):
            return "processes survive SIGKILL"
        for directory, before in self.files.items():
            try:
                now = _entries(directory)
                for name in now.keys() - before.keys():
                    remove_tree(os.path.join(directory, name))
            except OSError as exc:
                return f"cannot clean {directory}: {exc}"
            if any(now.get(name) != entry for name, entry in before.items()):
                return f"a file present at start changed in {directory}"
        if proc_attributes("self") != self.attributes:
            return "an attribute children inherit from the harness changed"
        return ""
