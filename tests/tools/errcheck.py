#!/usr/bin/env python3
"""Lists the fallible library calls that take no error context (default: the project's).

"Every fallible library call takes an ndz_error": a function declared in a header of
lib/*/ (lib/<room>/<name>.h) is fallible when it returns
  - int or ssize_t and its header contract (the comment before the declaration, or
    the one on its line) names a negative NDZ_E* code ("NDZ_EIO", "a negative code",
    "negative NDZ_E*", "0 or a code", "the first error"), or returns "as" another
    function that is fallible, or
  - a pointer and its contract says it is NULL on failure ("NULL on error",
    "NULL after an error", "NULL when out of memory"),
or when it reports failure in a why/whylen string (`char *why, size_t whylen`).
Such a function must take a `struct ndz_error *`. Pure predicates (0/1), lookups that
return NULL for "not found" and infallible functions are not listed.

Prints one line per function that takes none, "path:line: name: why", and exits 1
when there is any, 0 otherwise. The contract is found by position: the nearest
comment above a declaration (a comment heading a group of declarations counts for
each), so a contract that names no code is not seen, and one that names a code in
another sense may be listed: read the line before acting on it.
Usage: errcheck.py [TOP]
"""
import glob
import os
import re
import sys

COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
PREPROC = re.compile(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", re.M)
DECL = re.compile(r"^(?P<ret>[A-Za-z_][\w\s\*]*?[\s\*])(?P<name>[A-Za-z_]\w*)\s*\((?P<params>.*)\)"
                  r"(?:\s*__attribute__\s*\(\(.*\)\))?\s*$", re.S)
CODE = re.compile(r"\bNDZ_E[A-Z0-9_]*|\bnegative\b|"
                  r"\b(or|returns?),?\s+(a|an|the first)\s+(error|code)\b", re.I)
AS = re.compile(r"\b(?:[Rr]eturns\s+as|[Aa]s)\s+(ndz_\w+)")
WHY = re.compile(r"\bchar\s*\*\s*why\s*,\s*size_t\s+whylen\b")
NULL_FAIL = re.compile(r"\bNULL\b[^.;]{0,40}?\b(error|fail\w*|memory|ENOMEM)\b|"
                       r"\b(error|fail\w*|out of memory)\b[^.;]{0,25}?\bNULL\b", re.I)


def blank(text, spans):
    """text with the characters of spans turned to spaces (newlines kept)."""
    chars = list(text)
    for a, b in spans:
        for i in range(a, b):
            if chars[i] != "\n":
                chars[i] = " "
    return "".join(chars)


def declarations(text):
    """(offset, statement) of each top-level statement or function head."""
    comments = [m.span() for m in COMMENT.finditer(text)]
    code = blank(text, comments)
    code = blank(code, [m.span() for m in PREPROC.finditer(code)])
    out, depth, start, i = [], 0, 0, 0
    while i < len(code):
        c = code[i]
        if c == "{":
            if depth == 0:
                out.append((start, code[start:i]))      # a function body or a struct
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                start = i + 1
        elif c == ";" and depth == 0:
            out.append((start, code[start:i]))
            start = i + 1
        i += 1
    return comments, out


def contract(text, comments, a, b):
    """The nearest comment ending before offset a, and any starting on b's line."""
    before = [s for s in comments if s[1] <= a]
    eol = text.find("\n", b)
    eol = len(text) if eol < 0 else eol
    after = [s for s in comments if b <= s[0] < eol]
    return " ".join(text[x:y] for x, y in (before[-1:] + after))


def check(top):
    faults, found = [], []          # found: (rel, line, name, kind, as_name)
    fallible = set()
    for path in sorted(glob.glob(os.path.join(top, "lib", "*", "*.h"))):
        rel = os.path.relpath(path, top)
        with open(path, errors="replace") as f:
            text = f.read()
        comments, stmts = declarations(text)
        for off, stmt in stmts:
            s = stmt.strip()
            lead = len(stmt) - len(stmt.lstrip())
            if not s or s.startswith("typedef") or "=" in s:
                continue
            m = DECL.match(" ".join(s.split()))
            if not m:
                continue
            ret = " ".join(m.group("ret").replace("extern", "").replace("static", "")
                           .replace("inline", "").split())
            name, params = m.group("name"), m.group("params")
            if "(" in ret or "struct ndz_error" in params:
                continue
            a = off + lead
            b = off + len(stmt)
            why = contract(text, comments, a, b)
            line = text.count("\n", 0, a) + 1
            base = ret.replace("const ", "").strip()
            kind, as_name = None, None
            if WHY.search(params):
                kind = "reports failure in why/whylen"
            elif base in ("int", "ssize_t") and CODE.search(why):
                kind = f"returns {base}, a negative NDZ_E* code by its contract"
            elif "*" in ret and NULL_FAIL.search(why):
                kind = "returns a pointer, NULL on failure by its contract"
            elif base in ("int", "ssize_t") and AS.search(why):
                as_name = AS.search(why).group(1)
            if kind:
                fallible.add(name)
            if kind or as_name:
                found.append((rel, line, name, kind, as_name))
    for rel, line, name, kind, as_name in found:
        if not kind and as_name in fallible:
            kind = f"returns as {as_name}, which can fail"
        if kind:
            faults.append(f"{rel}:{line}: {name}: {kind}, and takes no struct ndz_error *")
    return faults


def main():
    top = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                          os.path.join(os.path.dirname(__file__), "..", ".."))
    faults = check(top)
    for f in faults:
        print(f)
    return 1 if faults else 0


if __name__ == "__main__":
    sys.exit(main())
