"""A training job's checkpoint loop, to be SIGKILLed at random moments (the kill-loop tests).

    python kill_child.py DIRECTORY ASYNC KEEP_LAST SIZE

It restores the newest complete checkpoint, checks it, then saves forever: first the restored step
again (what a resumed job does when it is preempted at once), then alternately a new step and a
re-save of it. Every payload file starts with the tag ``<save number>:<step>:`` and is SIZE bytes;
it prints ``begin N STEP`` before a save and ``done N STEP`` once it is durable. Only
``trainguard.runtime`` is imported (no torch): it starts fast.
"""

from __future__ import annotations

import sys

from trainguard.runtime.checkpoint import CheckpointManager, RetentionPolicy, Stream


def tag(data: bytes) -> tuple[int, int]:
    head = data[:32].split(b":")
    return int(head[0]), int(head[1])


def payload(number: int, step: int, size: int) -> dict:
    head = f"{number}:{step}:".encode().ljust(32, b".")
    body = head + bytes((number + i) % 251 for i in range(256)) * (size // 256)
    return {
        "a": body,
        "b": lambda: body,
        "c": Stream(lambda handle: [handle.write(body[i : i + 65536]) for i in range(0, len(body), 65536)]),
    }


def main(directory: str, async_save: str, keep_last: str, size: str) -> None:
    mgr = CheckpointManager(
        directory, async_save=async_save == "1", retention=RetentionPolicy(keep_last=int(keep_last))
    )
    latest = mgr.restore_latest()
    number, step = (0, 0)
    if latest is not None:
        number, step = tag(latest.read("a"))
        assert all(latest.read(n) == latest.read("a") for n in ("b", "c")), "mixed files"
    print(f"ready {number} {step}", flush=True)
    resave = latest is not None
    while True:
        if not resave:
            step += 1
        number += 1
        print(f"begin {number} {step}", flush=True)
        mgr.save(step, payload(number, step, int(size)), {"number": number})
        mgr.wait()
        print(f"done {number} {step}", flush=True)
        resave = not resave


if __name__ == "__main__":
    main(*sys.argv[1:5])
