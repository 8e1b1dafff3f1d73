#!/usr/bin/env python3
"""readfmt: an independent reader of tadocfs archives (.tdc) and journals, written from
docs/FORMAT.md alone (it shares no code with the C implementation), so that comparing what
it prints with what the C tools print (tests/bats/format.bats) shows the document is complete.

Only the Python standard library, plus two command-line tools for what the standard library
lacks: `zstd -d` decompresses zstd sections and `xxhsum -H3` computes XXH3-64.

usage: readfmt.py tree ARCHIVE     the tree the archive plus its journal shows
       readfmt.py archive ARCHIVE  the tree of the archive alone (journal ignored)
       readfmt.py ls ARCHIVE       what `tadoc ls -l ARCHIVE` prints
       readfmt.py cat ARCHIVE PATH the content of a regular file, as `tadoc cat` writes it
       readfmt.py records ARCHIVE  each journal record that replays: seq, type, body length,
                                   then the record's fields
The tree listing is the one tests/tools/fmtdump prints (see there). Exit 3 when the archive
or journal breaks a rule of the format, with a message on stderr.

READFMT_MISTAKE=planes|varint|order makes the reader get one detail wrong on purpose (symbols
read as interleaved little-endian u32 instead of byte planes; varints read big-endian; hard
link content taken from the last name), so the test can show that such a reader disagrees.
"""
import os
import subprocess
import sys
import time

MISTAKE = os.environ.get("READFMT_MISTAKE", "")


class Bad(Exception):
    pass


def xxh3(data):
    out = subprocess.run(["xxhsum", "-H3", "-"], input=data, stdout=subprocess.PIPE,
                         check=True).stdout.decode().split()
    # "XXH3 (stdin) = HEX" (BSD style) or "HEX  stdin" (GNU style): the value is big-endian hex
    return int(out[-1] if "=" in out else out[0], 16)


