/* arc: the .tdc archive file.
 *
 * Layout: a 40-byte header (magic "TADOCFS\0", version, flags, section-table offset, section
 * count, header checksum), the sections, then the section table (40 bytes per section and an
 * XXH3-64 of the table). Each section records its type, codec (raw, zstd, or for the
 * dictionary zstd of its front coding: arc_codec_name), offset, stored
 * and raw lengths and the XXH3-64 of its stored bytes, checked before it is decoded.
 *
 * An opened archive is read-only and may be shared by any number of threads. */
#ifndef TDC_ARC_H
#define TDC_ARC_H

#include <stdint.h>
#include <sys/types.h>

#include "../grammar/dict.h"
#include "../grammar/gram.h"

/* Version 2 added inode numbers (shared by hard links), user xattrs and the archive ids the
 * journal binds to; version 3 added FIFOs, sockets and devices (with their rdev) and hard
 * links of any non-directory type; version 4 cut the grammar into shards (below). Versions
 * 1 to 3 are still read, as one shard (v1: inode = entry index + 1). */
#define ARC_VERSION 5

enum arc_type {
    ARC_REG = 1,
    ARC_DIR = 2,
    ARC_LNK = 3,
    ARC_FIFO = 4, /* version 3 on */
    ARC_SOCK = 5,
    ARC_CHR = 6, /* devices keep their rdev */
    ARC_BLK = 7,
};

/* The entry type of a stat mode's type bits (S_IFREG...), or 0 for none we keep. */
uint8_t arc_type_of_mode(uint32_t mode);

/* The stat type bits (S_IFREG...) of an entry type, or 0 for an unknown type. */
uint32_t arc_mode_of_type(uint8_t type);

enum arc_section {
    ARC_SEC_DICT = 1,
    ARC_SEC_RULES = 2,
    ARC_SEC_ROOT = 3,
    ARC_SEC_FILES = 4,
    ARC_SEC_SHARDS = 5, /* version 4 on: the shard table */
};

/* One extended attribute (name without the "user." prefix, value of any bytes). */
typedef struct arc_xattr {
    char *name;
    unsigned char *val;
    uint32_t len;
} arc_xattr;

/* One file-table entry. Entry 0 is the root directory with path "". Paths are relative,
 * '/'-separated, with no empty, "." or ".." components, and sorted by arc_path_cmp.
 * Hard links are non-directory entries that share `ino`: they agree on type, mode, owner,
 * size, hash, symlink target and rdev, and only the first of them (in path order) holds a
 * regular file's content (root run); the others have root_len 0. Inode 1 is the root
 * directory. */
typedef struct arc_entry {
    char *path;
    char *link; /* symlink target, or NULL */
    uint8_t type;
    uint32_t mode; /* permission bits only (07777) */
    uint32_t uid, gid;
    int64_t mtime_sec;
    uint32_t mtime_nsec;
    uint32_t nxattrs; /* of xattrs, below (here, where it fills what would be padding) */
    /* Access and change times (version 5; before it, and as pack writes them, the
     * modification time): a compaction keeps what the mount showed. */
    int64_t atime_sec, ctime_sec;
    uint32_t atime_nsec, ctime_nsec;
    uint64_t size; /* bytes of content; a directory's st_size; a symlink's target length;
                      0 for FIFOs, sockets and devices */
    uint64_t rdev; /* device number of ARC_CHR and ARC_BLK entries (as st_rdev), else 0 */
    /* The file's run of root symbols. In memory: a range of the archive's root, which is the
     * roots of all shards concatenated in shard order. On disk (version 4): root_start counts
     * from the start of shard `shard`'s root, and a run longer than the rest of that root goes
     * on through the roots of the following shards (a file larger than a shard). */
    uint64_t root_start, root_len;
    uint32_t shard; /* the shard where the file's run starts (0 for entries without content) */
    /* 0, or 1 + the first damaged shard (arc_shard.damage) that holds part of this regular
     * file's content (every name of the inode is marked): its bytes cannot be read
     * (arc_entry_damaged). Set by arc_load_data; ARC_NOT_LOADED after arc_load_span for a
     * file outside the shards loaded. */
    uint32_t damaged;
    uint64_t hash;     /* XXH3-64 of the content */
    uint64_t ino;      /* inode number, >= 1, below ARC_INO_MAX */
    arc_xattr *xattrs; /* user.* attributes, sorted by name (nxattrs of them) */
} arc_entry;

