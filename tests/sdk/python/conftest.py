"""The rig for the SDK end-to-end tests: the scripted fake Messages API, `ccwire serve` in front
of the real Claude Code CLI, and helpers to see the CLI processes the gateway runs.

One fake and one gateway serve each test module (the CLI's start-up is the expensive part); every
test starts conversations of its own, marked with text no other test uses, so they never share a
CLI session. `Rig.restart()` restarts the gateway with the same fake and HOME. When a module's rig
stops, every process its gateways ever ran (watched through /proc) must be gone within 5 s.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]

CCWIRE_BIN = os.environ.get("CCWIRE_BIN") or str(REPO / "target/debug/ccwire")
FAKE_BIN = os.environ.get("FAKE_ANTHROPIC_BIN") or str(REPO / "target/debug/fake-anthropic")
CLAUDE = os.environ.get("CCWIRE_CLAUDE") or str(REPO / "tests/.cli/node_modules/.bin/claude")

API_KEY = "sdk-test-key"
# A second tenant.
OTHER_API_KEY = "sdk-test-key-2"
HELD_CALL_TIMEOUT_S = 3
# Each SDK request's time limit (no request here should take more than a few seconds).
CLIENT_TIMEOUT_S = 30
# What the gateway tells the model when a held call passes its deadline (core/src/gateway.rs).
HELD_CALL_TIMEOUT_TEXT = (
    "The client did not return a result for this tool call in time; the call was abandoned."
)
ANTHROPIC_MODEL = "claude-sonnet-4-5-20250929"
OPENAI_MODEL = "gpt-4o"


def _two_lookups() -> dict:
    return {
        "kind": "tool_use",
        "text": "Looking both up.",
        "calls": [
            {"name": "mcp__client__lookup", "input": {"query": "alpha"}},
            {"name": "mcp__client__lookup", "input": {"query": "beta"}},
        ],
    }


# First match wins. `echo` answers "You said: " + the last user message (tool results included),
# which lets a test read back what the model was given.
SCRIPT = {
    "rules": [
        {"when": {"kind": "probe"}, "reply": {"kind": "text", "text": "ok"}},
        {"when": {"kind": "tool_result"}, "reply": {"kind": "echo"}},
        # A rebuilt conversation reaches the model as one user message that retells the earlier
        # turns (prompts and tool results included): answer it, do not match the old prompt.
        {"when": {"kind": "last_user_contains", "text": "record-"}, "reply": {"kind": "echo"}},
        # The CLI merges an interrupted prompt with the next one: the newest marker first.
        {"when": {"kind": "last_user_contains", "text": "PLEASE-AFTER"}, "reply": {"kind": "echo"}},
        {
            "when": {"kind": "last_user_contains", "text": "PLEASE-SLOW"},
            "reply": {"kind": "text", "text": "slow " * 100},
            "event_delay_ms": 250,
        },
        {"when": {"kind": "last_user_contains", "text": "PLEASE-TWO"}, "reply": _two_lookups()},
        # A tool of the URL MCP server `docs` (test_managed_agents.py runs it).
        {
            "when": {"kind": "last_user_contains", "text": "PLEASE-MCP"},
            "reply": {
                "kind": "tool_use",
                "calls": [{"name": "mcp__docs__search", "input": {"q": "ccwire"}}],
            },
        },
        # The CLI's own Bash tool (for a gateway that enables it): where it runs, and a mark.
        {
            "when": {"kind": "last_user_contains", "text": "PLEASE-BASH"},
            "reply": {
                "kind": "tool_use",
                "calls": [
                    {
                        "name": "Bash",
                        "input": {"command": "echo bash-ran in $(pwd)", "description": "Says where"},
                    }
                ],
            },
        },
        {
            "when": {"kind": "last_user_contains", "text": "PLEASE-LOOKUP"},
            "reply": {
                "kind": "tool_use",
                "calls": [{"name": "mcp__client__lookup", "input": {"query": "alpha"}}],
            },
        },
        {"when": {"kind": "any"}, "reply": {"kind": "echo"}},
    ]
}

LOOKUP_TOOL_ANTHROPIC = {
    "name": "lookup",
    "description": "Looks a record up.",
    "input_schema": {
        "type": "object",
        "properties": {"query": {"type": "string"}},
        "required": ["query"],
    },
}

LOOKUP_TOOL_OPENAI = {
    "type": "function",
    "function": {
        "name": "lookup",
        "description": "Looks a record up.",
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string"}},
            "required": ["query"],
        },
    },
}


def record_for(query: str) -> str:
    """What the client's `lookup` tool returns."""
    return f"record-{query}"