def unzstd(data, size):
    out = subprocess.run(["zstd", "-d", "-c", "-q"], input=data, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
    if out.returncode != 0 or len(out.stdout) != size:
        raise Bad("zstd section does not decompress to its declared size")
    return out.stdout


def u32(b, o):
    return int.from_bytes(b[o:o + 4], "little")


def u64(b, o):
    return int.from_bytes(b[o:o + 8], "little")


class Reader:
    def __init__(self, data, what):
        self.b, self.p, self.what = data, 0, what

    def left(self):
        return len(self.b) - self.p

    def bytes(self, n):
        if n > self.left():
            raise Bad(self.what + ": truncated")
        v = self.b[self.p:self.p + n]
        self.p += n
        return v

    def byte(self):
        return self.bytes(1)[0]

    def u64(self):
        return int.from_bytes(self.bytes(8), "little")

    def varint(self):
        # LEB128: 7 bits per byte, least significant group first, high bit = more follows
        groups = []
        while True:
            c = self.byte()
            groups.append(c & 0x7F)
            if not c & 0x80:
                break
            if len(groups) == 10:
                raise Bad(self.what + ": varint too long")
        if MISTAKE == "varint":
            groups.reverse()
        v = 0
        for k, g in enumerate(groups):
            v |= g << (7 * k)
        if v >= 1 << 64:
            raise Bad(self.what + ": varint overflows 64 bits")
        return v

    def zigzag(self):
        z = self.varint()
        return (z >> 1) ^ -(z & 1)

    def string(self):
        return self.bytes(self.varint())

    def syms(self, n):
        raw = self.bytes(4 * n)
        if MISTAKE == "planes":
            return [u32(raw, 4 * i) for i in range(n)]
        # four byte planes: all low bytes, then all second bytes, ...
        return [raw[i] | raw[n + i] << 8 | raw[2 * n + i] << 16 | raw[3 * n + i] << 24
                for i in range(n)]

    def end(self):
        if self.left():
            raise Bad(self.what + ": trailing bytes")


def is_word_byte(c):
    return (chr(c).isascii() and (chr(c).isalnum() or c == ord("_"))) or c >= 0x80


REG, DIR, LNK, FIFO, SOCK, CHR, BLK = range(1, 8)
TYPE_CHARS = "?-dlpscb"
S_IFMT = 0o170000
TYPE_BITS = {REG: 0o100000, DIR: 0o040000, LNK: 0o120000, FIFO: 0o010000, SOCK: 0o140000,
             CHR: 0o020000, BLK: 0o060000}
TYPE_OF_BITS = {v: k for k, v in TYPE_BITS.items()}


def path_key(p):
    # archive path order: a directory's descendants follow it directly ('/' sorts first)
    return p.split(b"/")


def read_archive(path):
    data = open(path, "rb").read()
    if len(data) < 40:
        raise Bad("too short to be an archive")
    hdr = data[:40]
    if hdr[:8] != b"TADOCFS\0":
        raise Bad("bad magic")
    if xxh3(hdr[:32]) != u64(hdr, 32):
        raise Bad("header checksum mismatch")
    version, toff, nsec = u32(hdr, 8), u64(hdr, 16), u32(hdr, 24)
    if not 1 <= version <= 3:
        raise Bad("unsupported version %d" % version)
    tlen = nsec * 40 + 8
    if not 4 <= nsec <= 8 or toff < 40 or toff + tlen != len(data):
        raise Bad("section table is not at the end of the file")
    tab = data[toff:toff + tlen]
    if xxh3(tab[:-8]) != u64(tab, tlen - 8):
        raise Bad("section table checksum mismatch")
    secs = {}
    for i in range(nsec):
        e = tab[40 * i:40 * i + 40]
        typ, codec, off, stored, raw, h = (u32(e, 0), u32(e, 4), u64(e, 8), u64(e, 16),
                                           u64(e, 24), u64(e, 32))
        if typ != i + 1 or codec > 1 or off < 40 or off + stored > toff:
            raise Bad("section %d has a bad table entry" % i)
        body = data[off:off + stored]
        if xxh3(body) != h:
            raise Bad("section %d: checksum mismatch" % typ)
        if codec == 0:
            if raw != stored:
                raise Bad("raw section with two sizes")
        else:
            body = unzstd(body, raw)
        secs[typ] = body
    a = {"version": version}
    # dictionary
    r = Reader(secs[1], "dictionary")
    count = r.varint()
    lens = [r.varint() for _ in range(count)]
    if any(n == 0 or n > 1024 for n in lens):
        raise Bad("dictionary: bad token length")
    if sum(lens) != r.left():
        raise Bad("dictionary: blob size")
    toks = [r.bytes(n) for n in lens]
    for t in toks:
        if len({is_word_byte(c) for c in t}) != 1:
            raise Bad("dictionary: token mixes word and separator bytes")
    a["toks"] = toks
    # rules
    r = Reader(secs[2], "rules")
    nrules = r.varint()
    rlens = [r.varint() for _ in range(nrules)]
    if any(n == 0 for n in rlens):
        raise Bad("rules: empty rule")
    flat = r.syms(sum(rlens))
    r.end()
    rules, k = [None], 0
    for n in rlens:
        rules.append(flat[k:k + n])
        k += n
    nt = len(toks)
    for body in rules[1:]:
        for s in body:
            if s >= nt and not 1 <= s - nt <= nrules:
                raise Bad("rules: reference out of range")
    a["rules"] = rules
    # root
    r = Reader(secs[3], "root")
    root = r.syms(r.varint())
    r.end()
    for s in root:
        if s >= nt and not 1 <= s - nt <= nrules:
            raise Bad("root: reference out of range")
    a["root"] = root
    # file table
    r = Reader(secs[4], "file table")
    if version >= 2:
        a["id"], a["prev_id"], a["next_ino"] = r.u64(), r.u64(), r.varint()
    else:
        a["id"] = u64(tab, tlen - 8) | 1
        a["prev_id"] = 0
    ents = []
    for i in range(r.varint()):
        e = {"path": r.string(), "type": r.byte(), "mode": r.varint(), "uid": r.varint(),
             "gid": r.varint(), "mtime": r.zigzag(), "nsec": r.varint(), "size": r.varint(),
             "root_start": r.varint(), "root_len": r.varint(), "hash": r.u64(),
             "link": r.string(), "ino": i + 1, "rdev": 0, "xattrs": {}}
        if version >= 2:
            e["ino"] = r.varint()
        if version >= 3 and e["type"] in (CHR, BLK):
            e["rdev"] = r.varint()
        if version >= 2:
            for _ in range(r.varint()):
                name = r.string()
                e["xattrs"][name] = r.string()
        if e["type"] not in TYPE_BITS or (version < 3 and e["type"] > LNK):
            raise Bad("unknown type")
        if e["mode"] > 0o7777 or e["nsec"] >= 10**9:
            raise Bad("bad mode or time")
        if e["type"] != REG and e["root_len"]:
            raise Bad("root run on a non-file")
        if e["type"] == REG and e["root_start"] + e["root_len"] > len(root):
            raise Bad("root run outside the root")
        if (e["type"] == LNK) != (e["link"] != b"") or (
                e["type"] == LNK and e["size"] != len(e["link"])):
            raise Bad("bad symlink")
        ents.append(e)
    r.end()
    if version < 2:
        a["next_ino"] = len(ents) + 1
    if not ents or ents[0]["path"] != b"" or ents[0]["type"] != DIR or ents[0]["ino"] != 1:
        raise Bad("first entry is not the root directory")
    for p, q in zip(ents, ents[1:]):
        if path_key(p["path"]) >= path_key(q["path"]):
            raise Bad("paths out of order")
    a["ents"] = ents
    return a


def expand(a, syms, memo):
    out = []
    nt, toks = len(a["toks"]), a["toks"]
    for s in syms:
        if s < nt:
            out.append(toks[s])
        else:
            r = s - nt
            if r not in memo:
                memo[r] = None  # a cycle would find this marker
                memo[r] = expand(a, a["rules"][r], memo)
            if memo[r] is None:
                raise Bad("rules: cycle")
            out.append(memo[r])
    return b"".join(out)


def contents(a):
    """Content of every inode that has some, by inode number: the first entry (in path order)
    of each inode number holds it."""
    memo, content = {}, {}
    ents = a["ents"]
    if MISTAKE == "order":
        ents = list(reversed(ents))
    for e in ents:
        if e["type"] != REG or e["ino"] in content:
            continue
        b = expand(a, a["root"][e["root_start"]:e["root_start"] + e["root_len"]], memo)
        if len(b) != e["size"] or xxh3(b) != e["hash"]:
            raise Bad("%s: content does not match its size and hash" % e["path"].decode())
        content[e["ino"]] = b
    return content


# ---------------- the tree: nodes by inode number ----------------

def model(a):
    content = contents(a)
    nodes, by_path = {}, {}
    for e in a["ents"]:
        n = nodes.get(e["ino"])
        if n:
            n["nlink"] += 1
        else:
            n = nodes[e["ino"]] = {
                "mode": TYPE_BITS[e["type"]] | e["mode"], "uid": e["uid"], "gid": e["gid"],
                "mtime": (e["mtime"], e["nsec"]), "size": e["size"], "rdev": e["rdev"],
                "link": e["link"], "xattrs": dict(e["xattrs"]), "nlink": 1,
                "data": content.get(e["ino"], b""), "kids": {}}
        if e["path"]:
            parent, _, name = e["path"].rpartition(b"/")
            if parent not in by_path or not is_dir(nodes[by_path[parent]]):
                raise Bad("%s has no parent directory" % e["path"].decode())
            nodes[by_path[parent]]["kids"][name] = e["ino"]
        by_path[e["path"]] = e["ino"]
    return nodes


def is_dir(n):
    return n["mode"] & S_IFMT == 0o040000


def listing(nodes, out):
    def line(path, ino):
        n = nodes[ino]
        nlink = 2 + sum(is_dir(nodes[k]) for k in n["kids"].values()) if is_dir(n) else n["nlink"]
        typ = TYPE_CHARS[TYPE_OF_BITS[n["mode"] & S_IFMT]]
        xa = ",".join(k.decode() + "=" + v.hex() for k, v in sorted(n["xattrs"].items()))
        out.write("%s\t%s\t%04o\t%d\t%d\t%d\t%d.%09d\t%d\t%d\t%d\t%s\t%s\t%s\n" % (
            path, typ, n["mode"] & 0o7777, n["uid"], n["gid"], n["size"], n["mtime"][0],
            n["mtime"][1], ino, nlink, n["rdev"], n["link"].hex() if typ == "l" else "-",
            xa or "-", n["data"].hex() if typ == "-" else "-"))
        if is_dir(n):
            for name in sorted(n["kids"]):
                line((path + "/" if path != "." else "") + name.decode("utf-8", "surrogateescape"),
                     n["kids"][name])
    line(".", 1)


# ---------------- the journal ----------------

TYPES = [None, "create", "link", "unlink", "rename", "setattr", "truncate", "write", "insert",
         "setxattr", "rmxattr"]


def read_journal(path, a):
    """The records that replay, as (seq, type name, body length, fields)."""
    try:
        data = open(path, "rb").read()
    except FileNotFoundError:
        return []
    if len(data) < 32 or data[:8] != b"TDCJRNL\0" or xxh3(data[:24]) != u64(data, 24) \
            or u32(data, 8) != 1:
        raise Bad("journal header is damaged")
    owner = u64(data, 16)
    if a["prev_id"] and owner == a["prev_id"]:
        return []  # already folded in by a compaction
    if owner != a["id"]:
        raise Bad("journal belongs to another archive")
    recs, off, seq = [], 32, 0
    while len(data) - off >= 24:
        blen, typ, s = u32(data, off), u32(data, off + 4), u64(data, off + 8)
        if blen > 64 << 20 or off + 24 + blen > len(data):
            break
        if xxh3(data[off:off + 16 + blen]) != u64(data, off + 16 + blen):
            break
        if s != seq + 1 or not 1 <= typ <= 10:
            break
        recs.append((s, TYPES[typ], blen, fields(TYPES[typ], data[off + 16:off + 16 + blen])))
        seq = s
        off += 24 + blen
    return recs


def fields(typ, body):
    r = Reader(body, typ)
    t = lambda: (r.zigzag(), r.varint())  # noqa: E731 (a time: zigzag seconds, nanoseconds)
    if typ == "create":
        f = dict(ino=r.varint(), parent=r.varint(), mode=r.varint(), uid=r.varint(),
                 gid=r.varint(), time=t(), name=r.string(), link=r.string())
        f["rdev"] = r.varint() if r.left() else 0
    elif typ == "link":
        f = dict(ino=r.varint(), parent=r.varint(), time=t(), name=r.string())
    elif typ == "unlink":
        f = dict(parent=r.varint(), time=t(), name=r.string())
    elif typ == "rename":
        f = dict(parent=r.varint(), newparent=r.varint(), flags=r.varint(), time=t(),
                 name=r.string(), newname=r.string())
    elif typ == "setattr":
        f = dict(ino=r.varint(), valid=r.varint(), mode=r.varint(), uid=r.varint(),
                 gid=r.varint(), atime=t(), mtime=t(), time=t())
    elif typ == "truncate":
        f = dict(ino=r.varint(), size=r.varint(), time=t())
    elif typ in ("write", "insert"):
        f = dict(ino=r.varint(), off=r.varint(), time=t())
        f["data"] = r.bytes(r.left())
    else:
        f = dict(ino=r.varint(), time=t(), name=r.string())
        if typ == "setxattr":
            f["value"] = r.bytes(r.left())
    r.end()
    return f


def apply(nodes, typ, f):
    def touch_content(n):
        n["mtime"] = f["time"]

    def drop(n):
        n["nlink"] -= 1

    if typ == "create":
        mode = f["mode"]
        n = nodes[f["ino"]] = {
            "mode": mode, "uid": f["uid"], "gid": f["gid"], "mtime": f["time"], "rdev": f["rdev"],
            "link": f["link"], "xattrs": {}, "nlink": 1, "data": b"", "kids": {},
            "size": len(f["link"]) if mode & S_IFMT == 0o120000 else
            4096 if mode & S_IFMT == 0o040000 else 0}
        d = nodes[f["parent"]]
        d["kids"][f["name"]] = f["ino"]
        touch_content(d)
    elif typ == "link":
        d = nodes[f["parent"]]
        d["kids"][f["name"]] = f["ino"]
        nodes[f["ino"]]["nlink"] += 1
        touch_content(d)
    elif typ == "unlink":
        d = nodes[f["parent"]]
        drop(nodes[d["kids"].pop(f["name"])])
        touch_content(d)
    elif typ == "rename":
        d1, d2 = nodes[f["parent"]], nodes[f["newparent"]]
        a_ino, b_ino = d1["kids"][f["name"]], d2["kids"].get(f["newname"])
        if a_ino == b_ino:
            return
        if f["flags"] & 2:  # exchange
            d1["kids"][f["name"]], d2["kids"][f["newname"]] = b_ino, a_ino
        else:
            if b_ino is not None:
                drop(nodes[b_ino])
            del d1["kids"][f["name"]]
            d2["kids"][f["newname"]] = a_ino
        touch_content(d1)
        touch_content(d2)
    elif typ == "setattr":
        n = nodes[f["ino"]]
        v = f["valid"]
        if v & 1:
            n["mode"] = n["mode"] & S_IFMT | f["mode"] & 0o7777
        if v & 2:
            n["uid"] = f["uid"]
        if v & 4:
            n["gid"] = f["gid"]
        if v & 32:
            n["mtime"] = f["mtime"]
    elif typ == "truncate":
        n = nodes[f["ino"]]
        n["data"] = n["data"][:f["size"]].ljust(f["size"], b"\0")
        n["size"] = f["size"]
        touch_content(n)
    elif typ in ("write", "insert"):
        n = nodes[f["ino"]]
        d, off, new = n["data"], f["off"], f["data"]
        if typ == "insert":
            d = d[:off] + new + d[off:]
        else:
            d = d.ljust(off, b"\0")
            d = d[:off] + new + d[off + len(new):]
        n["data"], n["size"] = d, len(d)
        touch_content(n)
    elif typ == "setxattr":
        nodes[f["ino"]]["xattrs"][f["name"]] = f["value"]
    elif typ == "rmxattr":
        del nodes[f["ino"]]["xattrs"][f["name"]]


def show(v):
    if isinstance(v, bytes):
        return v.hex()
    if isinstance(v, tuple):
        return "%d.%09d" % v
    return str(v)


def main(argv):
    if len(argv) < 3:
        sys.stderr.write(__doc__)
        return 2
    cmd, path = argv[1], argv[2]
    a = read_archive(path)
    out = sys.stdout
    if cmd in ("tree", "archive"):
        nodes = model(a)
        if cmd == "tree":
            for _, typ, _, f in read_journal(path + ".journal", a):
                apply(nodes, typ, f)
        listing(nodes, out)
    elif cmd == "ls":
        for e in a["ents"][1:]:
            out.write("%s%04o %5d %5d %12d %s %s%s\n" % (
                TYPE_CHARS[e["type"]], e["mode"], e["uid"], e["gid"], e["size"],
                time.strftime("%Y-%m-%d %H:%M", time.gmtime(e["mtime"])),
                e["path"].decode("utf-8", "surrogateescape"),
                " -> " + e["link"].decode("utf-8", "surrogateescape") if e["type"] == LNK else ""))
    elif cmd == "cat":
        ino = [e["ino"] for e in a["ents"] if e["path"] == argv[3].encode()][0]
        sys.stdout.buffer.write(contents(a)[ino])
    elif cmd == "records":
        for s, typ, blen, f in read_journal(path + ".journal", a):
            out.write("%d\t%s\t%d\t%s\n" % (s, typ, blen, " ".join(
                "%s=%s" % (k, show(v)) for k, v in f.items())))
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except Bad as e:
        sys.stderr.write("readfmt: %s\n" % e)
        sys.exit(3)