#define ARC_INO_MAX ((uint64_t)1 << 60)

typedef struct arc_secinfo {
    uint32_t type, codec;
    uint64_t offset, stored, raw, hash;
} arc_secinfo;

/* The header: field offsets (bytes 28..31 are zero). */
#define ARC_HDR_SIZE 40
#define ARC_HDR_MAGIC 0   /* 8 bytes, "TADOCFS\0" */
#define ARC_HDR_VERSION 8 /* u32 */
#define ARC_HDR_FLAGS 12  /* u32: ARC_HF_* */
#define ARC_HDR_TABLE 16  /* u64: offset of the section table */
#define ARC_HDR_NSEC 24   /* u32: number of sections */
#define ARC_HDR_SUM 32    /* u64: XXH3-64 of the bytes before it */

/* One section-table entry: field offsets. The table's entries are followed by the u64
 * XXH3-64 of the entries. */
#define ARC_SECENT_SIZE 40
#define ARC_SECENT_TYPE 0    /* u32: enum arc_section */
#define ARC_SECENT_CODEC 4   /* u32 */
#define ARC_SECENT_OFFSET 8  /* u64 */
#define ARC_SECENT_STORED 16 /* u64 */
#define ARC_SECENT_RAW 24    /* u64 */
#define ARC_SECENT_HASH 32   /* u64: XXH3-64 of the stored bytes */

/* Header flags: facts a writer records for readers to plan by; never needed to read the
 * archive (a reader ignores bits it does not know, and writers before them wrote 0). */
#define ARC_HF_LONG_KNOWN 1u /* the writer recorded ARC_HF_LONG */
#define ARC_HF_LONG 2u       /* a shard's dictionary holds a word token of TOK_CAP bytes */

/* The header's fields. */
typedef struct arc_header {
    uint32_t version, nsec, flags;
    uint64_t table; /* offset of the section table */
} arc_header;

/* Fill a header (checksum included). */
void arc_header_encode(unsigned char h[ARC_HDR_SIZE], const arc_header *hd);

/* Recompute the checksum of a header whose fields were changed in place. */
void arc_header_seal(unsigned char h[ARC_HDR_SIZE]);

/* Read a header's fields: 0, -1 for a wrong magic, -2 for a wrong checksum (*hd is filled
 * either way). */
int arc_header_decode(const unsigned char h[ARC_HDR_SIZE], arc_header *hd);

/* Write and read one section-table entry. */
void arc_secent_encode(unsigned char e[ARC_SECENT_SIZE], const arc_secinfo *s);
void arc_secent_decode(const unsigned char e[ARC_SECENT_SIZE], arc_secinfo *s);

/* Write the checksum after a section table of `nsec` entries at `tab`. */
void arc_table_seal(unsigned char *tab, uint32_t nsec);

/* Shards (version 4). The grammar is cut into shards, each an independent grammar (its own
 * dictionary, rules and root, in three sections of its own) over whole files, cut on a token
 * boundary where one file is larger than a shard. The shard table records per shard what the
 * global part needs without decoding it. */
typedef struct arc_shard {
    uint64_t bytes;     /* content bytes its root spells */
    uint64_t root_syms; /* symbols of its root */
    uint64_t root_off;  /* where its root starts in the archive's (concatenated) root */
    uint32_t ntokens;   /* tokens of its dictionary */
    uint32_t nrules;    /* rules besides its root */
    uint32_t sec;       /* index in a->secs of its dictionary section (rules and root follow) */
    uint8_t long_words; /* ARC_LONG_*: whether its dictionary holds a word of TOK_CAP bytes */
    /* Why the shard could not be loaded (its checksum, decoding or shard-table figures
     * failed), malloc'ed; NULL for a shard that loaded. See arc_load_data. */
    char *damage;
} arc_shard;

/* Whether a dictionary holds a word token of TOK_CAP bytes (a word that long or longer: the
 * tokenizer cuts longer words into such tokens): what the GPU's analytics leave to the CPU. */
enum { ARC_LONG_UNKNOWN, ARC_LONG_NO, ARC_LONG_YES };

