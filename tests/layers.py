#!/usr/bin/env python3
"""Check every #include of engine/, index/, kernels/, fs/, tools/, lib/ and include/ against
the dependency rule of docs/DESIGN.md section 1 ("The dependency rule").

usage: tests/layers.py [ROOT]      (ROOT: the source tree, by default this script's)

A quoted include is resolved against the including file's folder and must land in a folder
its own folder may use:
  engine/   engine/, index/            (never kernels/, fs/, tools/, lib/)
  index/    index/
  kernels/  kernels/, the interface header engine/gpu_api.h and the plain data it passes
            (engine/arc.h, buf.h, err.h, tok.h), and engine/headtail.h (pure functions both
            backends compute with); nothing of the CPU analytics (engine/ana*)
  fs/       fs/, engine/, lib/
  tools/    tools/, engine/, lib/
  lib/      lib/, engine/, include/
  include/  nothing of the project
A system include of CUDA (<cuda*>, <cub/...>, <thrust/...>) is allowed in kernels/ only, and
of FUSE (<fuse*>) in fs/ only. The known exceptions below are debts listed in DESIGN.md; each
is printed as a comment and does not fail. Prints one TAP line per folder ("ok" or "not ok"
followed by every offending include) and exits 1 on any violation."""
import os
import re
import sys

ALLOWED = {
    "engine": {"engine", "index"},
    "index": {"index"},
    "kernels": {"kernels", "engine/gpu_api.h", "engine/arc.h", "engine/buf.h", "engine/err.h",
                "engine/tok.h", "engine/headtail.h"},
    "fs": {"fs", "engine", "lib"},
    "tools": {"tools", "engine", "lib"},
    "lib": {"lib", "engine", "include"},
    "include": set(),
}

# (including file, included file): known debts (docs/DESIGN.md, "Where the code does not
# follow the rule yet"). Remove a line when its include goes.
KNOWN = {
    ("index/idx.h", "engine/arc.h"),
    ("index/idx.c", "engine/err.h"),
    ("index/words.c", "engine/err.h"),
    ("index/words.c", "engine/tok.h"),
    ("fs/main.c", "index/words.h"),
    ("fs/ops.c", "index/words.h"),
    ("tools/tadoc.c", "index/idx.h"),
    ("tools/tadoc.c", "index/words.h"),
    ("lib/tadoc.c", "index/idx.h"),
    ("lib/tadoc.c", "index/words.h"),
}

SYSTEM = [(re.compile(r"^(cuda|cub/|thrust/)"), "kernels"), (re.compile(r"^fuse"), "fs")]
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def allowed(folder, target):
    rules = ALLOWED[folder]
    return target in rules or target.split("/")[0] in rules


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(__file__), ".."))
    failed = 0
    for n, folder in enumerate(ALLOWED, 1):
        bad, known = [], []
        top = os.path.join(root, folder)
        names = sorted(os.listdir(top)) if os.path.isdir(top) else []
        for name in names:
            if not name.endswith((".c", ".h", ".cu")):
                continue
            rel = f"{folder}/{name}"
            with open(os.path.join(top, name), encoding="utf-8", errors="replace") as f:
                for ln, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    kind, path = m.groups()
                    where = f"{rel}:{ln}: #include {kind}{path}{'>' if kind == '<' else kind}"
                    if kind == "<":
                        for pat, only in SYSTEM:
                            if pat.match(path) and folder != only:
                                bad.append(where)
                        continue
                    target = os.path.relpath(os.path.normpath(os.path.join(top, path)), root)
                    if allowed(folder, target):
                        continue
                    (known if (rel, target) in KNOWN else bad).append(where)
        for k in known:
            print(f"# known exception: {k}")
        print(f"{'not ok' if bad else 'ok'} {n} - layers: {folder}/ includes only what "
              f"it may")
        for b in bad:
            print(f"#   {b}")
        failed += bool(bad)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
