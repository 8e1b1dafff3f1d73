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
       readfmt.py times ARCHIVE    "path<TAB>atime<TAB>mtime<TAB>ctime" (SEC.NSEC) of every
                                   entry of the file table (the root as "."), in its order
       readfmt.py long ARCHIVE     "header H, shards S": what the header's flags record of
                                   words of 1024 bytes or more (yes, no, unrecorded) and
                                   whether a shard's dictionary holds such a word (yes, no)
       readfmt.py each tree|archive|records ARCHIVE...
                                   that command on each archive, its output to ARCHIVE.tree
                                   (.archive, .records) and its message to that name plus
                                   .err; on stdout a line per archive: the exit status a run
                                   of it alone has, a tab, its path
The tree listing is the one tests/tools/fmtdump prints (see there). Every rule FORMAT.md
gives for a valid archive and for a journal record that applies is checked: exit 3 when the
archive or journal breaks one, with a message on stderr.

READFMT_MISTAKE=planes|varint|order makes the reader get one detail wrong on purpose (symbols
read as interleaved little-endian u32 instead of byte planes; varints read big-endian; hard
link content taken from the last name), so the test can show that such a reader disagrees.
"""
import os
import subprocess
import sys
import tempfile
import time

MISTAKE = os.environ.get("READFMT_MISTAKE", "")


class Bad(Exception):
    pass


def xxh3(data):
    out = subprocess.run(["xxhsum", "-H3", "-"], input=data, stdout=subprocess.PIPE,
                         check=True).stdout.decode().split()
    # "XXH3 (stdin) = HEX" (BSD style) or "HEX  stdin" (GNU style): the value is big-endian hex
    return int(out[-1] if "=" in out else out[0], 16)


def xxh3_many(blobs):
    """XXH3-64 of several byte strings with one xxhsum process (files in a temporary folder)."""
    if len(blobs) < 2:
        return [xxh3(b) for b in blobs]
    with tempfile.TemporaryDirectory() as d:
        names = []
        for i, b in enumerate(blobs):
            names.append(os.path.join(d, str(i)))
            with open(names[-1], "wb") as f:
                f.write(b)
        out = subprocess.run(["xxhsum", "-H3"] + names, stdout=subprocess.PIPE,
                             check=True).stdout.decode().splitlines()
    vals = {}
    for line in out:
        w = line.split()
        if "=" in w:  # XXH3 (NAME) = HEX
            vals[line[line.index("(") + 1:line.rindex(")")]] = int(w[-1], 16)
        else:  # HEX  NAME
            vals[line.split(None, 1)[1].strip()] = int(w[0], 16)
    return [vals[n] for n in names]


def unzstd(data, size):
    out = subprocess.run(["zstd", "-d", "-c", "-q"], input=data, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
    if out.returncode != 0 or (size is not None and len(out.stdout) != size):
        raise Bad("zstd section does not decompress to its declared size")
    return out.stdout


def put_varint(x):
    out = bytearray()
    while True:
        if x < 0x80:
            out.append(x)
            return bytes(out)
        out.append(x & 0x7F | 0x80)
        x >>= 7


def unfront(data, size):
    # codec 2: a zstd frame of the front coding (count; per token the shared prefix length
    # and the rest length; then all the rests), back to the plain dictionary layout of
    # `size` bytes (count, per token its length, the token bytes)
    fc = unzstd(data, None)
    if len(fc) > 3 * size + 16:
        raise Bad("zstd section does not decompress to its declared size")
    r = Reader(fc, "dictionary")
    count = r.varint()
    if count > len(fc):
        raise Bad("dictionary: bad token count in the front coding")
    pairs = [(r.varint(), r.varint()) for _ in range(count)]
    toks, prev = [], b""
    for pre, rest in pairs:
        if pre > len(prev):
            raise Bad("dictionary: front coding prefix longer than the previous token")
        prev = prev[:pre] + r.bytes(rest)
        toks.append(prev)
    if r.left():
        raise Bad("dictionary: front coding does not match the declared size")
    plain = put_varint(count) + b"".join(put_varint(len(t)) for t in toks) + b"".join(toks)
    if len(plain) != size:
        raise Bad("dictionary: front coding does not match the declared size")
    return plain


M64 = (1 << 64) - 1


def zig(d):
    d &= M64
    return (d << 1 ^ (M64 if d >> 63 else 0)) & M64


def unzig(z):
    return z >> 1 ^ (M64 if z & 1 else 0)


def escaped(name):
    """A name as `tadoc ls` writes it: \\t \\n \\\\ and \\xHH for the other control bytes."""
    out = []
    for b in name:
        out.append({9: "\\t", 10: "\\n", 92: "\\\\"}.get(b) or
                   ("\\x%02x" % b if b < 32 or b == 127 else bytes([b]).decode("latin-1")))
    return "".join(out).encode("latin-1").decode("utf-8", "surrogateescape")


def uncols(data, size, version):
    # codec 5, a file table of version 4 on only: a zstd frame of its columns, back to the rows of
    # `size` bytes. Header as the rows have it (id, prev_id, next_ino, count), the byte length
    # of each of the 15 columns, then the columns; entry by entry, each field is read from its
    # column and written as the row has it.
    cs = unzstd(data, None)
    if len(cs) > 3 * size + 256:
        raise Bad("zstd section does not decompress to its declared size")
    r = Reader(cs, "file table")
    ident, prev_id, next_ino, count = r.u64(), r.u64(), r.varint(), r.varint()
    lens = [r.varint() for _ in range(15)]
    if sum(lens) != r.left() or lens[2] != count:
        raise Bad("file table: columns do not match their lengths")
    c = []
    for n in lens:
        c.append(Reader(r.bytes(n), "file table"))
    pre_c, suf_c, type_c, mode_c, own_c, mt_c, ns_c, size_c, sh_c, st_c, len_c, hash_c, \
        link_c, ino_c, extra_c = c
    out = bytearray(ident.to_bytes(8, "little") + prev_id.to_bytes(8, "little") +
                    put_varint(next_ino) + put_varint(count))
    path, mtime, shard, ino, end, end_shard = b"", 0, 0, 0, 0, 0
    for _ in range(count):
        pre = pre_c.varint()
        if pre > len(path):
            raise Bad("file table: shared prefix longer than the previous path")
        path = path[:pre] + suf_c.string()
        typ = type_c.byte()
        mode, uid, gid = mode_c.varint(), own_c.varint(), own_c.varint()
        mtime = (mtime + unzig(mt_c.varint())) & M64
        nsec, fsize = ns_c.varint(), size_c.varint()
        shard = (shard + unzig(sh_c.varint())) & M64
        guess = end if typ == REG and shard == end_shard else 0
        start = (guess + unzig(st_c.varint())) & M64
        rlen, h, link = len_c.varint(), hash_c.bytes(8), link_c.string()
        ino = (ino + 1 + unzig(ino_c.varint())) & M64
        x0 = extra_c.p
        if typ in (CHR, BLK):
            extra_c.varint()
        for _ in range(extra_c.varint()):
            extra_c.string()
            extra_c.string()
        if version >= 5:  # the change and access times
            for _ in range(4):
                extra_c.varint()
        extra = extra_c.b[x0:extra_c.p]
        if typ == REG and rlen:
            end, end_shard = (start + rlen) & M64, shard
        out += put_varint(len(path)) + path + bytes([typ]) + put_varint(mode) + \
            put_varint(uid) + put_varint(gid) + put_varint(zig(mtime)) + put_varint(nsec) + \
            put_varint(fsize) + put_varint(shard) + put_varint(start) + put_varint(rlen) + h + \
            put_varint(len(link)) + link + put_varint(ino) + extra
    if any(x.left() for x in c) or len(out) != size:
        raise Bad("file table: columns that do not make the declared rows")
    return bytes(out)


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


def check_path(p):
    if p.startswith(b"/"):
        raise Bad("absolute path")
    for c in p.split(b"/"):
        if c in (b"", b".", b".."):
            raise Bad("unsafe path component in %r" % p)


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
    if not 1 <= version <= 5:
        raise Bad("unsupported version %d" % version)
    tlen = nsec * 40 + 8
    if nsec < 4 or toff < 40 or toff + tlen != len(data):
        raise Bad("section table is not at the end of the file")
    tab = data[toff:toff + tlen]
    if xxh3(tab[:-8]) != u64(tab, tlen - 8):
        raise Bad("section table checksum mismatch")
    # the types the table must hold, in order: versions 1-3 one grammar (1, 2, 3) and the file
    # table (4); version 4 a dictionary, rules and root per shard, the file table, the shard table
    if version < 4:
        if nsec != 4:
            raise Bad("%d sections where version %d has 4" % (nsec, version))
        want = [1, 2, 3, 4]
    else:
        if nsec < 5 or (nsec - 2) % 3:
            raise Bad("%d sections: not three per shard and two more" % nsec)
        want = [1 + i % 3 for i in range(nsec - 2)] + [4, 5]
    nshards = (nsec - 2) // 3 if version >= 4 else 1
    entries = []
    for i in range(nsec):
        e = tab[40 * i:40 * i + 40]
        entries.append((u32(e, 0), u32(e, 4), u64(e, 8), u64(e, 16), u64(e, 24), u64(e, 32)))
        typ, codec, off, stored, raw, h = entries[-1]
        # codecs: 0 raw, 1 zstd (any section), 2 zstd-front (dictionary), 3 kind and
        # 4 zstd-kind (rules and root: the kind layout, stored raw or as a zstd frame),
        # 5 zstd-cols (a version 4 file table in columns), 6 zstd-text and 7 zstd-bare (a
        # version 4 shard's three sections: its text, with or without token references)
        if typ != want[i] or codec > 7 or off < 40 or off + stored > toff or \
                (codec == 2 and typ != 1) or (codec in (3, 4) and typ not in (2, 3)) or \
                (codec == 5 and (typ != 4 or version < 4)) or \
                (codec in (6, 7) and (typ > 3 or version < 4)):
            raise Bad("section %d has a bad table entry" % i)
    kinded = [entries[3 * k + 1][1] in (3, 4) for k in range(nshards)]
    if any(kinded[k] != (entries[3 * k + 2][1] in (3, 4)) for k in range(nshards)):
        raise Bad("a shard's rules and root disagree on the kind layout")
    text = [entries[3 * k][1] if entries[3 * k][1] in (6, 7) else 0 for k in range(nshards)]
    if any({entries[3 * k + j][1] for j in range(3)} != {text[k]} for k in range(nshards)
           if text[k] or any(entries[3 * k + j][1] in (6, 7) for j in range(3))):
        raise Bad("a shard stored as its text has another codec on a section")
    # the tables are read first (as a mount does), then the grammars
    order = list(range(nsec - 2, nsec)) + list(range(nsec - 2)) if version >= 4 \
        else [3, 0, 1, 2]
    sums = xxh3_many([data[entries[i][2]:entries[i][2] + entries[i][3]] for i in order])
    secs = [None] * nsec
    for i, got in zip(order, sums):
        typ, codec, off, stored, raw, h = entries[i]
        empty = codec in (6, 7) and typ != 1  # a text shard's rules and root hold nothing
        if raw > 1 << 40 or ((codec in (0, 3) or empty) and raw != stored):
            raise Bad("section %d: impossible size" % i)
        body = data[off:off + stored]
        if got != h:
            raise Bad("section %d: checksum mismatch" % i)
        secs[i] = body if codec in (0, 3) or empty else \
            unzstd(body, raw) if codec in (1, 4, 6, 7) else \
            unfront(body, raw) if codec == 2 else uncols(body, raw, version)
    a = {"version": version, "flags": u32(hdr, 12)}
    if version >= 4:
        shards = read_shards(secs[nsec - 1], nshards)
        files = secs[nsec - 2]
    else:
        shards = None
        files = secs[3]
    read_files(a, files, version, tab, tlen, shards)
    # each shard's grammar, with its own dictionary and rule numbering
    a["shards"] = []
    off = 0
    for k in range(nshards):
        g = text_grammar(secs[3 * k], text[k] == 7) if text[k] else \
            read_grammar(secs[3 * k], secs[3 * k + 1], secs[3 * k + 2], kinded[k])
        if shards and (len(g["root"]), len(g["toks"]), len(g["rules"]) - 1) != shards[k][1:]:
            raise Bad("shard %d: grammar does not match the shard table" % k)
        g["off"], g["index"] = off, k
        off += len(g["root"])
        a["shards"].append(g)
    a["root_syms"] = off
    if sum(g["ln"][0] for g in a["shards"]) > 1 << 62:
        raise Bad("root: expansion overflows")
    for e in a["ents"]:
        if e["type"] == REG and e["root_start"] + e["root_len"] > off:
            raise Bad("root run outside the root")
    first = {}
    for e in a["ents"]:
        if e["type"] == REG and e["ino"] not in first:
            first[e["ino"]] = e
            if sum(g["ln"][0] for g in pieces(a, e, True)) != e["size"]:
                raise Bad("%s: run does not expand to its size" % e["path"].decode())
    return a


def read_shards(sec, nshards):
    """Version 4's shard table: (content bytes, root symbols, tokens, rules) per shard."""
    r = Reader(sec, "shard table")
    if r.varint() != nshards:
        raise Bad("shard table: shard count does not match the sections")
    out = []
    for k in range(nshards):
        s = (r.varint(), r.varint(), r.varint(), r.varint())
        if s[2] > 0x7FFFFFFF or s[2] + s[3] + 1 > 0xFFFFFFFF or s[1] > 1 << 56:
            raise Bad("shard table: shard %d is malformed" % k)
        out.append(s)
    r.end()
    return out