/* A shard coded for writing (arc_shard_encode): its three sections as they go to disk. Pack
 * codes shards on worker threads and hands them to arc_write_coded. */
typedef struct arc_coded {
    arc_shard info;      /* bytes, root_syms, ntokens, nrules (root_off and sec: the writer) */
    arc_secinfo secs[3]; /* dictionary, rules, root (offset: the writer) */
    unsigned char *data[3];
    /* Or, with data NULL (arc_shard_ref), the sections stay in this archive's file, at
     * secs[i].offset there, and the writer copies them, checking each against its checksum;
     * `from` must stay open until the write. */
    const struct arc *from;
    uint32_t from_shard; /* its index there */
} arc_coded;

/* Size techniques a writer can leave out (struct arc's plain), for the measurements of
 * bench/codecs.sh: the front-coded dictionary, the kind layout of the rules and root, the
 * file table's columns, shards stored as their text. */
#define ARC_PLAIN_DICT 1u
#define ARC_PLAIN_SYMS 2u
#define ARC_PLAIN_FILES 4u
#define ARC_PLAIN_TEXT 8u /* pack: no shard stored as its text (textshard.h) */
#define ARC_PLAIN_BARE 16u /* pack: no grammar shard stored as its bare text (textshard.h) */

typedef struct arc {
    /* The grammar, whole: after arc_load_data the shards' grammars merged into one (token ids
     * of all dictionaries unified, rules renumbered, roots concatenated); for a writer, the
     * grammar to write as one shard. */
    dict *dict;
    gram g;
    arc_entry *ents;
    uint32_t nents;
    /* A file table read (arc_open*): the entries' paths and link targets, in one block
     * rather than one allocation each; arc_free frees the block, not those strings. NULL
     * where every string is its own (a writer's entries). */
    char *strs;
    size_t nstrs;
    arc_secinfo *secs; /* as read (arc_open*) */
    uint32_t nsecs;
    arc_shard *shards; /* as read (version 4; older versions: one shard) */
    uint32_t nshards;
    uint32_t ndamaged; /* shards that could not be loaded (arc_load_data) */
    uint64_t file_size;
    uint64_t id;       /* random identity of this archive (journals name the one they extend) */
    uint64_t prev_id;  /* identity of the archive this one was compacted from, or 0 */
    uint64_t next_ino; /* above every inode number in use */
    uint32_t *byino;   /* entry indices ordered by (ino, index), from arc_open */
    /* From arc_open_meta: the entries holding their inode's content (regular, a run of
     * symbols), grouped by the shard their run starts in, ascending within a group: group k
     * is byshard[shard_at[k] .. shard_at[k + 1]). A span's entries are found there, not by
     * going through every entry (which cost a cold read of the file table per span). */
    uint32_t *byshard, *shard_at;
    uint32_t version; /* format version read (arc_open*) */
    uint32_t flags;   /* header flags read (arc_open*): ARC_HF_* */
    char *path;       /* as opened (arc_open*) */
    unsigned plain;   /* writer: ARC_PLAIN_* techniques left out (ablation measurements) */
    int pending;      /* 1 between arc_open_meta and arc_load_data: dict and g are empty */
    int partial;      /* loaded by arc_load_span: only some shards (never written back) */
    int piece;        /* shards of an archive (arc_open_piece: 1, arc_open_pieces: how many):
                       * each file's size is the whole file's, its run only its part in them */
    int fd;           /* the archive's file, open from arc_open_meta to arc_free */
} arc;

/* ARC_LONG_YES when a shard of archive `a` (arc_open*) holds a word of TOK_CAP bytes or more,
 * ARC_LONG_NO when none does, ARC_LONG_UNKNOWN when its writer did not record it (from the
 * header: nothing is loaded). */
int arc_long_words(const arc *a);

/* A fresh random archive identity (never 0). */
uint64_t arc_new_id(void);

/* Complete an archive assembled in memory (entries with inode numbers, dictionary, grammar)
 * as arc_open would: check the grammar and record its topological order, check the file
 * table (arc_check_table) and index inodes. 0, -EBADMSG or -ENOMEM. */
int arc_finish(arc *a);

