#!/usr/bin/env python3
"""The runtime's files call one way: fails when the file-level call graph of a library has a cycle.

runtime/src/internal.h describes the layering (each file calls only files below it). This check
derives the graph the layering forbids cycles in from the object files themselves, so it sees
every call the compiler emitted, not what a grep of the sources guesses: for each object in the
static library, `nm` lists the symbols it defines and the ones it leaves undefined; object A
depends on object B when A leaves undefined a symbol B defines. Any cycle in that graph (A -> B
-> ... -> A) is printed and the check exits 1. Without a cycle it prints the files in dependency
order (lowest first) and exits 0.

Usage: check_layering.py [--nm NM] [--quiet] LIBRARY.a
runtime/CMakeLists.txt runs it on libtally_runtime.a each time the library is built, so a cycle
fails the build. The test runtime.LayeringCatchesCycle runs it on a two-file fixture library whose
files call each other (test/runtime/layering_cycle/), and passes only if that cycle is reported.
"""

import argparse
import re
import subprocess
import sys

# `nm -A -P` lines: "<archive>[<member>]: <symbol> <type> [<value> <size>]".
NM_LINE = re.compile(r"^.*\[(?P<member>[^\]]+)\]: (?P<symbol>\S+) (?P<type>\S)")


def read_symbols(nm, library):
    """Returns {member: (defined symbols, undefined symbols)} for the archive's members."""
    out = subprocess.run([nm, "-A", "-P", library], check=True, capture_output=True,
                         text=True).stdout
    members = {}
    for line in out.splitlines():
        m = NM_LINE.match(line)
        if not m:
            continue
        defined, undefined = members.setdefault(m["member"], (set(), set()))
        if m["type"] == "U":
            undefined.add(m["symbol"])
        elif m["type"].isupper():  # global definitions only; file-local symbols link nothing
            defined.add(m["symbol"])
    return members


def build_graph(members):
    """Returns {member: {member it calls: [symbols]}}, self-edges left out."""
    owner = {}
    for member, (defined, _) in members.items():
        for symbol in defined:
            owner[symbol] = member
    graph = {member: {} for member in members}
    for member, (_, undefined) in members.items():
        for symbol in sorted(undefined):
            target = owner.get(symbol)
            if target and target != member:
                graph[member].setdefault(target, []).append(symbol)
    return graph


def find_cycle(graph):
    """Returns one cycle as a list of members (first == last), or None."""
    WHITE, GREY, BLACK = 0, 1, 2
    colour = {node: WHITE for node in graph}
    stack = []

    def visit(node):
        colour[node] = GREY
        stack.append(node)
        for succ in sorted(graph[node]):
            if colour[succ] == GREY:
                return stack[stack.index(succ):] + [succ]
            if colour[succ] == WHITE:
                cycle = visit(succ)
                if cycle:
                    return cycle
        stack.pop()
        colour[node] = BLACK
        return None

    for node in sorted(graph):
        if colour[node] == WHITE:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def layers(graph):
    """Files in dependency order: each after every file it calls (the graph is acyclic)."""
    order, placed = [], set()
    while len(placed) < len(graph):
        ready = sorted(n for n in graph if n not in placed and set(graph[n]) <= placed)
        order.append(ready)
        placed.update(ready)
    return order


def strip(member):
    return member[:-2] if member.endswith(".o") else member


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nm", default="nm")
    parser.add_argument("--quiet", action="store_true", help="print nothing unless there is a cycle")
    parser.add_argument("library")
    args = parser.parse_args()
    graph = build_graph(read_symbols(args.nm, args.library))
    cycle = find_cycle(graph)
    if cycle:
        print(f"error: {args.library}: the runtime's files call each other in a cycle: "
              + " -> ".join(strip(m) for m in cycle))
        for a, b in zip(cycle, cycle[1:]):
            print(f"  {strip(a)} calls {strip(b)}: {', '.join(graph[a][b])}")
        print("Each runtime file may call only files below it (runtime/src/internal.h).")
        return 1
    if args.quiet:
        return 0
    for depth, level in enumerate(layers(graph)):
        print(f"layer {depth}: {' '.join(strip(m) for m in level)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
