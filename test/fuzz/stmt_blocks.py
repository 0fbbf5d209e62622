#!/usr/bin/env python3
"""Cuts IR listings into fuzzing seeds of at most MAX bytes.

   stmt_blocks.py MAX OUTDIR FILE...

A Halide 14 listing is tens of kilobytes (its argument checks alone fill pages), more than the
fuzzers take, but every `produce`, `for`/`parallel`/`vectorized`/`unrolled`/`gpu` loop, `allocate`
and `if` block in it is a statement the parser takes on its own: a bare statement, whose free
names become the arguments of a module of its own (docs/ir-syntax.md). This writes each such
block of a listing (from its opening line to the line that closes it at the same indentation,
dedented) to OUTDIR/block_<folder>_<stem>_<line>.stmt, nested blocks too, skipping those over MAX
bytes and repeats. A load does not print its type; the listing's argument checks
(`assert(X.type == (uint32)CODE, ...)`, with the `let X.type = ...` they read) are where the
parser learns an input buffer's, so each block is preceded by those of the buffers it loads
from. About a third of the blocks of the committed listings verify (the others use a Func's
buffer outside its allocation, which verify rejects); all of them exercise the parser, and the
verified ones the lowering passes too.
"""

import hashlib
import re
import sys
from pathlib import Path

OPENERS = re.compile(
    r"^(?P<indent> *)(produce|consume|for|parallel|vectorized|unrolled|gpu_block|gpu_thread|"
    r"gpu_lane|allocate|if|atomic)\b.*\{\s*$")


def blocks(lines):
    """(first, last) line indices of every block whose opener and closer share an indentation."""
    for i, line in enumerate(lines):
        m = OPENERS.match(line)
        if not m:
            continue
        indent = m.group("indent")
        for j in range(i + 1, len(lines)):
            other = lines[j]
            if other.startswith(indent + "}") and not other.startswith(indent + " "):
                if other.rstrip() == indent + "}":
                    yield i, j
                break


TYPE_LET = re.compile(r"^ *(let (?P<name>[\w.$]+)\.type = .*)$")
TYPE_CHECK = re.compile(r"^ *(assert\((?P<name>[\w.$]+)\.type == \(uint32\)\d+,.*\))\s*$")


def main():
    max_bytes, out = int(sys.argv[1]), Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    seen = set()
    written = 0
    for name in sys.argv[3:]:
        path = Path(name)
        lines = path.read_text(errors="replace").splitlines()
        lets, checks = {}, {}
        for line in lines:
            m = TYPE_LET.match(line)
            if m:
                lets.setdefault(m.group("name"), m.group(1))
            m = TYPE_CHECK.match(line)
            if m and m.group("name") in lets:
                checks.setdefault(m.group("name"), lets[m.group("name")] + "\n" + m.group(1))
        for first, last in blocks(lines):
            indent = len(lines[first]) - len(lines[first].lstrip(" "))
            text = "\n".join(line[indent:] for line in lines[first : last + 1]) + "\n"
            used = [c for n, c in checks.items() if re.search(r"(?<![\w.])" + re.escape(n) + r"\[", text)]
            text = "".join(c + "\n" for c in used) + text
            if len(text.encode()) > max_bytes:
                continue
            digest = hashlib.sha1(text.encode()).hexdigest()
            if digest in seen:
                continue
            seen.add(digest)
            (out / f"block_{path.parent.name}_{path.stem}_{first + 1}.stmt").write_text(text)
            written += 1
    print(written)


if __name__ == "__main__":
    main()