/* parent[i] = the entry of entry i's parent directory (parent[0] = 0, the root), for a file
 * table arc_check_table accepted; parent holds nents entries. One pass in path order, without
 * a lookup per entry. 0 or -ENOMEM. */
int arc_parents(const arc *a, uint32_t *parent);

/* The rules every file table obeys, checked by the reader on open, by arc_finish and by the
 * writer before it writes (so nothing is written that the reader would refuse): the root
 * entry, safe paths in order, each parent an earlier directory, per-type fields (symlink
 * target and size, no content outside regular files, rdev only on devices) and hard links
 * (see arc_entry). Builds a->byino. 0, -EBADMSG (message names the entry) or -ENOMEM. */
int arc_check_table(arc *a);

/* Index of the entry that holds the content of inode `ino` (the first with that number),
 * or -ENOENT. Built on open; O(log n). */
int64_t arc_ino_entry(const arc *a, uint64_t ino);

/* How many entries (names) inode `ino` has; *pos (optional) receives where they start in
 * a->byino, which lists them in entry order. O(log n + links). */
uint32_t arc_ino_links(const arc *a, uint64_t ino, uint32_t *pos);

/* Human name of a section type ("dictionary", "rules", ...). */
const char *arc_section_name(uint32_t type);

/* Name of a section codec: "raw", "zstd", "zstd-front" (a front-coded dictionary, see
 * dict_front_encode, then zstd), as tadoc stat prints it. */
const char *arc_codec_name(uint32_t codec);

/* Compare paths so that a directory's descendants follow it directly ('/' sorts first). */
int arc_path_cmp(const char *a, const char *b);

/* 0 if `path` is a valid relative archive path, else -EINVAL with a message. */
int arc_path_check(const char *path);

/* Write the archive atomically: arc_write_tmp, then arc_commit. */
int arc_write(const char *path, arc *a, int level);

/* Write the archive to a new temporary file beside `path` (named in *tmp, malloc'ed) and
 * fsync it; `path` itself is not touched. `level` is the zstd level of the sections. Fills
 * a->file_size. Entries with ino 0 get entry index + 1; a->id 0 gets a new
 * identity; next_ino is computed. The table and grammar are checked first (arc_check_table,
 * root and runs): an archive the reader would refuse is not written (-EBADMSG). On failure
 * nothing is left behind and *tmp is NULL. */
int arc_write_tmp(const char *path, arc *a, int level, char **tmp);

/* Code one shard's grammar (dictionary d, rules and root of g) for arc_write_coded: `bytes`
 * is the content its root spells, level the zstd level, plain as in struct arc.
 * Thread-safe (one call per shard on any thread). 0 or -ENOMEM. */
int arc_shard_encode(const dict *d, const gram *g, uint64_t bytes, int level, unsigned plain,
                     arc_coded *out);

/* Code one shard stored as its text (textshard.h): pieces lens[0..np) (np >= 1, each of at
 * least one byte, each one file's run in the shard, cut where a token ends), their bytes
 * text[0..sum) back to back; bare (codec zstd-bare: no token references) as `bare` says
 * (textshard_encode: 1 where that saves a tenth, 2 always, 0 never). Each piece's number of
 * root symbols is appended to runs. Thread-safe. 0 or -ENOMEM. */
int arc_text_shard_encode(const uint64_t *lens, size_t np, const unsigned char *text, int level,
                          int bare, arc_coded *out, vec64 *runs);

/* Whether coded shard c is stored as its text (either codec). */
int arc_coded_text(const arc_coded *c);
void arc_coded_free(arc_coded *c);

/* Shard k of an opened archive by reference, for a writer that keeps the shard as it is
 * stored: the shard table's figures and the sections' places, which the writer copies from
 * a's file in pieces as it writes, checking their checksums then (so a compaction never holds
 * the shards it keeps); a must stay open until the write. 0 or -EINVAL. */
int arc_shard_ref(const arc *a, uint32_t k, arc_coded *out);

/* Shard k of an opened archive read back in pieces and its sections checked against their
 * checksums, nothing decoded or held. 0, -EBADMSG (naming the section), -EIO or -ENOMEM. */
int arc_shard_check(const arc *a, uint32_t k);

/* Whether shard k of an opened archive is stored as its text (textshard.h): 1 with token
 * references (zstd-text), 2 bare (zstd-bare), else 0. */