# ---------------------------------------------------------------------------------------------
# Processes


def _stat(pid: int) -> tuple[int, str, int] | None:
    """(ppid, state, start time) of a process, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[1]), fields[0], int(fields[19])


def _all_stats() -> dict[int, tuple[int, str, int]]:
    stats = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _stat(int(entry))
            if stat is not None:
                stats[int(entry)] = stat
    return stats


def _is_watchdog(pid: int) -> bool:
    """Whether the process is the watchdog `ccwire serve` starts (`ccwire watchdog …`)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = f.read().split(b"\0")
    except OSError:
        return False
    return len(args) > 1 and args[1] == b"watchdog"


def alive(proc: tuple[int, int]) -> bool:
    """Whether the process (pid, start time) still runs; a zombie does not count."""
    stat = _stat(proc[0])
    return stat is not None and stat[2] == proc[1] and stat[1] != "Z"


def _ended(what: str, proc: subprocess.Popen) -> str | None:
    code = proc.poll()
    if code is None:
        return None
    if code < 0:
        return (
            f"{what} (pid {proc.pid}) was killed by signal {-code} during the run; "
            "this test run only signals it at the end, so something else on the machine did"
        )
    return f"{what} (pid {proc.pid}) exited with status {code} during the run"


class Fake:
    """The scripted fake Anthropic Messages API the CLI talks to."""

    def __init__(self, log_dir: Path):
        self.log = open(log_dir / "fake.log", "wb")
        self.proc = subprocess.Popen(
            [FAKE_BIN, "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=self.log,
            stdin=subprocess.DEVNULL,
        )
        line = self.proc.stdout.readline().decode().strip()
        if not line.startswith("http://"):
            self.proc.kill()
            raise RuntimeError(f"fake-anthropic did not start: {line!r}")
        self.url = line

    def died(self) -> str | None:
        """How the fake ended, if it did."""
        return _ended("fake-anthropic", self.proc)

    def _request(self, method: str, path: str, body: object | None = None):
        if self.died():
            raise AssertionError(self.died())
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("content-type", "application/json")
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()

    def set_script(self, script: dict) -> None:
        status, body = self._request("PUT", "/_fake/script", script)
        assert status == 204, body

    def calls(self) -> list[dict]:
        """Every model call so far: [{"body", "last_user_text"}] (probes excluded)."""
        return json.loads(self._request("GET", "/_fake/calls")[1])

    def calls_with(self, marker: str) -> list[dict]:
        """The model calls of the conversation whose text contains `marker`."""
        return [c for c in self.calls() if marker in json.dumps(c["body"]["messages"])]

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()
        self.log.close()


class Gateway:
    """One `ccwire serve` process."""

    def __init__(self, home: Path, fake: Fake, generation: int, extra_args: list[str]):
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("ANTHROPIC_", "CLAUDE", "OTEL_"))
        }
        env.update(
            {
                "HOME": str(home),
                "TMPDIR": str(home / "tmp"),
                "CLAUDE_CODE_TMPDIR": str(home / "tmp"),
                "ANTHROPIC_BASE_URL": fake.url,
                "ANTHROPIC_API_KEY": "dummy",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                "DISABLE_TELEMETRY": "1",
                "DISABLE_AUTOUPDATER": "1",
                "CLAUDE_CODE_SDK_READS_SESSION_STATE": "1",
            }
        )
        self.log_path = home / f"serve-{generation}.log"
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [
                CCWIRE_BIN,
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--api-key",
                API_KEY,
                "--api-key",
                OTHER_API_KEY,
                "--held-call-timeout",
                str(HELD_CALL_TIMEOUT_S),
                "--claude",
                CLAUDE,
                "--cwd",
                str(home / "work"),
                *extra_args,
            ],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self.log,
        )
        prefix = "ccwire serve: listening on "
        deadline = time.monotonic() + 20
        self.url = None
        while self.url is None:
            for line in self.log_path.read_text(errors="replace").splitlines():
                if line.startswith(prefix):
                    self.url = line[len(prefix):].strip()
            if self.url is None:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.proc.kill()
                    raise RuntimeError(f"ccwire serve did not start:\n{self.log_tail()}")
                time.sleep(0.05)
        # Every process the gateway ever ran, as (pid, start time): watched for leaks.
        self.seen: set[tuple[int, int]] = set()
        self._stop_watch = threading.Event()
        self._watcher = threading.Thread(target=self._watch, daemon=True)
        self._watcher.start()

    def died(self) -> str | None:
        """How the gateway ended, if it did."""
        return _ended("ccwire serve", self.proc)

    def log_tail(self, lines: int = 40) -> str:
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def _descendants(self) -> set[tuple[int, int]]:
        stats = _all_stats()
        found, frontier = set(), {self.proc.pid}
        while frontier:
            children = {p for p, s in stats.items() if s[0] in frontier and s[1] != "Z"}
            children -= {p for p, _ in found}
            found |= {(p, stats[p][2]) for p in children}
            frontier = children
        return found

    def _watch(self) -> None:
        while not self._stop_watch.is_set():
            self.seen |= self._descendants()
            self._stop_watch.wait(0.2)

    def cli_pids(self) -> set[int]:
        """The live CLI processes: the gateway's direct children, but its watchdog."""
        stats = _all_stats()
        pids = {
            p
            for p, s in stats.items()
            if s[0] == self.proc.pid and s[1] != "Z" and not _is_watchdog(p)
        }
        self.seen |= {(p, stats[p][2]) for p in pids}
        return pids

    def stop(self) -> list[tuple[int, int]]:
        """SIGTERM, then wait for every process it ran to be gone; returns those that are not."""
        self.seen |= self._descendants()
        self._stop_watch.set()
        self._watcher.join()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"ccwire serve ignored SIGTERM:\n{self.log_tail()}")
        finally:
            self.log.close()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            left = [p for p in self.seen if alive(p)]
            if not left:
                return []
            time.sleep(0.1)
        left = [p for p in self.seen if alive(p)]
        for pid, _ in left:  # do not let a leak outlive the test run
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        return left


