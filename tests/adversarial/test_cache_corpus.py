"""The corpus of damaged, hostile and unusable cache files (issue 14, section 4).

Each input is a cache file at the engine's ``cache_path``: a real file filled by a real engine,
then damaged (bytes flipped in random pages, truncated, rows swapped or edited, wrong types,
huge rows), or something else altogether (garbage, another program's database, a directory, a
read-only file, a file locked by another process). For each, calls through a real engine must
return exactly what the tool returns uncached, never another call's data, and give at most one
warning per problem kind. ``record("cache files", n)`` counts the inputs.
"""

from __future__ import annotations

import functools
import json
import os
import random
import re
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import trio
from _cache_support import answer, call_all, checkpoint, key_of, setup
from _corpus import record

import toolflow
from toolflow._cache import _checksum

STORED = range(60)  # the results in the intact file
ASKED = (*STORED, 60, 61)  # what each input is asked: every stored result and two that never were


async def _intact(tmp_path: Path) -> tuple[toolflow.Registry, toolflow.Plugins, bytes]:
    """The registry and plugins of ``look``, and the bytes of a cache file holding its results for STORED."""
    registry, plugins, _ = setup(tmp_path)
    path = tmp_path / "intact.sqlite3"
    await call_all(registry, plugins, path, STORED)
    checkpoint(path)
    return registry, plugins, path.read_bytes()


_KIND = re.compile(r"cache '[^']*' is (?P<kind>[a-z -]+?) \(")


def _kinds(messages: list[str]) -> list[str]:
    kinds = []
    for message in messages:
        match = _KIND.match(message)
        assert match is not None, message
        kinds.append(match["kind"])
    return kinds


async def _check(
    registry: toolflow.Registry,
    plugins: toolflow.Plugins,
    path: Path,
    *,
    passes: int = 1,
    asked: tuple[int, ...] = ASKED,
    cache_timeout: float = 2.0,
) -> list[str]:
    """Call *asked* through *passes* engines on *path*: every answer must be the tool's own; return the warnings' kinds.

    The store's *cache_timeout* is generous by default: these cases are about what a bad file
    does, and on a loaded machine an operation on one took longer than the default 50 ms (a
    ``busy`` warning beside the case's own).
    """
    kinds: list[str] = []
    for _ in range(passes):
        results, caught = await call_all(registry, plugins, path, asked, cache_timeout=cache_timeout)
        wrong = [(n, r.data) for n, r in zip(asked, results, strict=True) if not r.success or r.data != answer(n)]
        assert wrong == [], f"{path.name}: wrong answers {wrong[:3]}"
        kinds += _kinds(caught)
    assert len(kinds) == len(set(kinds)), f"{path.name}: {kinds}"
    return kinds


def _place(tmp_path: Path, name: str, content: bytes) -> Path:
    path = tmp_path / "inputs" / name
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(content)
    return path


def _sql(path: Path, *statements: tuple[str, tuple[object, ...]]) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        for sql, params in statements:
            conn.execute(sql, params)
    finally:
        conn.close()


# --------------------------------------------------------------------------- bytes


async def test_flipped_bytes_in_random_pages(tmp_path: Path) -> None:
    """Bits flipped in one to three random pages (the header page too), read twice: a store into a damaged tree stays safe."""
    registry, plugins, content = await _intact(tmp_path)
    pages = len(content) // 4096
    rng = random.Random(14)
    inputs = 40
    for index in range(inputs):
        data = bytearray(content)
        for page in rng.sample(range(pages), rng.randint(1, min(3, pages))):
            for _ in range(rng.randint(1, 24)):
                data[page * 4096 + rng.randrange(4096)] ^= 1 << rng.randrange(8)
        path = _place(tmp_path, f"flipped-{index}.sqlite3", bytes(data))
        await _check(registry, plugins, path, passes=2)
    record("cache files", inputs)