int arc_shard_text(const arc *a, uint32_t k);

/* The symbols in the rule bodies of shard k of an opened archive (not in the shard table),
 * read from the lengths that begin its rules section, which is read and decoded alone:
 * a shard stored as its text has none. 0, -EBADMSG, -EIO or -ENOMEM. */
int arc_shard_rule_syms(const arc *a, uint32_t k, uint64_t *n);

/* arc_write_tmp for an archive whose grammar comes as coded shards (a->dict and a->g unused):
 * every entry's run is given on-disk style (shard and root_start within it, see arc_entry).
 * The table and the runs are checked as arc_write_tmp does. */
int arc_write_coded_tmp(const char *path, arc *a, const arc_coded *sh, uint32_t n, int level,
                        char **tmp);

/* For writers that put the shards' sections into the file themselves (tadoc-mpi, each rank
 * its own shards): where shard k's first section starts once sh[0..k) are laid out in order
 * (only their secs[].stored are read). */
uint64_t arc_coded_offset(const arc_coded *sh, uint32_t k);

/* arc_write_coded_tmp into the existing file `tmp`, which holds every shard's sections at
 * arc_coded_offset (sh[].data unused): the rest (file table, shard table, section table,
 * header) is written after them and the file synced. The caller commits (arc_commit) or
 * removes `tmp`; on failure it is removed. */
int arc_write_coded_over(const char *tmp, arc *a, const arc_coded *sh, uint32_t n, int level);

/* Where an archive written to `path` goes: `path` itself where nothing is there (the new
 * file's mode 0666 less the umask), the regular file there (its mode and owner kept), or the
 * regular file a symbolic link there names (the link stays a link). Anything else at `path`,
 * a directory, device, FIFO, socket or dangling link, is refused: the rename that commits an
 * archive would replace it. 0 with t->path malloc'ed (arc_target_free), or a negative errno
 * with a message. */
typedef struct arc_target {
    char *path;
    mode_t mode;
    uid_t uid;
    gid_t gid;
    int exists;
} arc_target;
int arc_target_of(const char *path, arc_target *t);
void arc_target_free(arc_target *t);
/* Give the open file fd t's mode and, where t exists, its owner (where the caller may). */
int arc_target_apply(const arc_target *t, int fd, const char *name);

/* A temporary archive file written shard by shard as the shards are made, so that a writer
 * holds none it has made (compaction): arc_sink_open creates PATH.tmpXXXXXX beside path;
 * arc_sink_put appends the next shard's sections (its data, or by reference copied and
 * checked as arc_write_coded_tmp does) and frees its data, keeping its figures (a shard by
 * reference also gets whether it holds a word of TOK_CAP bytes, which the header records,
 * where no shard put before was found to); then
 * arc_sink_finish with every shard put, in order (their figures), writes the rest as
 * arc_write_coded_tmp does and gives the file's name in *tmp, or arc_sink_abort. Each
 * returns 0 or a negative errno with a message; a failed open or finish leaves no file, a
 * failed put leaves the sink for arc_sink_abort. */
typedef struct arc_sink {
    int fd;
    char *tmp;
    arc_target to; /* where the archive goes; the mode and owner the new file takes */
    int long_seen; /* a shard put holds a word of TOK_CAP bytes (the header will say so) */
} arc_sink;
int arc_sink_open(arc_sink *s, const char *path);
int arc_sink_put(arc_sink *s, arc_coded *c);
int arc_sink_finish(arc_sink *s, arc *a, const arc_coded *sh, uint32_t n, int level, char **tmp);
/* arc_sink_finish, then arc_commit of the file over `path` (a failed fsync of the directory
 * after the rename counts as -EIO, as arc_write_coded's). */
int arc_sink_commit(arc_sink *s, arc *a, const arc_coded *sh, uint32_t n, int level,
                    const char *path);
void arc_sink_abort(arc_sink *s); /* removes the file; nothing for a finished or zeroed sink */

/* arc_write_coded_tmp, then arc_commit. */
int arc_write_coded(const char *path, arc *a, const arc_coded *sh, uint32_t n, int level);