class Rig:
    def __init__(self, extra_args: list[str] | None = None):
        self.extra_args = list(extra_args or [])
        self.home = Path(tempfile.mkdtemp(prefix="ccwire-sdk-py-"))
        (self.home / "tmp").mkdir()
        (self.home / "work").mkdir()
        self.fake = Fake(self.home)
        self.generation = 0
        try:
            self.fake.set_script(SCRIPT)
            self.gateway = Gateway(self.home, self.fake, self.generation, self.extra_args)
        except BaseException:
            self.fake.stop()
            raise

    @property
    def url(self) -> str:
        return self.gateway.url

    def restart(self) -> set[int]:
        """Restarts the gateway (same fake, same HOME) once every process the old one ran is
        gone; returns their pids."""
        old = self.gateway
        old_pids = {p for p, _ in old.seen} | old.cli_pids()
        left = old.stop()
        assert not left, f"processes outlived the gateway: {left}\n{old.log_tail()}"
        self.generation += 1
        self.gateway = Gateway(self.home, self.fake, self.generation, self.extra_args)
        return old_pids

    def close(self) -> list[tuple[int, int]]:
        """Stops the gateway and the fake; returns the processes that outlived the gateway."""
        try:
            left = self.gateway.stop()
        finally:
            self.fake.stop()
        if not left and not os.environ.get("CCWIRE_SDK_KEEP_HOME"):
            shutil.rmtree(self.home, ignore_errors=True)
        return left


def rig_with(*extra_args: str):
    """A module's rig whose gateway gets `extra_args` (`yield from` it in a fixture)."""
    for path in (CCWIRE_BIN, FAKE_BIN, CLAUDE):
        if not os.access(path, os.X_OK):
            pytest.exit(
                f"missing executable {path} "
                "(cargo build -p ccwire-host -p ccwire-tests --bins; scripts/setup.sh)",
                2,
            )
    rig = Rig(list(extra_args))
    yield rig
    left = rig.close()
    assert not left, f"processes outlived the gateway: {left} (logs in {rig.home})"


@pytest.fixture(scope="module")
def rig():
    yield from rig_with()


@pytest.fixture(autouse=True)
def _rig_alive(request):
    """Fails a test at once when the fake or the gateway is gone (instead of every request
    waiting for its timeout), and names what happened."""
    if "rig" not in request.fixturenames:
        yield
        return
    rig = request.getfixturevalue("rig")

    def check():
        problem = rig.fake.died() or rig.gateway.died()
        if problem:
            pytest.fail(f"{problem}\n--- gateway log ---\n{rig.gateway.log_tail()}", pytrace=False)

    check()
    yield
    check()


def _interrupt(signum, frame):
    # A SIGTERM (run.sh's time limit, CI) ends the run like Ctrl-C: fixtures are torn down, so the
    # gateway and its CLI processes are stopped rather than left behind.
    raise KeyboardInterrupt(f"signal {signum}")


signal.signal(signal.SIGTERM, _interrupt)


def wait_for(predicate, timeout: float, what: str, interval: float = 0.1):
    """Polls `predicate` until it returns something truthy; fails with `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(interval)