def pieces(a, e, lengths=False):
    """A file's run cut at the shards it crosses: (shard grammar, symbols) per shard, or with
    `lengths`, {"ln": [expanded length]} per piece."""
    out = []
    start, left = e["root_start"], e["root_len"]
    for g in a["shards"]:
        n = len(g["root"])
        if left and start < g["off"] + n:
            lo = max(start - g["off"], 0)
            syms = g["root"][lo:lo + left]
            left -= len(syms)
            if lengths:
                nt = len(g["toks"])
                out.append({"ln": [sum(g["lens"][s_] if s_ < nt else g["ln"][s_ - nt]
                                       for s_ in syms)]})
            else:
                out.append((g, syms))
    return out


def tokens(text):
    """Maximal runs of word bytes and of the other bytes, cut into pieces of 1024 bytes."""
    out, i, n = [], 0, len(text)
    while i < n:
        w, j = is_word_byte(text[i]), i + 1
        while j < n and j - i < 1024 and is_word_byte(text[j]) == w:
            j += 1
        out.append(text[i:j])
        i = j
    return out


def text_grammar(payload, bare):
    """A shard stored as its text (codec 6, or 7 for `bare`): each piece tokenized alone, ids
    in order of first appearance, no rules. Codec 6 has a reference per long token (three
    bytes or more): 0 for a new one, else how many long tokens back the same bytes came; its
    short tokens, and codec 7's every token, are known by their bytes."""
    r = Reader(payload, "text shard")
    count = r.varint()
    if not 1 <= count <= len(payload):
        raise Bad("text shard: bad piece count")
    lens = [r.varint() for _ in range(count)]
    if any(n == 0 for n in lens) or sum(lens) > r.left():
        raise Bad("text shard: bad piece lengths")
    toks, known, root, longs = [], {}, [], []
    pieces_ = [r.bytes(n) for n in lens]  # the references follow all of them
    for piece in pieces_:
        for t in tokens(piece):
            if bare or len(t) <= 2:
                if t not in known:
                    known[t] = len(toks)
                    toks.append(t)
                root.append(known[t])
                continue
            d = r.varint()
            if d == 0:
                toks.append(t)
                root.append(len(toks) - 1)
            elif d > len(longs) or toks[longs[-d]] != t:
                raise Bad("text shard: a reference past the long tokens or to other bytes")
            else:
                root.append(longs[-d])
            longs.append(root[-1])
    r.end()
    return {"toks": toks, "lens": [len(t) for t in toks], "rules": [[]], "root": root,
            "ln": [sum(len(toks[s_]) for s_ in root)]}