/* Rename the temporary file `tmp` over `path` (over the file a link there names: see
 * arc_target_of, which must have placed `tmp` beside it) and make the rename durable (directory
 * fsync). 0 when done; a negative errno when the rename failed (`tmp` is removed and `path`
 * is as it was); 1 when renamed but the directory fsync failed (tdc_errmsg says why: the
 * rename is in place but not yet durable). */
int arc_commit(const char *tmp, const char *path);

/* Open, verify every checksum, decode and validate an archive. On failure returns -EBADMSG
 * (corrupt), -ENOENT/-EACCES/-EIO (cannot read) or -ENOMEM, with a message naming the part. */
int arc_open(const char *path, arc **out);

/* The first half of arc_open: the header, the section table and the file table, verified
 * and decoded; the dictionary, rules and root (the bulk of the archive) are left on disk, so
 * a->dict is NULL and a->g empty until arc_load_data. The archive's file stays open until
 * arc_free (a rename over it does not change what is loaded or copied later). Errors as
 * arc_open. */
int arc_open_meta(const char *path, arc **out);

/* The second half: read, verify and decode the dictionary (on a second thread), the rules
 * (checking the graph is acyclic) and the root, and check every file's run against the root.
 * 0 at once if already loaded. On failure the archive stays as arc_open_meta left it and the
 * message names the archive and the part. Nothing may read a->dict or a->g during the call.
 *
 * A damaged shard of an archive of several shards (a section checksum, a decoding check or
 * the shard table's figures fail: -EBADMSG) does not fail the load: the shard is recorded as
 * damaged (shards[k].damage keeps the message naming "shard K", a->ndamaged counts them), a
 * stand-in grammar of one token takes its place (its root as long as the shard table says,
 * so every other file's run stays where it is), and every regular file with content in it
 * is marked (arc_entry.damaged). Only the files of damaged shards become unreadable; an
 * archive of one shard fails as before. */
int arc_load_data(arc *a);

/* Instead of arc_load_data, for reading a few files of a large archive at once: load and
 * merge only shards [first, last]. The runs of the files that lie wholly inside them become
 * relative to the merged root; every other regular file is marked ARC_NOT_LOADED (its run
 * emptied; arc_entry_damaged refuses it with -EINVAL) and a->partial is set. Only reads of
 * the loaded files may follow: no analytics, compaction or writing. Errors as
 * arc_load_data; -EINVAL for a range outside the archive. */
int arc_load_span(arc *a, uint32_t first, uint32_t last);
#define ARC_NOT_LOADED UINT32_MAX

/* The shards that entry `ent`'s run touches (its own shard for a file without content), from
 * the file table alone (before any load). Returns 0. */
int arc_entry_shards(const arc *a, uint32_t ent, uint32_t *first, uint32_t *last);

/* Bytes a's file table, dictionary and grammar occupy in memory (their arrays' room, not the
 * allocator's rounding). */
uint64_t arc_mem(const arc *a);

/* For an archive opened by arc_open_meta: about what the process's resident memory grows by
 * when shard k is loaded alone and indexed for reads (grammar, dictionary, index, the
 * allocator's share), from the shard table alone. Fitted on the test corpora and meant to err
 * high (by up to half, for archives of thousands of small shards). */
uint64_t arc_shard_mem_estimate(const arc *a, uint32_t k);

/* For reading a few files of a large archive while keeping memory to what they need: a new
 * archive object holding shards [first, last] of `meta` (an archive opened by arc_open_meta and
 * not loaded; it is only read) and, as its entries, only the regular files that hold their
 * inode's content in those shards, in meta's order: entry i is meta's entry (*ids)[i]
 * (malloc'ed, ascending; *nids of them), with its path and runs relative to the span's root,
 * and no link targets or xattrs. For idx_build and reads of those files (hard links resolve
 * to the entry holding the content in meta first); no analytics, compaction or writing.
 * Errors as arc_load_span. */
int arc_open_span(const arc *meta, uint32_t first, uint32_t last, arc **out, uint32_t **ids,
                  uint32_t *nids);

/* A text shard's files as bytes, for reads (arc_open_text). */
typedef struct arc_text {
    unsigned char *payload;    /* the shard's payload (docs/FORMAT.md, codec zstd-text) */
    const unsigned char *text; /* its pieces back to back, inside payload */
    uint32_t *ids;             /* the entries read here, as arc_open_span's (ascending) */
    uint64_t *at, *len;        /* per entry: where its bytes begin in text, and how many */
    uint32_t nids;
    uint64_t bytes;      /* what it occupies (at most) */
    struct zlazy *lazy;  /* opened lazily: the payload decoded as far as reads went */
} arc_text;

