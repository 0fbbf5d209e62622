#!/usr/bin/env python3
"""The runtime's files call one way: checks a library's file-level calls against its layers.

The graph comes from the object files themselves, so it holds every call the compiler emitted, not
what a grep of the sources guesses: for each object in the static library, `nm` lists the symbols
it defines and the ones it leaves undefined; object A calls object B when A leaves undefined a
symbol B defines. Two checks, each printing every file and symbol that breaks it, and exit 1:
  - with --layers LIST (runtime/layers.txt: the layers lowest first, each naming its files), a
    file may call only files of its own layer or of an earlier one. A call into a later layer
    fails, and so does a file of the library the list does not name, a listed file missing from
    the library, or (with --sources DIR) a listed path that is not a file under DIR;
  - with or without a list, the graph has no cycle (A -> B -> ... -> A), within a layer too.
When both pass it prints the layers (declared, or else derived: each file after all it calls)
unless --quiet, and exits 0.

Usage: check_layering.py [--nm NM] [--layers LIST [--sources DIR]] [--quiet] LIBRARY.a
runtime/CMakeLists.txt runs it on libtally_runtime.a with runtime/layers.txt each time the
library is built, so a call against the list fails the build. Tests in test/runtime show it
would: runtime.LayeringCatchesCycle (two files calling each other, layering_cycle/),
runtime.LayeringCatchesUpwardCall and runtime.LayeringCatchesUnlistedFile (layering_upward/: a
lower layer's file calling a higher one's, and a list that leaves a file out).
"""

import argparse
import os
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


def derived_layers(graph):
    """Files in dependency order: each after every file it calls (the graph is acyclic)."""
    order, placed = [], set()
    while len(placed) < len(graph):
        ready = sorted(n for n in graph if n not in placed and set(graph[n]) <= placed)
        order.append(ready)
        placed.update(ready)
    return order


def strip(member):
    return member[:-2] if member.endswith(".o") else member


def read_layers(path):
    """Returns [(layer name, [file paths])] from a layer list, lowest layer first.

    `layer <name>: <text>` starts a layer; each indented line after it names a file (its first
    word) and says what it does; `#` starts a comment."""
    layers = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            text = line.split("#", 1)[0].rstrip()
            if not text.strip():
                continue
            if not text[0].isspace():
                m = re.match(r"^layer\s+([\w.-]+)\s*(:.*)?$", text)
                if not m:
                    raise SystemExit(f"{path}:{number}: expected `layer <name>: ...`: {text}")
                layers.append((m[1], []))
            elif not layers:
                raise SystemExit(f"{path}:{number}: a file before the first layer: {text.strip()}")
            else:
                layers[-1][1].append(text.split()[0])
    return layers


def check_layers(graph, layers, list_path, sources):
    """Returns the lines reporting every file and call that breaks the declared layers."""
    problems = []
    rank, path_of = {}, {}  # by object file name ("error.c"): layer index, listed path
    for index, (name, files) in enumerate(layers):
        for path in files:
            base = path.rsplit("/", 1)[-1]
            if base in path_of:
                problems.append(f"  {path} and {path_of[base]} are both listed: objects are "
                                f"named by file name, so file names must differ")
            rank[base], path_of[base] = index, path
            if sources and not os.path.isfile(os.path.join(sources, path)):
                problems.append(f"  {path} (layer {name}) is not a file under {sources}")
    members = {strip(m): m for m in graph}
    for base in sorted(set(members) - set(rank)):
        problems.append(f"  {base} is in the library but not in {list_path}")
    for base in sorted(set(rank) - set(members)):
        problems.append(f"  {path_of[base]} (layer {layers[rank[base]][0]}) is listed but not "
                        f"in the library")
    for base in sorted(set(members) & set(rank)):
        for target, symbols in sorted(graph[members[base]].items()):
            callee = strip(target)
            if callee in rank and rank[callee] > rank[base]:
                problems.append(f"  {path_of[base]} (layer {layers[rank[base]][0]}) calls "
                                f"{path_of[callee]} (layer {layers[rank[callee]][0]}): "
                                + ", ".join(symbols))
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nm", default="nm")
    parser.add_argument("--layers", help="the declared layers (runtime/layers.txt)")
    parser.add_argument("--sources", help="where the listed paths are (runtime/src)")
    parser.add_argument("--quiet", action="store_true", help="print nothing unless a check fails")
    parser.add_argument("library")
    args = parser.parse_args()
    graph = build_graph(read_symbols(args.nm, args.library))
    failed = False
    layers = read_layers(args.layers) if args.layers else None
    if layers is not None:
        problems = check_layers(graph, layers, args.layers, args.sources)
        if problems:
            failed = True
            print(f"error: {args.library}: the runtime's files break the layers of {args.layers}:")
            print("\n".join(problems))
            print(f"A file may call only files of its own layer or of one listed before it, and "
                  f"every file is listed once ({args.layers}).")
    cycle = find_cycle(graph)
    if cycle:
        failed = True
        print(f"error: {args.library}: the runtime's files call each other in a cycle: "
              + " -> ".join(strip(m) for m in cycle))
        for a, b in zip(cycle, cycle[1:]):
            print(f"  {strip(a)} calls {strip(b)}: {', '.join(graph[a][b])}")
        print("Each runtime file may call only files below it (runtime/layers.txt).")
    if failed:
        return 1
    if args.quiet:
        return 0
    if layers is not None:
        for name, files in layers:
            print(f"layer {name}: {' '.join(files)}")
    else:
        for depth, level in enumerate(derived_layers(graph)):
            print(f"layer {depth}: {' '.join(strip(m) for m in level)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