def read_grammar(sdict, srules, sroot, kinded):
    g = {}
    # dictionary
    r = Reader(sdict, "dictionary")
    count = r.varint()
    if count > 0x7FFFFFFF or count > len(sdict):
        raise Bad("dictionary: bad token count")
    lens = [r.varint() for _ in range(count)]
    if any(n == 0 or n > 1024 for n in lens):
        raise Bad("dictionary: bad token length")
    if sum(lens) != r.left():
        raise Bad("dictionary: blob size")
    toks = [r.bytes(n) for n in lens]
    for t in toks:
        if len({is_word_byte(c) for c in t}) != 1:
            raise Bad("dictionary: token mixes word and separator bytes")
    g["toks"], g["lens"] = toks, lens
    nt = len(toks)
    # rules
    n = len(srules)
    r = Reader(srules, "rules")
    nrules = r.varint()
    if nrules > n or nt + nrules + 1 > 0xFFFFFFFF:
        raise Bad("rules: bad rule count")
    rlens = [r.varint() for _ in range(nrules)]
    if any(k == 0 or k > n for k in rlens):
        raise Bad("rules: bad rule length")
    if kinded:
        kinds = Kinds(r, toks, nrules)
        flat = kinds.symbols(r, [(m, kinds.first(nt + 1 + i)) for i, m in enumerate(rlens)],
                             "rules")
    else:
        if 4 * sum(rlens) > r.left():
            raise Bad("rules: symbol count too large")
        flat = r.syms(sum(rlens))
    r.end()
    rules, k = [None], 0
    for m in rlens:
        rules.append(flat[k:k + m])
        k += m
    for body in rules[1:]:
        for s_ in body:
            if s_ >= nt and not 1 <= s_ - nt <= nrules:
                raise Bad("rules: reference out of range")
    if kinded:
        kinds.check(rules)
    g["rules"] = rules
    order = topo(rules, nt)
    # root
    r = Reader(sroot, "root")
    cnt = r.varint()
    if kinded:
        root = kinds.symbols(r, [(cnt, 1)], "root")
    else:
        if 4 * cnt > r.left():
            raise Bad("root: symbol count too large")
        root = r.syms(cnt)
    r.end()
    for s_ in root:
        if s_ >= nt and not 1 <= s_ - nt <= nrules:
            raise Bad("root: reference out of range")
    g["root"] = root
    # expanded lengths (children first), each at most 2^62
    ln = [0] * (nrules + 1)
    for rr in order + [0]:
        total = 0
        for s_ in (rules[rr] if rr else root):
            total += lens[s_] if s_ < nt else ln[s_ - nt]
            if total > 1 << 62:
                raise Bad("rules: expansion of rule %d overflows" % rr)
        ln[rr] = total
    g["ln"] = ln
    return g


