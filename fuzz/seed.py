#!/usr/bin/env python3
"""Writes seed inputs for every fuzz target into fuzz/seeds/<target>/, built from the
transcript corpus (tests/corpus/*.jsonl) and the API request examples in
fuzz/regressions/api_requests/. The fuzz campaign (scripts/fuzz-campaign.sh) starts from these
and the committed corpora."""

import json
import pathlib

root = pathlib.Path(__file__).resolve().parent
corpus = sorted((root.parent / "tests" / "corpus").glob("*.jsonl"))
requests = sorted((root / "regressions" / "api_requests").iterdir())
seeds = root / "seeds"
LIMIT = 4096  # the campaign's -max_len: small inputs keep executions fast


def put(target, name, data):
    d = seeds / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data)


def ops(op, data):
    """`data` as operations of at most 255 bytes each."""
    out = b""
    for i in range(0, len(data), 255):
        piece = data[i : i + 255]
        out += bytes([op, len(piece)]) + piece
    return out


def windows(path):
    """The transcript in windows of consecutive lines of at most LIMIT / 2 bytes (longer lines,
    the CLI's answer to initialize, are left out)."""
    window = []
    size = 0
    for line in path.read_bytes().splitlines(keepends=True):
        if len(line) > LIMIT // 2 or not line.strip():
            continue
        if size + len(line) > LIMIT // 2 and window:
            yield window
            window, size = [], 0
        window.append(line)
        size += len(line)
    if window:
        yield window


def frames(lines):
    for line in lines:
        entry = json.loads(line)
        if "msg" in entry:
            yield entry["dir"], json.dumps(entry["msg"], separators=(",", ":")).encode() + b"\n"


prompt = json.dumps(
    {"model": "sonnet", "max_tokens": 9, "stream": True, "messages": [{"role": "user", "content": "hi"}]},
    separators=(",", ":"),
).encode()

for path in corpus:
    for n, lines in enumerate(windows(path)):
        name = f"{path.stem}-{n:03}"
        raw = b"".join(lines)
        out = b"".join(f for d, f in frames(lines) if d == "out")
        put("replay", name, raw)
        put("encoders", name, b"\x03" + raw)
        put("session", name, b"\x1e" + out)
        driver = b"\x0f"
        for d, f in frames(lines):
            if d == "out":
                driver += ops(0, f)
                if b'"control_request"' in f:
                    driver += b"\x04\x01\x00\x05\x01\x00\x06\x01\x00"
        put("driver", name, driver + b"\x0a\x00\x0b\x01\x01")
        tape_input = b"\xfe".join(f for d, f in frames(lines) if d == "in")
        put("play", name, raw + b"\xff" + tape_input)
        put("gateway", name, b"\x05" + ops(0, prompt) + ops(3, out) + b"\x05\x01\x01" + ops(6, b"\x00"))

for i, r in enumerate(requests):
    body = r.read_bytes()
    put("api_requests", r.name, body)
    for j, other in enumerate(requests):
        put("history", f"{r.name}-{j}", bytes([i]) + body + b"\xff" + bytes([j]) + other.read_bytes())
