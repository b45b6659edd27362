"""Reading a log once, in constant memory: chunks of whole lines for the formats' parsers.

A log is read as UTF-8 bytes in chunks of about `CHUNK_BYTES` that end at a line end. Each
chunk is searched at C speed for the evidence of a failure (`FailureWatch`), then decoded and
handed to the format's parser, whose patterns start with a literal so that the regular
expression engine skips ahead quickly; a format with a `needle` gets only the lines that
contain it. Nothing holds more than a chunk of the text.

A file's newlines are read as Python's text mode reads them (`\\r\\n` and a lone `\\r` end a
line, which also splits progress bars drawn with `\\r`); text given as a string keeps its `\\r`s,
as before. A line longer than `MAX_LINE_BYTES` (16 MiB) is cut there.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from os import PathLike

from dlperf.logformats.common import FailureWatch

CHUNK_BYTES = 1 << 20
MAX_LINE_BYTES = 1 << 24
# mpirun --tag-output / horovodrun put "[1,0]<stdout>:" before every line of rank 0 of job 1.
RANK_PREFIX = re.compile(rb"^\[\d+,\d+\]<std(?:out|err)>:", re.M)
_RANK_WORD = b"]<std"


def file_chunks(
    path: str | PathLike[str], chunk_bytes: int = CHUNK_BYTES, max_line: int = MAX_LINE_BYTES
) -> Iterator[bytes]:
    """The file's bytes in chunks that end at a line end, newlines made `\\n` (a line longer
    than `max_line` is cut there)."""
    carry = b""  # the start of a line that the previous block cut
    with open(path, "rb") as f:
        while True:
            block = f.read(chunk_bytes)
            if not block:
                break
            # after the last line end (a \r too, unless it is the last byte: of a \r\n?)
            cut = max(block.rfind(b"\n"), block.rfind(b"\r", 0, len(block) - 1)) + 1
            if not cut:
                if len(carry) + len(block) <= max_line:
                    carry += block
                    continue
                cut = len(block)
            view = memoryview(block)
            if carry:
                chunk = b"".join((carry, view[:cut]))
            else:
                chunk = block if cut == len(block) else bytes(view[:cut])
            carry = bytes(view[cut:])
            yield _universal_newlines(chunk)
    if carry:
        yield _universal_newlines(carry)


def _universal_newlines(chunk: bytes) -> bytes:
    if b"\r" in chunk:
        chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    return chunk


def text_chunks(text: str, chunk_chars: int = CHUNK_BYTES) -> Iterator[bytes]:
    """A string's lines in chunks (UTF-8, lone surrogates kept: decode with 'surrogatepass')."""
    start = 0
    while start < len(text):
        cut = text.rfind("\n", start, start + chunk_chars) + 1
        if cut <= start:
            cut = text.find("\n", start + chunk_chars) + 1 or len(text)
        yield text[start:cut].encode("utf-8", "surrogatepass")
        start = cut


def line_chunks(lines: Iterable[str], chunk_chars: int = CHUNK_BYTES) -> Iterator[bytes]:
    """Lines (a trailing `\\n` on each is dropped) joined into chunks, read as they are needed."""
    batch: list[str] = []
    size = 0
    for line in lines:
        if line.endswith("\n"):
            line = line[:-1]
        batch.append(line)
        size += len(line) + 1
        if size >= chunk_chars:
            yield ("\n".join(batch) + "\n").encode("utf-8", "surrogatepass")
            batch, size = [], 0
    if batch:
        yield ("\n".join(batch) + "\n").encode("utf-8", "surrogatepass")


def lines_with(chunk: bytes, needle: bytes) -> list[bytes]:
    """The lines of `chunk` that contain `needle`, in order (without their `\\n`)."""
    out: list[bytes] = []
    find, rfind = chunk.find, chunk.rfind
    at = find(needle)
    while at != -1:
        start = rfind(b"\n", 0, at) + 1
        end = find(b"\n", at)
        if end == -1:
            out.append(chunk[start:])
            break
        out.append(chunk[start:end])
        at = find(needle, end)
    return out


def scan(chunks: Iterable[bytes], needle: str | None, watch: FailureWatch) -> Iterator[str]:
    """The log in pieces of whole lines for a format's parser (rank tags removed), decoded as
    `watch` decodes; every chunk also goes through `watch`. With a `needle`, a piece holds only
    the lines that contain it; without, it is the whole chunk."""
    encoded = needle.encode() if needle else b""
    errors = watch.errors
    for chunk in chunks:
        if _RANK_WORD in chunk:
            chunk = RANK_PREFIX.sub(b"", chunk)
        watch.feed(chunk)
        if not encoded:
            yield chunk.decode("utf-8", errors)
            continue
        found = lines_with(chunk, encoded)
        if found:
            yield b"\n".join(found).decode("utf-8", errors)
