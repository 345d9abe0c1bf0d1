#!/usr/bin/env python3
"""Checks the include structure of a source tree (default: the project's).

lib/ is in rooms, each a layer: core (0); fs/ and lib/trust (1); lib/codec and
lib/ctl (2); lib/mcast (3); lib/master (4); lib/mserve (5); lib/cli (6). A file of
lib/ or fs/ may include a header of its own room or of a lower layer only; two rooms
of one layer may not include each other. lib/ctl (the master's wire and its
clients) needs lib/core only. Among the files of lib/ and fs/ there is no include
circle. A program (a top-level directory other than lib/, fs/ and tests/) includes
no file of another program; and every program but the master's (mfrisbeed/), and
bench/ too, is a client: it includes no file of lib/master or lib/mserve (the
master's decisions and its daemon), only lib/ctl's wire.

Prints one line per fault and exits 1 when there is any, 0 otherwise.
Usage: layers.py [TOP]
"""
import os
import re
import sys

RANK = {"lib/core": 0, "fs": 1, "lib/trust": 1, "lib/codec": 2, "lib/ctl": 2,
        "lib/mcast": 3, "lib/master": 4, "lib/mserve": 5, "lib/cli": 6}
ONLY = {"lib/ctl": ("lib/core",)}      # rooms that may include these rooms only (and their own)
MASTER = "mfrisbeed"                   # the one program that may include the rooms below
SERVER_ROOMS = ("lib/master", "lib/mserve")
INC = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def room_of(rel):
    for r in sorted(RANK, key=len, reverse=True):
        if rel.startswith(r + "/"):
            return r
    return None


def resolve(top, rel, name):
    """Where a quoted include lands: the includer's folder, then -Ilib, then -Ifs."""
    for base in (os.path.dirname(rel), "lib", "fs"):
        cand = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(os.path.join(top, cand)):
            return cand
    return None


def main():
    top = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                          os.path.join(os.path.dirname(__file__), "..", ".."))
    files = []
    for d, subs, names in os.walk(top):
        reld = os.path.relpath(d, top)
        subs[:] = [s for s in subs if not s.startswith(".") and not s.startswith("build")
                   and not (reld == "." and s in ("tests", "debian", "doc", "mfs"))]
        for n in names:
            if n.endswith((".c", ".h", ".def")):
                files.append(os.path.normpath(os.path.join(reld, n)))
    faults = []
    graph = {}
    for rel in sorted(files):
        with open(os.path.join(top, rel), errors="replace") as f:
            text = f.read()
        src_room = room_of(rel)
        src_prog = None if src_room or rel.startswith("lib/") else rel.split("/")[0]
        graph[rel] = []
        for name in INC.findall(text):
            dst = resolve(top, rel, name)
            if dst is None:
                continue          # a system header, or one made at build time
            dst_room = room_of(dst)
            if src_room:
                if dst_room is None:
                    faults.append(f"{rel}: includes {dst}, a program's file")
                elif dst_room != src_room and RANK[dst_room] >= RANK[src_room]:
                    how = "runs up a layer" if RANK[dst_room] > RANK[src_room] else \
                          "crosses to a room of its own layer"
                    faults.append(f"{rel}: includes {dst}: {how} ({src_room} -> {dst_room})")
                elif src_room in ONLY and dst_room != src_room and dst_room not in ONLY[src_room]:
                    faults.append(f"{rel}: includes {dst}: {src_room} needs "
                                  f"{', '.join(ONLY[src_room])} only")
                graph[rel].append(dst)
            elif src_prog == "bench":
                if dst_room in SERVER_ROOMS:
                    faults.append(f"{rel}: includes {dst}: a client includes lib/ctl, "
                                  f"not {dst_room}")
            elif src_prog and dst_room is None and not dst.startswith(src_prog + "/"):
                faults.append(f"{rel}: includes {dst}, another program's file")
            elif src_prog and src_prog != MASTER and dst_room in SERVER_ROOMS:
                faults.append(f"{rel}: includes {dst}: a client includes lib/ctl, "
                              f"not {dst_room}")
    # circles among lib/ and fs/ files (a header and its .c count as one node)
    def node(p):
        return p[:-2] if p.endswith((".c", ".h")) else p
    edges = {}
    for a, bs in graph.items():
        if room_of(a):
            for b in bs:
                if node(a) != node(b):
                    edges.setdefault(node(a), set()).add(node(b))
    state, stack = {}, []
    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(edges.get(n, ())):
            if state.get(m) == 1:
                cyc = stack[stack.index(m):] + [m]
                faults.append("include circle: " + " -> ".join(cyc))
            elif m not in state:
                visit(m)
        stack.pop()
        state[n] = 2
    for n in sorted(edges):
        if n not in state:
            visit(n)
    for f in faults:
        print(f)
    return 1 if faults else 0


if __name__ == "__main__":
    sys.exit(main())