/* Shard k of `meta` (opened by arc_open_meta, not loaded; only read), where it is stored as
 * its text (arc_shard_text), as the bytes of the files it holds, without their tokens: the
 * entries of arc_open_span(meta, k, k) or, with part >= 0, the part of that entry in shard k
 * (arc_open_part). Reading a file there is a copy, where its grammar would cost a tokenizing
 * of the whole shard; word queries and analytics need the grammar still. The shard's pieces
 * must be its files' runs, in root order, the runs tiling its root and each piece as long as
 * its file (or part), save pieces of files no entry holds any more, whose tokens are counted
 * to find the runs after them: what pack and compaction write (a run whose tokens do not
 * spell its piece is not seen here; a whole file's read then fails its content hash). With
 * `lazy`, a large payload is decoded only as far as its lengths (and any gone file's piece)
 * now, the rest as reads reach it (zlazy.h): a read of a few bytes costs a part of the
 * shard's decoding, not all of it. 0; -ENOTSUP where the shard is not stored as its text or
 * its pieces are not so (the caller loads the grammar, which judges the shard); -EBADMSG
 * (damaged), -EIO, -ENOMEM with a message. */
int arc_open_text(const arc *meta, uint32_t k, int64_t part, int lazy, arc_text *out);

/* Up to n bytes from byte `off` of the i-th entry of t: *p and how many (0 past its end).
 * Thread-safe. -EBADMSG with a message where a lazily opened payload turns out corrupt. */
ssize_t arc_text_bytes(const arc_text *t, uint32_t i, uint64_t off, size_t n,
                       const unsigned char **p);
void arc_text_free(arc_text *t);

/* Whether regular entry `ent` of version 4 `meta` is read best shard by shard: its run fills
 * shards [*first, *last], more than one, whole (pack cuts a file larger than a shard so), so
 * each shard's content is a part of the file, *first's at its start; and those shards' sizes
 * add up to the file's. 1 (with the shards) or 0. */
int arc_entry_parts(const arc *meta, uint32_t ent, uint32_t *first, uint32_t *last);

/* As arc_open_span of shard k alone, for the part of entry `ent` (arc_entry_parts) it holds:
 * the one entry of *out, whose run is shard k's root and whose size is that part's. */
int arc_open_part(const arc *meta, uint32_t ent, uint32_t k, arc **out);

/* A copy of `meta` (an archive opened by arc_open_meta and not loaded), as arc_open_meta of
 * the same file would give it, made without reading or checking anything again: its own
 * file table, section and shard tables and descriptor of the file. 0 or -ENOMEM. */
int arc_meta_dup(const arc *meta, arc **out);

/* Shard k of `meta` (a version 4 archive opened by arc_open_meta and not loaded; it is only
 * read) as an archive of its own, for work done shard by shard (analytics): its grammar is
 * shard k's alone, and its entries are all of meta's, at the same indices, sharing meta's
 * paths (no link targets or xattrs), with each regular file's run cut to the part that lies
 * in shard k, relative to that shard's root (empty where the file has none there), and
 * meta's inode index (arc_ino_entry). So
 * scopes, visibility masks and paths work on it as on the whole archive, and each file
 * counts only its content in shard k. Thread-safe (meta is shared). Free it with
 * arc_piece_free, before meta. Errors as arc_load_data, except that a damaged shard fails
 * (-EBADMSG), and the message names "shard K" but not the archive. */
int arc_open_piece(const arc *meta, uint32_t k, arc **out);

/* arc_open_piece of the consecutive shards [first, last] together: their grammars merged into
 * one (the shards loaded on several threads), each regular file's run cut to the part that
 * lies in them, relative to shard first's root. A damaged shard fails it all (-EBADMSG). */
int arc_open_pieces(const arc *meta, uint32_t first, uint32_t last, arc **out);
void arc_piece_free(arc *p);

/* The regular file at `path` (leading slashes ignored): its entry in *ent, or -ENOENT (no such
 * file) or -EISDIR (not a regular file), with a message naming path. */