class Kinds:
    """The kind layout of a shard's rules and root: each rule's kind bits (1: its first token
    is a word, 2: its last), then which numbers of each kind are tokens and which rules."""

    def __init__(self, r, toks, nrules):
        nt = len(toks)
        self.nt = nt
        kb = r.bytes(nrules)
        if any(b > 3 for b in kb):
            raise Bad("rules: bad rule kinds")
        # kind bits per symbol id: tokens 0..nt-1, (nt unused), rules nt+1..nt+nrules
        self.kind = [3 if is_word_byte(t[0]) else 0 for t in toks] + [0] + list(kb)
        bits = r.bytes((nt + nrules + 7) // 8)
        self.mem, at = [], 0
        for c in (0, 1):
            # a set bit takes the kind's next rule, a clear one its next token
            lists = ([s for s in range(nt) if self.kind[s] & 1 == c],
                     [s for s in range(nt + 1, nt + nrules + 1) if self.kind[s] & 1 == c])
            took, mem = [0, 0], []
            for _ in range(len(lists[0]) + len(lists[1])):
                rule = bits[at // 8] >> (at % 8) & 1
                at += 1
                if took[rule] >= len(lists[rule]):
                    raise Bad("rules: a kind lists more %s than it has" %
                              ("rules" if rule else "tokens"))
                mem.append(lists[rule][took[rule]])
                took[rule] += 1
            self.mem.append(mem)
        while at % 8:
            if bits[at // 8] >> (at % 8) & 1:
                raise Bad("rules: padding bits set")
            at += 1

    def first(self, s):
        return self.kind[s] & 1

    def symbols(self, r, bodies, what):
        """Decode bodies given as (length, first expected kind): numbers within the expected
        kind, which the previous symbol's last token flips; the number one past a kind's last
        is an escape to the other kind. Numbers come from two streams, one per kind they are
        read in: kind 0's as varints, kind 1's as byte planes."""
        total = sum(m for m, _ in bodies)
        n0, b0 = r.varint(), r.varint()
        if n0 > b0:
            raise Bad(what + ": bad separator-kind numbers")
        vr = Reader(r.bytes(b0), what)
        s0 = [vr.varint() for _ in range(n0)]
        vr.end()
        if any(x > 0xFFFFFFFF for x in s0):
            raise Bad(what + ": bad separator-kind numbers")
        n1 = r.varint()
        if 4 * n1 > r.left():
            raise Bad(what + ": symbol count too large")
        streams = [s0, r.syms(n1)]
        if n0 + n1 < total or n0 + n1 - total > total:
            raise Bad(what + ": bad coded symbol count")
        at, out = [0, 0], []
        for m, want in bodies:
            for _ in range(m):
                c = want
                if at[c] >= len(streams[c]):
                    raise Bad(what + ": fewer coded symbols than symbols")
                x = streams[c][at[c]]
                at[c] += 1
                if x == len(self.mem[c]):
                    c = 1 - c
                    if at[c] >= len(streams[c]):
                        raise Bad(what + ": nothing follows an escape")
                    x = streams[c][at[c]]
                    at[c] += 1
                if x >= len(self.mem[c]):
                    raise Bad(what + ": symbol number out of range")
                s = self.mem[c][x]
                out.append(s)
                want = 0 if self.kind[s] & 2 else 1
        if at != [n0, n1]:
            raise Bad(what + ": more coded symbols than symbols")
        return out

    def check(self, rules):
        for rr, body in enumerate(rules[1:], 1):
            want = (self.kind[body[0]] & 1) | (self.kind[body[-1]] & 2)
            if self.kind[self.nt + rr] != want:
                raise Bad("rules: the kinds stored for rule %d are not its body's" % rr)


def topo(rules, nt):
    """Rules 1..R children first; a cycle is an error (iterative depth-first search)."""
    state, order = [0] * len(rules), []
    for top in range(1, len(rules)):
        if state[top]:
            continue
        state[top] = 1
        stack = [(top, 0)]
        while stack:
            r, i = stack[-1]
            body = rules[r]
            while i < len(body) and (body[i] < nt or state[body[i] - nt] == 2):
                i += 1
            if i == len(body):
                state[r] = 2
                order.append(r)
                stack.pop()
                continue
            stack[-1] = (r, i + 1)
            c = body[i] - nt
            if state[c] == 1:
                raise Bad("rules: cycle through rule %d" % c)
            state[c] = 1
            stack.append((c, 0))
    return order


def read_files(a, sec, version, tab, tlen, shards=None):
    r = Reader(sec, "file table")
    if version >= 2:
        a["id"], a["prev_id"], a["next_ino"] = r.u64(), r.u64(), r.varint()
        if a["next_ino"] > 1 << 60:
            raise Bad("file table: bad header")
    else:
        a["id"] = u64(tab, tlen - 8) | 1
        a["prev_id"] = 0
    count = r.varint()
    if count == 0 or count > len(sec):
        raise Bad("file table: bad entry count")
    if version < 2:
        a["next_ino"] = count + 1

    def string():
        v = r.string()
        if b"\0" in v:
            raise Bad("file table: NUL byte in a string")
        return v

    ents = []
    for i in range(count):
        e = {"path": string(), "type": r.byte(), "mode": r.varint(), "uid": r.varint(),
             "gid": r.varint(), "mtime": r.zigzag(), "nsec": r.varint(), "size": r.varint(),
             "shard": r.varint() if version >= 4 else 0,
             "root_start": r.varint(), "root_len": r.varint(), "hash": r.u64(),
             "link": string(), "ino": i + 1, "rdev": 0, "xattrs": {}}
        if version >= 2:
            e["ino"] = r.varint()
        if version >= 3 and e["type"] in (CHR, BLK):
            e["rdev"] = r.varint()
        if version >= 2:
            nx = r.varint()
            if nx > r.left():
                raise Bad("file table: bad xattr count")
            names = []
            for _ in range(nx):
                name = string()
                value = r.string()
                if not name or (names and names[-1] >= name):
                    raise Bad("file table: xattrs empty or out of order")
                names.append(name)
                e["xattrs"][name] = value
        # version 5: ctime and atime as differences from mtime (seconds, nanoseconds); before
        # it, and where they are 0, mtime's
        d = [r.zigzag() for _ in range(4)] if version >= 5 else [0, 0, 0, 0]
        e["ctime"] = (e["mtime"] + d[0], e["nsec"] + d[1])
        e["atime"] = (e["mtime"] + d[2], e["nsec"] + d[3])
        if shards is not None:
            # root_start counts from the shard's root; the run may go on through the
            # following shards' roots: from here on, positions in the archive root
            k, total = e["shard"], sum(x[1] for x in shards)
            if k >= len(shards) or e["root_start"] > shards[k][1]:
                raise Bad("file table: %r has a bad shard or root range" % e["path"])
            e["root_start"] += sum(x[1] for x in shards[:k])
            if e["root_start"] + e["root_len"] > total:
                raise Bad("file table: %r has a bad root range" % e["path"])
        ents.append(e)
    r.end()
    by_path = {}
    for i, e in enumerate(ents):
        if e["mode"] > 0o7777 or e["uid"] >= 1 << 32 or e["gid"] >= 1 << 32 \
                or not all(0 <= t[1] < 10**9 for t in (e["ctime"], e["atime"])) \
                or e["nsec"] >= 10**9:
            raise Bad("bad mode, owner or time")
        if e["type"] not in TYPE_BITS or (version < 3 and e["type"] > LNK):
            raise Bad("unknown type")
        if i == 0:
            if e["path"] != b"" or e["type"] != DIR:
                raise Bad("first entry is not the root directory")
        else:
            check_path(e["path"])
            if path_key(ents[i - 1]["path"]) >= path_key(e["path"]):
                raise Bad("paths out of order")
            if (e["type"] == LNK) != (e["link"] != b""):
                raise Bad("bad symlink target")
            if e["type"] != REG and e["root_len"]:
                raise Bad("root run on a non-file")
            if e["type"] == LNK and e["size"] != len(e["link"]):
                raise Bad("bad symlink size")
            if e["type"] > LNK and e["size"]:
                raise Bad("special file has a size")
            parent = e["path"].rpartition(b"/")[0]
            if parent not in by_path or by_path[parent]["type"] != DIR:
                raise Bad("%s has no parent directory" % e["path"].decode())
        by_path[e["path"]] = e
    if ents[0]["ino"] != 1:
        raise Bad("root is not inode 1")
    first = {}
    for e in ents:
        if not 1 <= e["ino"] < a["next_ino"]:
            raise Bad("bad inode number")
        f = first.setdefault(e["ino"], e)
        if f is not e:
            if (e["type"] != f["type"] or e["type"] == DIR or e["root_len"] or any(
                    e[k] != f[k] for k in ("size", "hash", "mode", "uid", "gid", "rdev", "link"))):
                raise Bad("%s shares an inode but differs" % e["path"].decode())
    a["ents"] = ents


def expand(g, syms, memo):
    out = []
    nt, toks = len(g["toks"]), g["toks"]
    for s in syms:
        if s < nt:
            out.append(toks[s])
        else:
            r = s - nt
            if r not in memo:
                memo[r] = expand(g, g["rules"][r], memo)
            out.append(memo[r])
    return b"".join(out)


def contents(a):
    """Content of every inode that has some, by inode number: the first entry (in path order)
    of each inode number holds it."""
    memo, content = [{} for _ in a["shards"]], {}  # expanded rules, per shard
    ents = a["ents"]
    if MISTAKE == "order":
        ents = list(reversed(ents))
    holders = []
    for e in ents:
        if e["type"] != REG or e["ino"] in content:
            continue
        b = b"".join(expand(g, syms, memo[g["index"]]) for g, syms in pieces(a, e))
        if len(b) != e["size"]:
            raise Bad("%s: content does not match its size" % e["path"].decode())
        content[e["ino"]] = b
        holders.append(e)
    for e, h in zip(holders, xxh3_many([content[e["ino"]] for e in holders])):
        if h != e["hash"]:
            raise Bad("%s: content does not match its hash" % e["path"].decode())
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
                "data": content.get(e["ino"], b""), "kids": {}, "parent": 1}
        if e["path"]:
            parent = by_path[e["path"].rpartition(b"/")[0]]
            nodes[parent]["kids"][e["path"].rpartition(b"/")[2]] = e["ino"]
            n["parent"] = parent
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
    """A record's fields, in order; Bad("malformed ...") when they cannot be read. Bytes after
    the last field are ignored (the data of WRITE and INSERT and the value of SETXATTR are
    all the remaining bytes)."""
    r = Reader(body, typ)

    def time_():  # zigzag seconds, nanoseconds
        t = (r.zigzag(), r.varint())
        if t[1] >= 10**9:
            raise Bad("malformed " + typ)
        return t

    def u32_():
        v = r.varint()
        if v >= 1 << 32:
            raise Bad("malformed " + typ)
        return v

    def str_(cap):
        v = r.string()
        if len(v) >= cap or b"\0" in v:
            raise Bad("malformed " + typ)
        return v

    try:
        if typ == "create":
            f = dict(ino=r.varint(), parent=r.varint(), mode=u32_(), uid=u32_(), gid=u32_(),
                     time=time_(), name=str_(256), link=str_(4096))
            f["rdev"] = r.varint() if r.left() else 0
        elif typ == "link":
            f = dict(ino=r.varint(), parent=r.varint(), time=time_(), name=str_(256))
        elif typ == "unlink":
            f = dict(parent=r.varint(), time=time_(), name=str_(256))
        elif typ == "rename":
            f = dict(parent=r.varint(), newparent=r.varint(), flags=u32_(), time=time_(),
                     name=str_(256), newname=str_(256))
        elif typ == "setattr":
            f = dict(ino=r.varint(), valid=u32_(), mode=u32_(), uid=u32_(), gid=u32_(),
                     atime=time_(), mtime=time_(), time=time_())
        elif typ == "truncate":
            f = dict(ino=r.varint(), size=r.varint(), time=time_())
        elif typ in ("write", "insert"):
            f = dict(ino=r.varint(), off=r.varint(), time=time_())
            f["data"] = r.bytes(r.left())
        else:
            f = dict(ino=r.varint(), time=time_(), name=str_(256))
            if typ == "setxattr":
                f["value"] = r.bytes(r.left())
    except Bad:
        raise Bad("journal record does not apply: malformed " + typ)
    return f


S_IFDIR, S_IFLNK, S_IFREG, S_IFCHR, S_IFBLK = 0o040000, 0o120000, 0o100000, 0o020000, 0o060000


def name_ok(name):
    return 0 < len(name) <= 255 and b"/" not in name and name not in (b".", b"..")


MAX_FILE = 1 << 40  # the largest file a record may make (FORMAT.md, TRUNCATE and WRITE)


def apply(st, typ, f):
    """Apply one record to the tree `st` ({"nodes": by inode, "next": next inode number}),
    refusing what the format says does not apply."""
    nodes = st["nodes"]

    def bad(what):
        raise Bad("journal record does not apply: " + what)

    def node(ino):
        return nodes.get(ino)

    def dirnode(ino):
        n = nodes.get(ino)
        return n if n and is_dir(n) else None

    def kid(d, name):
        return nodes[d["kids"][name]] if d and name in d["kids"] else None

    def ancestor(anc, ino):  # directory `anc` is `ino` or above it
        while True:
            if ino == anc:
                return True
            n = nodes.get(ino)
            if not n or ino == 1:
                return False
            ino = n["parent"]

    if typ == "create":
        d, mode, ino = dirnode(f["parent"]), f["mode"], f["ino"]
        fmt = mode & S_IFMT
        if (not d or ino in nodes or kid(d, f["name"]) or not name_ok(f["name"])
                or ino < st["next"] or ino - st["next"] > 1 << 24 or mode & ~(S_IFMT | 0o7777)
                or fmt not in TYPE_OF_BITS or (fmt == S_IFLNK) != (f["link"] != b"")
                or (f["rdev"] and fmt not in (S_IFCHR, S_IFBLK))):
            bad("create")
        nodes[ino] = {
            "mode": mode, "uid": f["uid"], "gid": f["gid"], "mtime": f["time"], "rdev": f["rdev"],
            "link": f["link"], "xattrs": {}, "nlink": 1, "data": b"", "kids": {},
            "parent": f["parent"],
            "size": len(f["link"]) if fmt == S_IFLNK else 4096 if fmt == S_IFDIR else 0}
        st["next"] = max(st["next"], ino + 1)
        d["kids"][f["name"]] = ino
        d["mtime"] = f["time"]
    elif typ == "link":
        d, n = dirnode(f["parent"]), node(f["ino"])
        if not d or not n or is_dir(n) or kid(d, f["name"]) or not name_ok(f["name"]):
            bad("link")
        d["kids"][f["name"]] = f["ino"]
        n["nlink"] += 1
        d["mtime"] = f["time"]
    elif typ == "unlink":
        d = dirnode(f["parent"])
        n = kid(d, f["name"])
        if not n or (is_dir(n) and n["kids"]):
            bad("unlink")
        del d["kids"][f["name"]]
        n["nlink"] -= 1
        d["mtime"] = f["time"]
    elif typ == "rename":
        p1, p2, x = f["parent"], f["newparent"], f["flags"] & 2  # EXCHANGE
        d1, d2 = dirnode(p1), dirnode(p2)
        a, b = kid(d1, f["name"]), kid(d2, f["newname"])
        if not a or not d2 or (x and not b) or not name_ok(f["newname"]):
            bad("rename")
        if a is b:
            return
        if (is_dir(a) and ancestor(d1["kids"][f["name"]], p2)) or (
                b and x and is_dir(b) and ancestor(d2["kids"][f["newname"]], p1)) or (
                b and not x and is_dir(a) != is_dir(b)):
            bad("rename into itself or across types")
        ai = d1["kids"][f["name"]]
        if x:
            bi = d2["kids"][f["newname"]]
            d1["kids"][f["name"]], d2["kids"][f["newname"]] = bi, ai
            if is_dir(a):
                a["parent"] = p2
            if is_dir(b):
                b["parent"] = p1
        else:
            if b:
                if is_dir(b) and b["kids"]:
                    bad("rename over a non-empty directory")
                b["nlink"] -= 1
                del d2["kids"][f["newname"]]
            del d1["kids"][f["name"]]
            d2["kids"][f["newname"]] = ai
            if is_dir(a):
                a["parent"] = p2
        d1["mtime"] = d2["mtime"] = f["time"]
    elif typ == "setattr":
        n = node(f["ino"])
        if not n:
            bad("setattr")
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
        n = node(f["ino"])
        if not n or n["mode"] & S_IFMT != S_IFREG or f["size"] > MAX_FILE:
            bad("truncate")
        n["data"] = n["data"][:f["size"]].ljust(f["size"], b"\0")
        n["size"] = f["size"]
        n["mtime"] = f["time"]
    elif typ in ("write", "insert"):
        n = node(f["ino"])
        if (not n or n["mode"] & S_IFMT != S_IFREG or (typ == "insert" and f["off"] > n["size"])
                or f["off"] + len(f["data"]) > MAX_FILE
                or (typ == "insert" and n["size"] + len(f["data"]) > MAX_FILE)):
            bad("write")
        d, off, new = n["data"], f["off"], f["data"]
        if typ == "insert":
            d = d[:off] + new + d[off:]
        else:
            d = d.ljust(off, b"\0")
            d = d[:off] + new + d[off + len(new):]
        n["data"], n["size"] = d, len(d)
        n["mtime"] = f["time"]
    else:
        n = node(f["ino"])
        if not n or not f["name"]:
            bad("xattr")
        if typ == "setxattr":
            n["xattrs"][f["name"]] = f["value"]
        elif f["name"] in n["xattrs"]:
            del n["xattrs"][f["name"]]
        else:
            bad("removexattr of a missing attribute")


def show(v):
    if isinstance(v, bytes):
        return v.hex()
    if isinstance(v, tuple):
        return "%d.%09d" % v
    return str(v)


def run(cmd, path, argv, out):
    a = read_archive(path)
    if cmd in ("tree", "archive"):
        nodes = model(a)
        if cmd == "tree":
            st = {"nodes": nodes, "next": a["next_ino"]}
            for seq, typ, _, f in read_journal(path + ".journal", a):
                try:
                    apply(st, typ, f)
                except Bad as e:
                    raise Bad("journal record %d: %s" % (seq, e))
        listing(nodes, out)
    elif cmd == "ls":
        for e in a["ents"][1:]:
            size = ("%d, %d" % (os.major(e["rdev"]), os.minor(e["rdev"]))
                    if e["type"] in (CHR, BLK) else "%d" % e["size"])
            out.write("%s%04o %5d %5d %12s %s %s%s\n" % (
                TYPE_CHARS[e["type"]], e["mode"], e["uid"], e["gid"], size,
                time.strftime("%Y-%m-%d %H:%M", time.gmtime(e["mtime"])),
                escaped(e["path"]), " -> " + escaped(e["link"]) if e["type"] == LNK else ""))
    elif cmd == "cat":
        ino = [e["ino"] for e in a["ents"] if e["path"] == argv[3].encode()][0]
        out.flush()
        sys.stdout.buffer.write(contents(a)[ino])
    elif cmd == "times":
        for e in a["ents"]:
            out.write("%s\t%d.%09d\t%d.%09d\t%d.%09d\n" % (
                e["path"].decode("utf-8", "surrogateescape") or ".", *e["atime"], e["mtime"],
                e["nsec"], *e["ctime"]))
    elif cmd == "long":
        f = a["flags"]
        held = any(len(t) == 1024 and is_word_byte(t[0]) for g in a["shards"] for t in g["toks"])
        out.write("header %s, shards %s\n" % (("yes" if f & 2 else "no") if f & 1 else "unrecorded",
                                                "yes" if held else "no"))
    elif cmd == "records":
        for s, typ, blen, f in read_journal(path + ".journal", a):
            out.write("%d\t%s\t%d\t%s\n" % (s, typ, blen, " ".join(
                "%s=%s" % (k, show(v)) for k, v in f.items())))


def run_each(cmd, paths):
    """tree, archive or records of several archives in one process (a test checks hundreds):
    each one's output to PATH.CMD, its message to PATH.CMD.err, and a line "STATUS<TAB>PATH"
    on stdout with the exit status a run of that archive alone has."""
    for path in paths:
        with open(path + "." + cmd, "w") as out, open(path + "." + cmd + ".err", "w") as err:
            try:
                run(cmd, path, None, out)
                code = 0
            except Bad as e:
                err.write("readfmt: %s\n" % e)
                code = 3
            except Exception as e:  # what a lone run would end with a traceback for
                err.write("readfmt: %r\n" % e)
                code = 1
        sys.stdout.write("%d\t%s\n" % (code, path))
    return 0


def main(argv):
    if len(argv) < 3 or argv[1] not in ("tree", "archive", "ls", "cat", "records", "long", "times", "each"):
        sys.stderr.write(__doc__)
        return 2
    if argv[1] == "each":
        if len(argv) < 4 or argv[2] not in ("tree", "archive", "records"):
            sys.stderr.write(__doc__)
            return 2
        return run_each(argv[2], argv[3:])
    run(argv[1], argv[2], argv, sys.stdout)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except Bad as e:
        sys.stderr.write("readfmt: %s\n" % e)
        sys.exit(3)
