#!/usr/bin/env python3
"""Compare the options that --help prints with the options the man pages document.

usage: tests/mancheck.py TADOC TADOCFS MANDIR

Options are the words that start with '-' or '--' (e.g. -l, --level), plus '-o NAME' for
every NAME of an '-o name[=value][,name...]' list (tadocfs's mount options). From the
help texts, spans in `backquotes` are skipped: they quote other commands (setfattr -n ...).
From the man pages, only the OPTIONS section and the per-command subsections of COMMANDS
count (EXAMPLES and prose elsewhere may use other programs' options), and .EX/.EE blocks
are skipped. Checks:
  - tadoc: every command of `tadoc --help` has a subsection in tadoc(1) and the reverse; the
    options of `tadoc CMD --help` equal those of its subsection; every option of
    `tadoc --help` is documented in tadoc(1), and every option under OPTIONS is in
    `tadoc --help`;
  - tadocfs: the options of `tadocfs --help` equal those under OPTIONS in tadocfs(8).
Prints each difference and exits 1 if there is any."""
import re
import shlex
import subprocess
import sys

OPT = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")
MOUNT_OPT = re.compile(r"(?<![\w-])-o\s+([a-z_]\w*(?:=[^\s,]*)?(?:,[a-z_]\w*(?:=[^\s,]*)?)*)")


def options(text):
    found = set(OPT.findall(text))
    for group in MOUNT_OPT.findall(text):
        for item in group.split(","):
            found.add("-o " + item.split("=")[0])
    return found


def help_text(argv):
    out = subprocess.run(argv, capture_output=True, text=True).stdout
    return re.sub(r"`[^`]*`", "", out)


def roff_text(line):
    """The words a roff line puts on the page (fonts dropped), or '' for other requests."""
    esc = [(r"\-", "-"), (r"\(aq", "'"), (r"\(em", "-"), (r"\(rs", "\\"), (r"\&", ""),
           (r"\e", "\\")]
    line = re.sub(r"\\f[BIRP]", "", line)
    for a, b in esc:
        line = line.replace(a, b)
    if not line.startswith("."):
        return line
    parts = line[1:].split(None, 1)
    if not parts:
        return ""
    macro, rest = parts[0], parts[1] if len(parts) > 1 else ""
    try:
        args = shlex.split(rest, posix=True)
    except ValueError:
        args = rest.split()
    if macro in ("BI", "BR", "IB", "IR", "RB", "RI"):  # alternating fonts: no spaces between
        return "".join(args)
    if macro in ("B", "I", "SM", "SB", "SH", "SS", "IP"):
        return " ".join(args)
    return ""


def man_sections(path):
    """{'OPTIONS': text, 'COMMANDS': {name: text}} of a man page source."""
    sections, commands = {}, {}
    sh, ss, in_ex = None, None, False
    for raw in open(path, encoding="utf-8"):
        raw = raw.rstrip("\n")
        if raw.startswith(".\\\""):
            continue
        if raw.startswith(".EX"):
            in_ex = True
            continue
        if raw.startswith(".EE"):
            in_ex = False
            continue
        if in_ex:
            continue
        if raw.startswith(".SH"):
            sh, ss = roff_text(raw).strip(), None
            sections.setdefault(sh, "")
            continue
        if raw.startswith(".SS") and sh == "COMMANDS":
            title = roff_text(raw)
            ss = title.split()[0]
            commands[ss] = title + "\n"
            continue
        text = roff_text(raw)
        if sh == "COMMANDS" and ss:
            commands[ss] += text + "\n"
        elif sh:
            sections[sh] += text + "\n"
    sections["COMMANDS"] = commands
    return sections


def main():
    tadoc, tadocfs, mandir = sys.argv[1:4]
    bad = []

    def compare(what, helpset, manset):
        for o in sorted(helpset - manset):
            bad.append(f"{what}: {o} is in --help but not in the man page")
        for o in sorted(manset - helpset):
            bad.append(f"{what}: {o} is in the man page but not in --help")

    man1 = man_sections(f"{mandir}/tadoc.1")
    main_help = help_text([tadoc, "--help"])
    cmds = []
    in_cmds = False
    for line in main_help.splitlines():
        if line.startswith("commands:"):
            in_cmds = True
        elif in_cmds and line.startswith("  ") and line.strip():
            cmds.append(line.split()[0])
        elif in_cmds and not line.strip():
            in_cmds = False
    if not cmds:
        bad.append("tadoc --help lists no commands")
    for c in cmds:
        if c not in man1["COMMANDS"]:
            bad.append(f"tadoc {c}: no subsection in tadoc(1)")
            continue
        compare(f"tadoc {c}", options(help_text([tadoc, c, "--help"])),
                options(man1["COMMANDS"][c]))
    for c in man1["COMMANDS"]:
        if c not in cmds:
            bad.append(f"tadoc(1) documents '{c}', which tadoc --help does not list")
    documented = options(man1.get("OPTIONS", "")).union(
        *[options(t) for t in man1["COMMANDS"].values()])
    for o in sorted(options(main_help) - documented):
        bad.append(f"tadoc: {o} is in tadoc --help but not in tadoc(1)")
    for o in sorted(options(man1.get("OPTIONS", "")) - options(main_help)):
        bad.append(f"tadoc: {o} is under OPTIONS in tadoc(1) but not in tadoc --help")

    man8 = man_sections(f"{mandir}/tadocfs.8")
    compare("tadocfs", options(help_text([tadocfs, "--help"])), options(man8.get("OPTIONS", "")))

    for b in bad:
        print(b)
    print(f"mancheck: {len(cmds)} tadoc commands, {len(bad)} differences")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