int arc_find_file(const arc *a, const char *path, uint32_t *ent);

/* Where entry ent's content lies, as [start, start + len) of shard k's root (see arc_entry;
 * len 0 where it has none in shard k). */
void arc_entry_in_shard(const arc *a, uint32_t ent, uint32_t k, uint64_t *start, uint64_t *len);

/* The same for the consecutive shards [first, last], relative to shard first's root. */
void arc_entry_in_span(const arc *a, uint32_t ent, uint32_t first, uint32_t last, uint64_t *start,
                       uint64_t *len);

/* The message arc_entry_damaged gives for entry `ent` when shard k, damaged for the reason
 * `why`, holds part of its content: -EBADMSG. */
int arc_damage_error(const arc *a, uint32_t ent, uint32_t k, const char *why);

/* 1 when regular entry i of archive b holds, byte for byte, the content of regular entry o of
 * archive a, as the tables show it without decoding anything: the same size and hash, and a
 * run of the same length starting at the same place of its first shard, over as many
 * shards, each stored alike in both (the same codec, lengths and checksum for each of its
 * sections, and the same figures in the shard table); else 0. Both version 4, neither
 * partial (arc_load_span) nor the entries damaged. Stored alike means the same bytes only
 * where those bytes were checked against their checksums, as arc_open and arc_load_data do:
 * then the two runs expand to the same bytes. O(shards of the run). */
int arc_same_content(const arc *a, uint32_t o, const arc *b, uint32_t i);

/* 0 when entry `ent`'s content is readable; -EBADMSG with a message naming the archive, the
 * file and the damaged shard that holds part of it. */
int arc_entry_damaged(const arc *a, uint32_t ent);

/* arc_entry_damaged for the first regular file of entries [first, end) with `vis` (NULL:
 * every entry; else a byte per entry, nonzero where visible) set: 0 when none has content
 * in a damaged shard. For whole-scope work (analytics) that must not count a damaged file. */
int arc_range_damaged(const arc *a, uint32_t first, uint32_t end, const unsigned char *vis);

/* Free what an entry owns (path, link, xattrs) and zero it. */
void arc_entry_clear(arc_entry *e);

/* One entry of the file table as the format codes it (docs/FORMAT.md), its run in shard
 * `shard` (root_start as e holds it), appended to b: 0 or -ENOMEM. And read back, as a table
 * of format `version` has it, into e (zeroed by the caller; what it allocates stays in e for
 * arc_entry_clear, also on failure), its shard number into *shard: 0; -EBADMSG with the
 * message set for a bad mode, owner, time or type; -EPROTO where the bytes end or are
 * malformed; -ENOMEM. */
int arc_entry_encode(buf *b, const arc_entry *e, uint32_t shard);
int arc_entry_decode(rd *r, uint32_t version, arc_entry *e, uint64_t *shard);

/* A copy of entry e in *c, its path, link target and attributes its own (what it has of them
 * on failure, for arc_entry_clear). 0 or -ENOMEM. */
int arc_entry_copy(const arc_entry *e, arc_entry *c);

/* Every entry's path and link target in an allocation of its own instead of the archive's
 * block (strs), for a caller that replaces or frees them, or takes the entries away. 0 or
 * -ENOMEM (then some are, and arc_free still frees each string once). */
int arc_own_strs(arc *a);

/* Free an archive from arc_open, or one assembled by a writer (frees dict, gram, entries). */
void arc_free(arc *a);

/* Index of the entry with this path, or -ENOENT. */
int64_t arc_lookup(const arc *a, const char *path);

/* arc_lookup of a path as a person writes it: slashes at either end or doubled and "."
 * components are ignored, so "/", "." and "" are the root and "dir/" is "dir"; a path that
 * ends in "/" or "/." names a directory, as for open(2). -ENOENT, -ENOTDIR (it ends so but
 * names no directory) or -ENOMEM. */
int64_t arc_lookup_user(const arc *a, const char *path);

/* arc_lookup_user with the thread's message on failure ("PATH: no such path in the
 * archive", "PATH: not a directory"): 0 and *ent, or the error. */
int arc_lookup_path(const arc *a, const char *path, uint32_t *ent);

#endif
