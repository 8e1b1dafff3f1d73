#!/usr/bin/env python3
"""Check every #include of engine/, kernels/, fs/, tools/, lib/ and include/ against
the dependency rule of docs/DESIGN.md section 1 ("The dependency rule").

usage: tests/layers.py [ROOT]      (ROOT: the source tree, by default this script's)

A quoted include is resolved against the including file's folder and must land in a folder
its own top folder may use (engine/'s subfolders are one layer here):
  engine/   engine/                    (never kernels/, fs/, tools/, lib/)
  kernels/  kernels/, the interface header engine/backend/gpu_api.h (the archive comes as its
            plain arrays, gpu_src), the bottom layer's engine/base/buf.h, err.h and tok.h
            (buffers, the error idiom, the token rules), and engine/grammar/headtail.h (pure
            functions both backends compute with); nothing of the archive's or the CPU
            analytics' types (engine/format/, engine/analytics/)
  fs/       fs/, engine/, lib/
  tools/    tools/, engine/, lib/
  lib/      lib/, engine/, include/
  include/  nothing of the project
Inside engine/, each subfolder may include its own files and those of the subfolders below it:
  base/      nothing else (buffers, errors, file I/O, tokens)
  grammar/   base/ (dictionary, grammar, Sequitur, head/tail)
  format/    base/, grammar/ (the archive file)
  index/     base/, grammar/, format/ (random access into a grammar, word queries)
  build/     base/, grammar/, format/ (pack, shaping, compaction's builds)
  analytics/ base/, grammar/, format/, index/, and backend/gpu_api.h (the analytic ids)
  backend/   base/, grammar/, format/, index/, analytics/ (CPU or GPU dispatch)
  volume/    all of the above (the live, writable archive and its journal)
A system include of CUDA (<cuda*>, <cub/...>, <thrust/...>) is allowed in kernels/ only, and
of FUSE (<fuse*>) in fs/ only. The known exceptions below are debts listed in DESIGN.md; each
is printed as a comment and does not fail. Prints one TAP line per folder ("ok" or "not ok"
followed by every offending include) and exits 1 on any violation."""
import os
import re
import sys

ALLOWED = {
    "engine": {"engine"},
    "kernels": {"kernels", "engine/backend/gpu_api.h", "engine/base/buf.h", "engine/base/err.h",
                "engine/base/tok.h", "engine/grammar/headtail.h"},
    "fs": {"fs", "engine", "lib"},
    "tools": {"tools", "engine", "lib"},
    "lib": {"lib", "engine", "include"},
    "include": set(),
}

ENGINE = {
    "base": {"base"},
    "grammar": {"base", "grammar"},
    "format": {"base", "grammar", "format"},
    "index": {"base", "grammar", "format", "index"},
    "build": {"base", "grammar", "format", "build"},
    "analytics": {"base", "grammar", "format", "index", "analytics", "backend/gpu_api.h"},
    "backend": {"base", "grammar", "format", "index", "analytics", "backend"},
    "volume": {"base", "grammar", "format", "index", "build", "analytics", "backend", "volume"},
}

# (including file, included file): known debts (docs/DESIGN.md, "Where the code does not
# follow the rule yet"). Remove a line when its include goes.
KNOWN = set()

SYSTEM = [(re.compile(r"^(cuda|cub/|thrust/)"), "kernels"), (re.compile(r"^fuse"), "fs")]
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def allowed(folder, rel, target):
    rules = ALLOWED[folder]
    if not (target in rules or target.split("/")[0] in rules):
        return False
    if folder != "engine" or not target.startswith("engine/"):
        return True
    mine = ENGINE.get(rel.split("/")[1], set())
    sub = target[len("engine/"):]
    return sub in mine or sub.split("/")[0] in mine


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(__file__), ".."))
    failed = 0
    for n, folder in enumerate(ALLOWED, 1):
        bad, known = [], []
        top = os.path.join(root, folder)
        names = sorted(os.path.relpath(os.path.join(d, f), top)
                       for d, _, fs in os.walk(top) for f in fs)
        for name in names:
            if not name.endswith((".c", ".h", ".cu")):
                continue
            rel = f"{folder}/{name}"
            here = os.path.dirname(os.path.join(top, name))
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
                    target = os.path.relpath(os.path.normpath(os.path.join(here, path)), root)
                    if allowed(folder, rel, target):
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