async def test_truncated_files(tmp_path: Path) -> None:
    """The intact file cut short anywhere: inside the header, at and around page boundaries, near the end."""
    registry, plugins, content = await _intact(tmp_path)
    rng = random.Random(4)
    lengths = {0, 1, 15, 16, 99, 100, 101, 512, 4095, 4096, 4097, 8192, len(content) // 2, len(content) - 1}
    lengths |= {rng.randrange(len(content)) for _ in range(10)}
    for length in sorted(lengths):
        await _check(registry, plugins, _place(tmp_path, f"cut-{length}.sqlite3", content[:length]))
    record("cache files", len(lengths))


async def test_garbage(tmp_path: Path) -> None:
    """Files that were never a database, or only look like one at the start."""
    registry, plugins, content = await _intact(tmp_path)
    rng = random.Random(7)
    inputs = {
        "random-1": rng.randbytes(1),
        "random-100": rng.randbytes(100),
        "random-4096": rng.randbytes(4096),
        "random-20000": rng.randbytes(20000),
        "zeros": bytes(16384),
        "ones": b"\xff" * 16384,
        "text": b"this is not a cache\n" * 500,
        "json": json.dumps({"look": [answer(n) for n in STORED]}).encode(),
        "header-then-garbage": content[:100] + rng.randbytes(len(content) - 100),
        "header-only": content[:4096],
        "pages-shuffled": b"".join(
            rng.sample([content[i : i + 4096] for i in range(4096, len(content), 4096)], len(content) // 4096 - 1)
        ).join([content[:4096], b""]),
        "pages-doubled": content[:4096] + content[4096:] * 2,
    }
    for name, data in inputs.items():
        await _check(registry, plugins, _place(tmp_path, f"{name}.sqlite3", data))
    record("cache files", len(inputs))


# --------------------------------------------------------------------------- schemas


def _foreign_schemas() -> dict[str, list[tuple[str, tuple[object, ...]]]]:
    old_table = (
        "CREATE TABLE toolflow_cache (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL, expires_at REAL, "
        "stored_at REAL NOT NULL) WITHOUT ROWID"
    )
    ours: list[tuple[str, tuple[object, ...]]] = [
        (f"PRAGMA application_id = {0x74666C77}", ()),
        ("PRAGMA user_version = 1", ()),
    ]
    return {
        "another-program": [
            ("CREATE TABLE users (name TEXT, password TEXT)", ()),
            ("INSERT INTO users VALUES ('a', 'b')", ()),
        ],
        "other-application-id": [("PRAGMA application_id = 42", ())],
        "only-a-version": [("PRAGMA user_version = 1", ())],
        "newer-format": [*ours[:1], ("PRAGMA user_version = 2", ())],
        "older-toolflow-table": [(old_table, ())],
        "our-id-other-columns": [*ours, ("CREATE TABLE toolflow_cache (key TEXT, value TEXT)", ())],
        "our-id-no-table": ours,
        "our-id-a-view": [*ours, ("CREATE VIEW toolflow_cache AS SELECT 1 AS key", ())],
    }


async def test_foreign_databases(tmp_path: Path) -> None:
    """SQLite files that are not toolflow cache files: each is left exactly as it was, and every call runs."""
    registry, plugins, _ = await _intact(tmp_path)
    schemas = _foreign_schemas()
    for name, statements in schemas.items():
        path = tmp_path / "inputs" / f"{name}.sqlite3"
        path.parent.mkdir(exist_ok=True)
        _sql(path, *statements)
        before = path.read_bytes()
        assert await _check(registry, plugins, path) in (["not a toolflow cache"], ["corrupt"])
        assert path.read_bytes() == before, name
    record("cache files", len(schemas))


async def test_a_trigger_that_rewrites_stored_results(tmp_path: Path) -> None:
    """A trigger added to a real cache file swaps every stored value for another call's: what it stores never verifies."""
    registry, plugins, content = await _intact(tmp_path)
    path = _place(tmp_path, "trigger.sqlite3", content)
    trigger = (
        "CREATE TRIGGER swap AFTER INSERT ON toolflow_cache BEGIN "
        'UPDATE toolflow_cache SET value = CAST(\'{"success":true,"data":{"n":0}}\' AS BLOB) '
        "WHERE key = new.key; END"
    )
    _sql(path, ("DELETE FROM toolflow_cache", ()), (trigger, ()))
    await _check(registry, plugins, path, passes=2)
    record("cache files", 1)


# --------------------------------------------------------------------------- rows


def _row_edits(registry: toolflow.Registry) -> dict[str, list[tuple[str, tuple[object, ...]]]]:
    def key(n: int) -> bytes:
        return key_of(registry, n)

    def value_of(n: int) -> str:
        return f"(SELECT value FROM toolflow_cache WHERE key = x'{key(n).hex()}')"

    def column_of(column: str, n: int) -> str:
        return f"(SELECT {column} FROM toolflow_cache WHERE key = x'{key(n).hex()}')"

    swap = "UPDATE toolflow_cache SET value = {v}, checksum = {c} WHERE key = ?"
    edits: dict[str, list[tuple[str, tuple[object, ...]]]] = {}
    for a, b in [(1, 2), (10, 11), (0, 59), (30, 31)]:
        edits[f"swap-value-{a}-{b}"] = [(f"UPDATE toolflow_cache SET value = {value_of(b)} WHERE key = ?", (key(a),))]
        edits[f"swap-row-{a}-{b}"] = [
            (swap.format(v=value_of(b), c=column_of("checksum", b)), (key(a),)),
        ]
    edits["swap-keys"] = [
        ("UPDATE toolflow_cache SET key = x'00' WHERE key = ?", (key(3),)),
        ("UPDATE toolflow_cache SET key = ? WHERE key = ?", (key(3), key(4))),
        ("UPDATE toolflow_cache SET key = ? WHERE key = x'00'", (key(4),)),
    ]
    rotate = (
        "UPDATE toolflow_cache SET value = (SELECT v.value FROM v WHERE v.key > toolflow_cache.key ORDER BY v.key "
        "LIMIT 1), checksum = (SELECT v.checksum FROM v WHERE v.key > toolflow_cache.key ORDER BY v.key LIMIT 1) "
        "WHERE key < (SELECT max(key) FROM v)"
    )
    edits["rotate-all-values"] = [
        ("CREATE TEMP TABLE v AS SELECT key, value, checksum FROM toolflow_cache", ()),
        (rotate, ()),
    ]
    other = json.dumps({"success": True, "data": answer(8)}).encode()
    edits |= {
        "value-of-another-call": [("UPDATE toolflow_cache SET value = ? WHERE key = ?", (other, key(7)))],
        "value-a-failure": [
            (
                'UPDATE toolflow_cache SET value = CAST(\'{"success":false,"error":"x"}\' AS BLOB) WHERE key = ?',
                (key(5),),
            )
        ],
        "value-truncated": [("UPDATE toolflow_cache SET value = substr(value, 1, 20) WHERE key = ?", (key(6),))],
        "value-appended": [("UPDATE toolflow_cache SET value = value || x'20' WHERE key = ?", (key(9),))],
        "value-empty": [("UPDATE toolflow_cache SET value = x'' WHERE key = ?", (key(12),))],
        "value-not-utf8": [("UPDATE toolflow_cache SET value = x'ff00fe' WHERE key = ?", (key(13),))],
        "checksum-of-another-row": [
            (f"UPDATE toolflow_cache SET checksum = {column_of('checksum', 15)} WHERE key = ?", (key(14),))
        ],
        "checksum-zeroed": [("UPDATE toolflow_cache SET checksum = zeroblob(16)", ())],
        "expiry-extended": [("UPDATE toolflow_cache SET expires_at = 1e300 WHERE key = ?", (key(16),))],
        "expiry-in-the-past": [("UPDATE toolflow_cache SET expires_at = 1 WHERE key = ?", (key(17),))],
        "key-as-text": [("UPDATE toolflow_cache SET key = CAST(key AS TEXT) WHERE key = ?", (key(18),))],
        "value-as-text": [("UPDATE toolflow_cache SET value = CAST(value AS TEXT) WHERE key = ?", (key(19),))],
        "value-as-integer": [("UPDATE toolflow_cache SET value = 42 WHERE key = ?", (key(20),))],
        "value-as-real": [("UPDATE toolflow_cache SET value = 4.2 WHERE key = ?", (key(21),))],
        "checksum-as-text": [("UPDATE toolflow_cache SET checksum = 'x' WHERE key = ?", (key(22),))],
        "checksum-as-integer": [("UPDATE toolflow_cache SET checksum = 1 WHERE key = ?", (key(23),))],
        "expiry-as-text": [("UPDATE toolflow_cache SET expires_at = 'never' WHERE key = ?", (key(24),))],
        "expiry-as-blob": [("UPDATE toolflow_cache SET expires_at = x'00' WHERE key = ?", (key(25),))],
        "huge-value": [("UPDATE toolflow_cache SET value = zeroblob(17 * 1024 * 1024) WHERE key = ?", (key(26),))],
        "huge-value-under-the-cap": [
            ("UPDATE toolflow_cache SET value = CAST(printf('%.*c', 2000000, 'x') AS BLOB) WHERE key = ?", (key(27),))
        ],
        "all-rows-one-value": [
            (f"UPDATE toolflow_cache SET value = {value_of(0)}, checksum = {column_of('checksum', 0)}", ())
        ],
        "rows-deleted": [("DELETE FROM toolflow_cache WHERE key > ?", (key(30),))],
    }
    return edits


async def test_rows_swapped_edited_or_of_the_wrong_type(tmp_path: Path) -> None:
    """Rows moved between keys, payloads edited, values of the wrong SQLite type, huge values: never served as another call's."""
    registry, plugins, content = await _intact(tmp_path)
    edits = _row_edits(registry)
    for name, statements in edits.items():
        path = _place(tmp_path, f"{name}.sqlite3", content)
        _sql(path, *statements)
        kinds = await _check(registry, plugins, path)
        assert set(kinds) <= {"corrupt", "busy"}, (name, kinds)  # busy: rewriting a huge row may take a while
    record("cache files", len(edits))


async def test_payloads_edited_in_place_in_the_file(tmp_path: Path) -> None:
    """A stored result's bytes changed in the file itself, behind SQLite's back: a digit, a letter, a key byte."""
    registry, plugins, content = await _intact(tmp_path)
    inputs = 0
    for n in (2, 21, 44, 59):
        stored = json.dumps(answer(n), ensure_ascii=False, separators=(",", ":")).encode()
        at = content.find(stored)
        assert at > 0, n
        edits = {
            "digit": (
                stored.find(b'"n":') + 4,
                ord("7") if content[at + stored.find(b'"n":') + 4] != ord("7") else ord("8"),
            ),
            "letter": (stored.find(b"thing") + 1, ord("a")),
            "quote": (stored.find(b'"seen"'), ord("'")),
        }
        for edit, (offset, byte) in edits.items():
            data = bytearray(content)
            data[at + offset] = byte
            await _check(registry, plugins, _place(tmp_path, f"edit-{n}-{edit}.sqlite3", bytes(data)))
            inputs += 1
        key_at = content.find(key_of(registry, n))
        for offset, byte in [(3, ord("o")), (0, ord("a")), (len(key_of(registry, n)) - 2, ord("9"))]:
            data = bytearray(content)
            data[key_at + offset] = byte
            await _check(registry, plugins, _place(tmp_path, f"key-{n}-{offset}.sqlite3", bytes(data)))
            inputs += 1
    record("cache files", inputs)


_FORGED = {
    "nested-too-deeply": b'{"success":true,"data":' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    "not-json": b'{"success":true,"data":',
    "a-list": b'[{"success":true,"data":1}]',
    "no-success": b'{"data":{"n":33}}',
    "success-a-string": b'{"success":"yes","data":{"n":33}}',
    "warnings-a-string": b'{"success":true,"data":{"n":33},"warnings":"careful"}',
    "warnings-of-numbers": b'{"success":true,"data":{"n":33},"warnings":[1,2]}',
    "warnings-zero": b'{"success":true,"data":{"n":33},"warnings":0}',
    "warnings-null": b'{"success":true,"data":{"n":33},"warnings":null}',
    "warnings-empty-text": b'{"success":true,"data":{"n":33},"warnings":""}',
    "error-a-number": b'{"success":true,"data":{"n":33},"error":5}',
    "not-utf8": b'{"success":true,"data":"\xff"}',
}


async def test_rows_a_writer_that_knows_the_format_forged(tmp_path: Path) -> None:
    """Rows whose checksum verifies but whose value is not a stored result: a miss with a warning, never a crash."""
    registry, plugins, content = await _intact(tmp_path)
    key = key_of(registry, 33)
    for name, value in _FORGED.items():
        path = _place(tmp_path, f"forged-{name}.sqlite3", content)
        forge = "UPDATE toolflow_cache SET value = ?, checksum = ?, expires_at = NULL WHERE key = ?"
        _sql(path, (forge, (value, _checksum(key, value, None), key)))
        assert await _check(registry, plugins, path) == ["corrupt"], name
    record("cache files", len(_FORGED))


# --------------------------------------------------------------------------- the file system


async def test_not_a_file(tmp_path: Path) -> None:
    """A directory at the cache path, and a cache path inside a regular file: calls run, one warning each."""
    registry, plugins, _ = await _intact(tmp_path)
    folder = tmp_path / "inputs" / "a-directory.sqlite3"
    folder.mkdir(parents=True)
    assert await _check(registry, plugins, folder) == ["unusable"]
    blocker = _place(tmp_path, "a-file", b"not a folder")
    assert await _check(registry, plugins, blocker / "cache.sqlite3") == ["unusable"]
    assert folder.is_dir()
    assert blocker.read_bytes() == b"not a folder"
    record("cache files", 2)


_READ_ONLY_CHILD = """\
import json, sys, warnings
sys.path.insert(0, sys.argv[1])
import trio
from _cache_support import call_all, setup
from pathlib import Path

async def main():
    registry, plugins, _ = setup(Path(sys.argv[2]))
    results, caught = await call_all(registry, plugins, Path(sys.argv[3]), json.loads(sys.argv[4]))
    print(json.dumps({"data": [r.data for r in results], "warnings": caught}))

trio.run(main)
"""


async def test_read_only_files(tmp_path: Path) -> None:
    """A cache file that cannot be written, in a folder that can or cannot be: hits still verified, calls answered right.

    As root nothing is read-only, so the engine then runs in a child process as the user nobody.
    """
    registry, plugins, content = await _intact(tmp_path)
    inputs = 0
    for folder_writable in (True, False):
        folder = Path(os.environ.get("TMPDIR", "/tmp")) / f"toolflow-ro-{os.getpid()}-{folder_writable}"
        folder.mkdir()
        try:
            spec_folder = folder / "spec"
            spec_folder.mkdir()
            path = folder / "cache.sqlite3"
            path.write_bytes(content)
            path.chmod(0o444)
            folder.chmod(0o777 if folder_writable else 0o555)
            if os.geteuid() == 0:
                spec_folder.chmod(0o777)
                done = await trio.run_process(
                    [
                        sys.executable,
                        "-c",
                        textwrap.dedent(_READ_ONLY_CHILD),
                        str(Path(__file__).parent.parent),
                        str(spec_folder),
                        str(path),
                        json.dumps(ASKED),
                    ],
                    capture_stdout=True,
                    capture_stderr=True,
                    check=False,
                    user=65534,
                    group=65534,
                    extra_groups=[],
                )
                assert done.returncode == 0, done.stderr.decode()
                seen = json.loads(done.stdout)
                assert seen["data"] == [answer(n) for n in ASKED]
                kinds = _kinds(seen["warnings"])
                assert len(kinds) == len(set(kinds))
            else:
                await _check(registry, plugins, path)
            assert path.read_bytes() == content
            inputs += 1
        finally:
            folder.chmod(0o777)
            shutil.rmtree(folder)
    record("cache files", inputs)


_LOCKER = """\
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA locking_mode = EXCLUSIVE")
conn.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
sys.stdin.read()
conn.execute("ROLLBACK")
"""


async def test_files_locked_by_another_process(tmp_path: Path) -> None:
    """A cache file another process holds an exclusive lock on (before and after a first engine used it): every call runs, one warning."""
    registry, plugins, content = await _intact(tmp_path)
    for name in ("locked-fresh", "locked-after-use"):
        path = _place(tmp_path, f"{name}.sqlite3", content)
        if name == "locked-after-use":
            await _check(registry, plugins, path)
        command = [sys.executable, "-c", _LOCKER, str(path)]
        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                start = functools.partial(trio.run_process, command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
                locker: trio.Process = await nursery.start(start)
                assert locker.stdout is not None
                assert locker.stdin is not None
                said = b""
                while not said.endswith(b"\n"):
                    said += await locker.stdout.receive_some()
                assert said == b"locked\n"
                # Each call waits for the lock: a few calls show it.
                assert await _check(registry, plugins, path, asked=(0, 1, 0, 60), cache_timeout=0.05) == ["busy"]
                await locker.stdin.aclose()
        assert path.read_bytes()[:100] == content[:100]
    record("cache files", 2)
