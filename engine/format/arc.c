#include "arc.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>

#include "arc_test.h"
#include "ftcols.h"
#include "syms.h"
#include "textshard.h"
#include "zlazy.h"
#include "ztrial.h"
#include "../base/err.h"
#include "../base/par.h"
#include "../base/fio.h"
#include "../base/tok.h"

#define CODEC_RAW 0
#define CODEC_ZSTD 1
#define CODEC_ZSTD_FRONT 2 /* dictionary only: zstd of dict_front_encode's output */
#define CODEC_KIND 3       /* rules and root only: the kind layout (syms.h), raw */
#define CODEC_ZSTD_KIND 4  /* rules and root only: zstd of the kind layout */
#define CODEC_ZSTD_COLS 5  /* version 4 file table only: zstd of its columns (ftcols.h) */
#define CODEC_ZSTD_TEXT 6  /* version 4, all three sections of a shard: its text (textshard.h) */
#define CODEC_ZSTD_BARE 7  /* as CODEC_ZSTD_TEXT, without token references */
#define RAW_MAX ((uint64_t)1 << 40) /* refuse to allocate more than 1 TiB for one section */

static const char MAGIC[8] = {'T', 'A', 'D', 'O', 'C', 'F', 'S', 0};

void arc_header_seal(unsigned char h[ARC_HDR_SIZE])
{
    st64(h + ARC_HDR_SUM, XXH3_64bits(h, ARC_HDR_SUM));
}

void arc_header_encode(unsigned char h[ARC_HDR_SIZE], const arc_header *hd)
{
    memset(h, 0, ARC_HDR_SIZE);
    memcpy(h + ARC_HDR_MAGIC, MAGIC, sizeof MAGIC);
    st32(h + ARC_HDR_VERSION, hd->version);
    st32(h + ARC_HDR_FLAGS, hd->flags);
    st64(h + ARC_HDR_TABLE, hd->table);
    st32(h + ARC_HDR_NSEC, hd->nsec);
    arc_header_seal(h);
}

int arc_header_decode(const unsigned char h[ARC_HDR_SIZE], arc_header *hd)
{
    hd->version = le32(h + ARC_HDR_VERSION);
    hd->flags = le32(h + ARC_HDR_FLAGS);
    hd->table = le64(h + ARC_HDR_TABLE);
    hd->nsec = le32(h + ARC_HDR_NSEC);
    if (memcmp(h + ARC_HDR_MAGIC, MAGIC, sizeof MAGIC)) return -1;
    if (XXH3_64bits(h, ARC_HDR_SUM) != le64(h + ARC_HDR_SUM)) return -2;
    return 0;
}

void arc_secent_encode(unsigned char e[ARC_SECENT_SIZE], const arc_secinfo *s)
{
    st32(e + ARC_SECENT_TYPE, s->type);
    st32(e + ARC_SECENT_CODEC, s->codec);
    st64(e + ARC_SECENT_OFFSET, s->offset);
    st64(e + ARC_SECENT_STORED, s->stored);
    st64(e + ARC_SECENT_RAW, s->raw);
    st64(e + ARC_SECENT_HASH, s->hash);
}

void arc_secent_decode(const unsigned char e[ARC_SECENT_SIZE], arc_secinfo *s)
{
    s->type = le32(e + ARC_SECENT_TYPE);
    s->codec = le32(e + ARC_SECENT_CODEC);
    s->offset = le64(e + ARC_SECENT_OFFSET);
    s->stored = le64(e + ARC_SECENT_STORED);
    s->raw = le64(e + ARC_SECENT_RAW);
    s->hash = le64(e + ARC_SECENT_HASH);
}

void arc_table_seal(unsigned char *tab, uint32_t nsec)
{
    size_t n = (size_t)nsec * ARC_SECENT_SIZE;
    st64(tab + n, XXH3_64bits(tab, n));
}

const char *arc_section_name(uint32_t type)
{
    switch (type) {
    case ARC_SEC_DICT:
        return "dictionary";
    case ARC_SEC_RULES:
        return "rules";
    case ARC_SEC_ROOT:
        return "root";
    case ARC_SEC_FILES:
        return "file table";
    case ARC_SEC_SHARDS:
        return "shard table";
    }
    return "unknown";
}

const char *arc_codec_name(uint32_t codec)
{
    switch (codec) {
    case CODEC_RAW:
        return "raw";
    case CODEC_ZSTD:
        return "zstd";
    case CODEC_ZSTD_FRONT:
        return "zstd-front";
    case CODEC_KIND:
        return "kind";
    case CODEC_ZSTD_KIND:
        return "zstd-kind";
    case CODEC_ZSTD_COLS:
        return "zstd-cols";
    case CODEC_ZSTD_TEXT:
        return "zstd-text";
    case CODEC_ZSTD_BARE:
        return "zstd-bare";
    }
    return "unknown";
}

uint8_t arc_type_of_mode(uint32_t mode)
{
    switch (mode & S_IFMT) {
    case S_IFREG:
        return ARC_REG;
    case S_IFDIR:
        return ARC_DIR;
    case S_IFLNK:
        return ARC_LNK;
    case S_IFIFO:
        return ARC_FIFO;
    case S_IFSOCK:
        return ARC_SOCK;
    case S_IFCHR:
        return ARC_CHR;
    case S_IFBLK:
        return ARC_BLK;
    }
    return 0;
}

uint32_t arc_mode_of_type(uint8_t type)
{
    static const uint32_t bits[] = {0,       S_IFREG,  S_IFDIR, S_IFLNK,
                                    S_IFIFO, S_IFSOCK, S_IFCHR, S_IFBLK};
    return type < sizeof bits / sizeof *bits ? bits[type] : 0;
}

static int is_dev(uint8_t type)
{
    return type == ARC_CHR || type == ARC_BLK;
}

int arc_path_cmp(const char *a, const char *b)
{
    const unsigned char *p = (const unsigned char *)a, *q = (const unsigned char *)b;
    while (*p && *p == *q)
        p++, q++;
    unsigned x = *p == '/' ? 1 : *p ? (unsigned)*p + 1 : 0;
    unsigned y = *q == '/' ? 1 : *q ? (unsigned)*q + 1 : 0;
    return (x > y) - (x < y);
}

int arc_path_check(const char *path)
{
    if (path[0] == '/') return tdc_error(-EINVAL, "absolute path '%s'", path);
    const char *c = path;
    for (;;) {
        const char *e = strchr(c, '/');
        size_t n = e ? (size_t)(e - c) : strlen(c);
        if (n == 0) return tdc_error(-EINVAL, "empty component in path '%s'", path);
        if ((n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
            return tdc_error(-EINVAL, "'%.*s' component in path '%s'", (int)n, c, path);
        if (!e) return 0;
        c = e + 1;
    }
}

int64_t arc_lookup(const arc *a, const char *path)
{
    uint32_t lo = 0, hi = a->nents; /* binary search: the entries are in path order */
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        int c = arc_path_cmp(a->ents[mid].path, path);
        if (c == 0) return mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -ENOENT;
}

int64_t arc_lookup_user(const arc *a, const char *path)
{
    char *norm = malloc(strlen(path) + 1), *o = norm;
    if (!norm) return -ENOMEM;
    for (const char *p = path; *p;) {
        while (*p == '/')
            p++;
        size_t n = strcspn(p, "/");
        if (n && !(n == 1 && *p == '.')) {
            if (o != norm) *o++ = '/';
            memcpy(o, p, n);
            o += n;
        }
        p += n;
    }
    *o = 0;
    size_t n = strlen(path);
    int dir = n && (path[n - 1] == '/' || (path[n - 1] == '.' && (n == 1 || path[n - 2] == '/')));
    int64_t i = arc_lookup(a, norm);
    free(norm);
    return i >= 0 && dir && a->ents[i].type != ARC_DIR ? -ENOTDIR : i;
}

int arc_lookup_path(const arc *a, const char *path, uint32_t *ent)
{
    int64_t i = arc_lookup_user(a, path);
    if (i >= 0) *ent = (uint32_t)i;
    return i >= 0          ? 0
           : i == -ENOMEM  ? tdc_error(-ENOMEM, "out of memory")
           : i == -ENOTDIR ? tdc_error(-ENOTDIR, "%s: not a directory", path)
                           : tdc_error(-ENOENT, "%s: no such path in the archive", path);
}

int arc_find_file(const arc *a, const char *path, uint32_t *ent)
{
    int rc = arc_lookup_path(a, path, ent);
    if (rc) return rc == -ENOENT ? tdc_error(rc, "%s: no such file in the archive", path) : rc;
    if (a->ents[*ent].type != ARC_REG) return tdc_error(-EISDIR, "%s: not a regular file", path);
    return 0;
}

/* ---------------- encoding ---------------- */

static int enc_str(buf *b, const char *s)
{
    return buf_put_str(b, s, s ? strlen(s) : 0);
}

/* `flat`: runs are archive-wide and go to disk as shard 0's (see write_coded). */
static int enc_files(const arc *a, buf *b, int flat)
{
    if (buf_put_u64(b, a->id) || buf_put_u64(b, a->prev_id) || buf_put_varint(b, a->next_ino) ||
        buf_put_varint(b, a->nents))
        return -ENOMEM;
    for (uint32_t i = 0; i < a->nents; i++)
        if (arc_entry_encode(b, &a->ents[i], flat ? 0 : a->ents[i].shard)) return -ENOMEM;
    return 0;
}

int arc_entry_encode(buf *b, const arc_entry *e, uint32_t shard)
{
    uint64_t zz = zig64((uint64_t)e->mtime_sec);
    if (enc_str(b, e->path) || buf_put(b, &e->type, 1) || buf_put_varint(b, e->mode) ||
        buf_put_varint(b, e->uid) || buf_put_varint(b, e->gid) || buf_put_varint(b, zz) ||
        buf_put_varint(b, e->mtime_nsec) || buf_put_varint(b, e->size) ||
        buf_put_varint(b, shard) || buf_put_varint(b, e->root_start) ||
        buf_put_varint(b, e->root_len) || buf_put_u64(b, e->hash) || enc_str(b, e->link) ||
        buf_put_varint(b, e->ino) || (is_dev(e->type) && buf_put_varint(b, e->rdev)) ||
        buf_put_varint(b, e->nxattrs))
        return -ENOMEM;
    for (uint32_t k = 0; k < e->nxattrs; k++)
        if (enc_str(b, e->xattrs[k].name) || buf_put_str(b, e->xattrs[k].val, e->xattrs[k].len))
            return -ENOMEM;
    /* version 5: the change and access times, each as its difference from mtime (0 0 where
     * they are equal, which costs nothing once compressed); seconds wrap modulo 2^64 */
    const uint64_t d[4] = {
        (uint64_t)e->ctime_sec - (uint64_t)e->mtime_sec, (uint64_t)e->ctime_nsec - e->mtime_nsec,
        (uint64_t)e->atime_sec - (uint64_t)e->mtime_sec, (uint64_t)e->atime_nsec - e->mtime_nsec};
    for (int k = 0; k < 4; k++)
        if (buf_put_varint(b, zig64(d[k]))) return -ENOMEM;
    return 0;
}

/* ctime and atime of e from the differences z a row holds (arc_entry_encode; zeros before
 * version 5: mtime's); -1 when a result is out of range. */
static int times_from(const uint64_t z[4], arc_entry *e)
{
    /* sums modulo 2^64, as the writer's differences were taken */
    uint64_t cn = e->mtime_nsec + unzig64(z[1]), an = e->mtime_nsec + unzig64(z[3]);
    if (cn >= 1000000000u || an >= 1000000000u) return -1; /* below 0 wraps above too */
    e->ctime_sec = (int64_t)((uint64_t)e->mtime_sec + unzig64(z[0]));
    e->atime_sec = (int64_t)((uint64_t)e->mtime_sec + unzig64(z[2]));
    e->ctime_nsec = (uint32_t)cn;
    e->atime_nsec = (uint32_t)an;
    return 0;
}

uint64_t arc_new_id(void)
{
    uint64_t id = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        if (read(fd, &id, sizeof id) != (ssize_t)sizeof id) id = 0;
        close(fd);
    }
    if (!id) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        id = XXH3_64bits_withSeed(&ts, sizeof ts, (uint64_t)getpid());
    }
    return id ? id : 1;
}

/* zstd of `n` bytes into a fresh buffer (*z, *zn). */
static int zstd_section(const void *p, size_t n, int level, uint32_t type, unsigned char **z,
                        size_t *zn)
{
    size_t cap = ZSTD_compressBound(n);
    *z = malloc(cap ? cap : 1);
    if (!*z) return tdc_error(-ENOMEM, "out of memory compressing %s", arc_section_name(type));
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    *zn = 0;
    if (cc) {
        ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel, level);
        ZSTD_CCtx_setParameter(cc, ZSTD_c_nbWorkers, 2); /* ignored where zstd lacks threads */
        if (level >= ZTRIAL_FAR_LEVEL) ztrial_far(cc);
        ZSTD_CCtx_setParameter(cc, ZSTD_c_contentSizeFlag, 1);
        *zn = ZSTD_compress2(cc, *z, cap, p, n);
        ZSTD_freeCCtx(cc);
    }
    if (!cc || ZSTD_isError(*zn)) {
        free(*z);
        *z = NULL;
        return tdc_error(-EIO, "zstd failed on section %s", arc_section_name(type));
    }
    return 0;
}

/* The zstd level of the quick trial that picks the dictionary's layout. */
#define TRIAL_LEVEL 3

/* zstd size of `n` bytes at the trial level (SIZE_MAX when that fails). */
static size_t trial_size(const void *p, size_t n)
{
    size_t z = ztrial_size(NULL, p, n, TRIAL_LEVEL, 0);
    return z ? z : SIZE_MAX;
}

/* Whether the dictionary is coded from its front coding (*front = 1, in *fc) or as it is:
 * a quick zstd trial of both decides, so the slow full-level pass runs once. */
static int dict_layout(const buf *raw, buf *fc, int *front)
{
    *front = 0;
    int rc = dict_front_encode(raw->p, raw->n, fc);
    if (rc == -ENOMEM) return tdc_error(rc, "out of memory front coding the dictionary");
    if (rc) return tdc_error(-EIO, "dictionary: cannot front code its own encoding");
    *front = trial_size(fc->p, fc->n) < trial_size(raw->p, raw->n);
    return 0;
}

/* Whether a writer leaving out `plain` (ARC_PLAIN_*) codes section `type` in the kind layout. */
static int kind_layout(uint32_t type, unsigned plain)
{
    return (type == ARC_SEC_RULES || type == ARC_SEC_ROOT) && !(plain & ARC_PLAIN_SYMS);
}

/* Code `raw` with the codec the section should use (for the dictionary: zstd of itself or
 * of its front coding, dict_layout; for rules and root in the kind layout, its codecs), or
 * keep it raw when that does not help. The stored bytes go to *data (raw's buffer itself when
 * kept raw: raw is left empty); s gets everything but the offset. */
static int code_section(uint32_t type, buf *raw, int level, unsigned plain, arc_secinfo *s,
                        unsigned char **data)
{
    int kinded = kind_layout(type, plain);
    unsigned char *z = NULL;
    size_t zn = 0;
    buf fc = {0};
    int front = 0, cols = 0, rc = 0;
    if (type == ARC_SEC_DICT && !(plain & ARC_PLAIN_DICT)) rc = dict_layout(raw, &fc, &front);
    if (type == ARC_SEC_FILES && !(plain & ARC_PLAIN_FILES)) {
        rc = ftcols_encode(raw->p, raw->n, ARC_VERSION, &fc);
        if (rc == -ENOMEM) return tdc_error(rc, "out of memory coding the file table's columns");
        if (rc) return tdc_error(-EIO, "file table: cannot code its own rows in columns");
        cols = 1;
    }
    const buf *src = front || cols ? &fc : raw;
    if (!rc) rc = zstd_section(src->p, src->n, level, type, &z, &zn);
    buf_free(&fc);
    if (rc) return rc;
    *s = (arc_secinfo){.type = type, .raw = raw->n};
    if (zn < raw->n) {
        s->codec = front    ? CODEC_ZSTD_FRONT
                   : cols   ? CODEC_ZSTD_COLS
                   : kinded ? CODEC_ZSTD_KIND
                            : CODEC_ZSTD;
        s->stored = zn;
        *data = z;
    } else {
        free(z);
        s->codec = kinded ? CODEC_KIND : CODEC_RAW;
        s->stored = raw->n;
        *data = raw->p ? raw->p : malloc(1);
        *raw = (buf){0};
        if (!*data) return -ENOMEM;
    }
    s->hash = XXH3_64bits(*data, s->stored);
    return 0;
}

/* ARC_LONG_* of a shard's dictionary. */
static uint8_t long_of(const dict *d)
{
    return dict_has_word_of(d, TOK_CAP) ? ARC_LONG_YES : ARC_LONG_NO;
}

/* arc_shard_encode; `check` 0 codes what the reader would refuse (test generators). */
static int shard_encode(const dict *d, const gram *g, uint64_t bytes, int level, unsigned plain,
                        int check, arc_coded *out)
{
    memset(out, 0, sizeof *out);
    int rc = 0, kinded = !(plain & ARC_PLAIN_SYMS);
    if (check && dict_count(d) != g->ntokens)
        return tdc_error(-EINVAL, "shard: grammar of %u tokens over a dictionary of %u", g->ntokens,
                         dict_count(d));
    if (check && (rc = gram_check_root(g))) return rc;
    out->info = (arc_shard){.bytes = bytes,
                            .root_syms = g->root.n,
                            .ntokens = g->ntokens,
                            .nrules = g->nrules,
                            .long_words = long_of(d)};
    buf b = {0};
    syms_kinds *k = NULL;
    for (uint32_t i = 0; i < 3 && !rc; i++) {
        uint32_t type = ARC_SEC_DICT + i;
        b.n = 0;
        rc = type == ARC_SEC_DICT    ? dict_encode(d, &b)
             : type == ARC_SEC_RULES ? syms_enc_rules(g, d, kinded, &b, &k)
                                     : syms_enc_root(g, k, &b);
        if (rc == -ENOMEM)
            rc = tdc_error(rc, "out of memory encoding %s", arc_section_name(type));
        else if (rc) /* a grammar the kind layout cannot hold: keep why */
            rc = tdc_error_ctx(rc, "encoding %s", arc_section_name(type));
        if (!rc) rc = code_section(type, &b, level, plain, &out->secs[i], &out->data[i]);
    }
    syms_kinds_free(k);
    buf_free(&b);
    if (rc) arc_coded_free(out);
    return rc;
}

int arc_shard_encode(const dict *d, const gram *g, uint64_t bytes, int level, unsigned plain,
                     arc_coded *out)
{
    return shard_encode(d, g, bytes, level, plain, 1, out);
}

int arc_text_shard_encode(const uint64_t *lens, size_t np, const unsigned char *text, int level,
                          int bare, arc_coded *out, vec64 *runs)
{
    memset(out, 0, sizeof *out);
    buf pay = {0};
    dict *d = NULL;
    gram g = {0};
    uint64_t bytes = 0;
    for (size_t i = 0; i < np; i++)
        bytes += lens[i];
    int rc = textshard_encode(lens, np, text, bare, &pay, &bare);
    /* the figures and runs the reader will find: from the reader's own tokenizing */
    if (!rc) rc = textshard_grammar(pay.p, pay.n, bare, 0, 0, &d, &g, runs);
    if (!rc) {
        out->info = (arc_shard){
            .bytes = bytes, .root_syms = g.root.n, .ntokens = g.ntokens, .long_words = long_of(d)};
        size_t zn = 0;
        rc = zstd_section(pay.p, pay.n, level, ARC_SEC_DICT, &out->data[0], &zn);
        out->secs[0].stored = zn;
    }
    dict_free(d);
    gram_free(&g);
    for (uint32_t i = 0; i < 3 && !rc; i++) {
        arc_secinfo *s = &out->secs[i];
        s->type = ARC_SEC_DICT + i;
        s->codec = bare ? CODEC_ZSTD_BARE : CODEC_ZSTD_TEXT;
        s->raw = i ? 0 : pay.n;
        if (i && !(out->data[i] = malloc(1))) rc = tdc_error(-ENOMEM, "out of memory");
        s->hash = XXH3_64bits(out->data[i], s->stored);
    }
    buf_free(&pay);
    if (rc) arc_coded_free(out);
    return rc;
}

void arc_coded_free(arc_coded *c)
{
    for (int i = 0; i < 3; i++)
        free(c->data[i]);
    memset(c, 0, sizeof *c);
}

static int enc_shards(const arc_shard *sh, uint32_t n, buf *b)
{
    if (buf_put_varint(b, n)) return -ENOMEM;
    for (uint32_t k = 0; k < n; k++) {
        const arc_shard *s = &sh[k];
        if (buf_put_varint(b, s->bytes) || buf_put_varint(b, s->root_syms) ||
            buf_put_varint(b, s->ntokens) || buf_put_varint(b, s->nrules))
            return -ENOMEM;
    }
    return 0;
}

static int check_runs(const arc *a, uint64_t root_syms);
/* A shard stored as its text has this codec on its three sections (textshard.h). */
static int is_text(const arc_secinfo *s)
{
    return s->codec == CODEC_ZSTD_TEXT || s->codec == CODEC_ZSTD_BARE;
}

int arc_coded_text(const arc_coded *c)
{
    return is_text(&c->secs[0]);
}

/* Runs given on-disk style (shard, start within it): inside the concatenated roots. */
static int check_coded_runs(const arc *a, const arc_shard *sh, uint32_t n)
{
    uint64_t total = sh[n - 1].root_off + sh[n - 1].root_syms;
    for (uint32_t i = 0; i < a->nents; i++) {
        const arc_entry *e = &a->ents[i];
        if (e->shard >= n || e->root_start > sh[e->shard].root_syms ||
            e->root_len > total - sh[e->shard].root_off - e->root_start)
            return tdc_error(-EBADMSG, "file table: '%s' has a bad root range", e->path);
    }
    return 0;
}

/* The table the reader checks first (also for the writer: nothing it would refuse is
 * written), and the runs against the grammar. */
static int check_before_write(arc *a, const arc_shard *sh, uint32_t n, int flat)
{
    int rc = arc_check_table(a);
    if (!rc) rc = flat ? gram_check_root(&a->g) : 0;
    if (!rc) rc = flat ? check_runs(a, a->g.root.n) : check_coded_runs(a, sh, n);
    return rc ? tdc_error_ctx(rc, "refusing to write an archive the reader would reject") : 0;
}

uint64_t arc_coded_offset(const arc_coded *sh, uint32_t k)
{
    uint64_t off = ARC_HDR_SIZE;
    for (uint32_t j = 0; j < k; j++)
        for (int i = 0; i < 3; i++)
            off += sh[j].secs[i].stored;
    return off;
}

/* The shard of archive a whose section lies at `offset`, or -1. */
static int64_t shard_at(const arc *a, uint64_t offset)
{
    for (uint32_t k = 0; k < a->nshards; k++)
        for (uint32_t i = 0; i < 3; i++)
            if (a->shards[k].sec + i < a->nsecs && a->secs[a->shards[k].sec + i].offset == offset)
                return k;
    return -1;
}

/* Section s of archive `from` (s->offset is its place there) read in pieces and checked
 * against its checksum, and with fd >= 0 appended to fd (the file `tmp`) on the way: a
 * referenced shard written (arc_shard_ref), or a shard checked (arc_shard_check). */
static int pass_section(const arc *from, const arc_secinfo *s, int fd, const char *tmp)
{
    enum { PIECE = 1 << 20 };
    unsigned char *p = malloc(PIECE);
    XXH3_state_t *hs = XXH3_createState();
    int rc = p && hs && XXH3_64bits_reset(hs) == XXH_OK ? 0 : tdc_error(-ENOMEM, "out of memory");
    for (uint64_t at = 0; !rc && at < s->stored; at += PIECE) {
        size_t n = s->stored - at < PIECE ? (size_t)(s->stored - at) : PIECE;
        if (!(rc = fio_read_at(from->fd, p, n, s->offset + at, from->path))) {
            XXH3_64bits_update(hs, p, n);
            if (fd >= 0) rc = fio_write_all(fd, p, n, tmp);
        }
    }
    if (!rc && XXH3_64bits_digest(hs) != s->hash) {
        int64_t k;
        if (fd < 0) /* a check: named as a load names it */
            rc = tdc_error(-EBADMSG, "section %s: checksum mismatch (archive is corrupt)",
                           arc_section_name(s->type));
        else if ((k = shard_at(from, s->offset)) >= 0) /* a copy: as a whole load marks it */
            rc = tdc_error(-EBADMSG, "%s: shard %lld: section %s: checksum mismatch (archive "
                           "is corrupt)", from->path, (long long)k, arc_section_name(s->type));
        else
            rc = tdc_error(-EBADMSG, "%s: section %s at %llu: checksum mismatch", from->path,
                           arc_section_name(s->type), (unsigned long long)s->offset);
    }
    XXH3_freeState(hs);
    free(p);
    return rc;
}

/* Shard c's three sections appended to fd (the file `tmp`): its data, or for a shard by
 * reference its sections copied from its archive and checked. */
static int put_sections(int fd, const char *tmp, const arc_coded *c)
{
    int rc = 0;
    for (int i = 0; i < 3 && !rc; i++)
        rc = c->data[i] ? fio_write_all(fd, c->data[i], c->secs[i].stored, tmp)
                        : pass_section(c->from, &c->secs[i], fd, tmp);
    return rc;
}

/* The name of a temporary file beside `path`, for mkstemp (malloc'ed; NULL without memory). */
static char *tmp_name(const char *path)
{
    char *t = malloc(strlen(path) + 16);
    if (t) sprintf(t, "%s.tmpXXXXXX", path);
    return t;
}

/* The process's umask, read without changing it (umask(2) sets it, racing other threads). */
static mode_t cur_umask(void)
{
    mode_t m = 022;
    char line[128];
    FILE *f = fopen("/proc/self/status", "re");
    if (!f) return m;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "Umask:", 6)) {
            m = (mode_t)strtoul(line + 6, NULL, 8) & 0777;
            break;
        }
    fclose(f);
    return m;
}

int arc_target_of(const char *path, arc_target *t)
{
    struct stat st;
    memset(t, 0, sizeof *t);
    if (lstat(path, &st) < 0) {
        if (errno != ENOENT) return tdc_error(-errno, "%s: %s", path, strerror(errno));
        t->mode = 0666 & ~cur_umask();
        if (!(t->path = strdup(path))) return tdc_error(-ENOMEM, "out of memory");
        return 0;
    }
    if (S_ISLNK(st.st_mode)) {
        if (!(t->path = realpath(path, NULL)) || stat(t->path, &st) < 0) {
            int rc = tdc_error(errno == ENOENT ? -EINVAL : -errno,
                               "%s: a symbolic link to %s; give a regular file", path,
                               errno == ENOENT ? "nothing" : strerror(errno));
            arc_target_free(t);
            return rc;
        }
    } else if (!(t->path = strdup(path))) {
        return tdc_error(-ENOMEM, "out of memory");
    }
    if (!S_ISREG(st.st_mode)) {
        int dir = S_ISDIR(st.st_mode);
        int rc = tdc_error(dir ? -EISDIR : -EINVAL,
                           "%s: %s; an archive is written to a new or a regular file", path,
                           dir ? "is a directory" : "not a regular file");
        arc_target_free(t);
        return rc;
    }
    t->mode = st.st_mode & 07777;
    t->uid = st.st_uid;
    t->gid = st.st_gid;
    t->exists = 1;
    return 0;
}

void arc_target_free(arc_target *t)
{
    free(t->path);
    t->path = NULL;
}

int arc_target_apply(const arc_target *t, int fd, const char *name)
{
    struct stat st;
    if (fstat(fd, &st) < 0) return tdc_error(-errno, "%s: %s", name, strerror(errno));
    /* The owner first: a change of owner clears the set-id bits, which the mode then gives
     * back. One the caller may not give (another user's file) stays the caller's. */
    if (t->exists && (st.st_uid != t->uid || st.st_gid != t->gid) &&
        fchown(fd, t->uid, t->gid) < 0 && errno != EPERM)
        return tdc_error(-errno, "%s: %s", name, strerror(errno));
    if (fchmod(fd, t->mode) < 0) return tdc_error(-errno, "%s: %s", name, strerror(errno));
    return 0;
}

int arc_sink_open(arc_sink *s, const char *path)
{
    unsigned char hdr[ARC_HDR_SIZE] = {0};
    s->fd = -1;
    s->tmp = NULL;
    s->long_seen = 0;
    int rc = arc_target_of(path, &s->to);
    if (rc) return rc;
    if (!(s->tmp = tmp_name(s->to.path))) {
        arc_target_free(&s->to);
        return tdc_error(-ENOMEM, "out of memory writing %s", path);
    }
    if ((s->fd = mkstemp(s->tmp)) < 0) { /* named as asked: the temporary name is ours */
        rc = tdc_error(-errno, "%s: cannot create: %s", s->to.path, strerror(errno));
        free(s->tmp);
        s->tmp = NULL;
        arc_target_free(&s->to);
        return rc;
    }
    rc = fio_write_all(s->fd, hdr, ARC_HDR_SIZE, s->tmp); /* written last, as arc_write's */
    if (rc) arc_sink_abort(s);
    return rc;
}

/* A sink over the existing file `tmp`, which holds the shards' sections already
 * (arc_write_coded_over): its finish writes the rest after them. A failure removes it. */
static int sink_over(arc_sink *s, const char *tmp)
{
    struct stat st;
    s->fd = -1;
    memset(&s->to, 0, sizeof s->to);
    if (!(s->tmp = strdup(tmp))) return tdc_error(-ENOMEM, "out of memory writing %s", tmp);
    if ((s->fd = open(tmp, O_WRONLY | O_CLOEXEC)) < 0 || fstat(s->fd, &st) < 0) {
        int rc = tdc_error(-errno, "%s: cannot open: %s", tmp, strerror(errno));
        arc_sink_abort(s);
        return rc;
    }
    s->to.mode = st.st_mode & 07777; /* as its creator made it */
    return 0;
}

static uint8_t shard_long_words(const arc *a, uint32_t k);

int arc_sink_put(arc_sink *s, arc_coded *c)
{
    int rc = put_sections(s->fd, s->tmp, c);
    for (int i = 0; i < 3; i++) {
        free(c->data[i]);
        c->data[i] = NULL;
    }
    /* the header's record (long_flags) needs it once `from` is gone */
    if (!rc && c->from && !s->long_seen && c->info.long_words == ARC_LONG_UNKNOWN)
        c->info.long_words = shard_long_words(c->from, c->from_shard);
    s->long_seen |= c->info.long_words == ARC_LONG_YES;
    c->from = NULL;
    return rc;
}

/* The header's flags for the shards sh[0..n): ARC_HF_LONG where one holds a word of TOK_CAP
 * bytes. Where none is known to and a shard copied as stored is not known (its archive's
 * header did not say "none"), such shards' dictionaries are decoded until one holds such a
 * word; 0 where one stays unknown. */
static uint32_t long_flags(const arc_coded *sh, uint32_t n)
{
    int unknown = 0;
    for (uint32_t k = 0; k < n; k++) {
        if (sh[k].info.long_words == ARC_LONG_YES) return ARC_HF_LONG_KNOWN | ARC_HF_LONG;
        unknown |= sh[k].info.long_words == ARC_LONG_UNKNOWN;
    }
    for (uint32_t k = 0; unknown && k < n; k++) {
        if (sh[k].info.long_words != ARC_LONG_UNKNOWN) continue;
        uint8_t l = sh[k].from ? shard_long_words(sh[k].from, sh[k].from_shard) : ARC_LONG_UNKNOWN;
        if (l == ARC_LONG_YES) return ARC_HF_LONG_KNOWN | ARC_HF_LONG;
        if (l == ARC_LONG_UNKNOWN) return 0;
    }
    return ARC_HF_LONG_KNOWN;
}

/* What follows the sections of shards sh[0..n) in the sink's file (which end where
 * arc_coded_offset(sh, n) says): the file table, the shard table, the section table and the
 * header, then the file synced and closed, its name given in *tmpout. `check`: the tables
 * are checked first (check_before_write); `flat`: the shard is a->g, whose runs are already
 * archive-wide (every entry is written as shard 0). A failure removes the file. */
static int sink_end(arc_sink *s, arc *a, const arc_coded *sh, uint32_t n, int level, int check,
                    int flat, char **tmpout)
{
    const char *tmp = s->tmp;
    buf b = {0};
    unsigned char *data = NULL;
    arc_secinfo *secs = calloc((size_t)n * 3 + 2, sizeof *secs);
    arc_shard *shards = calloc(n ? n : 1, sizeof *shards);
    uint32_t nsecs = 0;
    int rc = 0;
    *tmpout = NULL;
    if (!n) {
        rc = tdc_error(-EINVAL, "an archive has one shard at least");
        goto fail;
    }
    if (!secs || !shards) {
        rc = tdc_error(-ENOMEM, "out of memory writing %s", tmp);
        goto fail;
    }
    uint64_t root = 0, off = ARC_HDR_SIZE;
    uint32_t flags = long_flags(sh, n);
    for (uint32_t k = 0; k < n; k++) {
        shards[k] = sh[k].info;
        shards[k].root_off = root;
        shards[k].sec = 3 * k;
        root += sh[k].info.root_syms;
        for (int i = 0; i < 3; i++) {
            arc_secinfo *si = &secs[nsecs++];
            *si = sh[k].secs[i];
            si->offset = off;
            off += si->stored;
        }
    }
    if (!a->id) a->id = arc_new_id();
    a->next_ino = 2;
    for (uint32_t i = 0; i < a->nents; i++) {
        if (!a->ents[i].ino) a->ents[i].ino = (uint64_t)i + 1;
        if (a->ents[i].ino >= a->next_ino) a->next_ino = a->ents[i].ino + 1;
    }
    if (check && (rc = check_before_write(a, shards, n, flat))) goto fail;
    if (ftruncate(s->fd, (off_t)off) < 0 || lseek(s->fd, (off_t)off, SEEK_SET) < 0) {
        rc = tdc_error(-errno, "%s: %s", tmp, strerror(errno));
        goto fail;
    }
    for (uint32_t type = ARC_SEC_FILES; type <= ARC_SEC_SHARDS; type++) {
        b.n = 0;
        rc = type == ARC_SEC_FILES ? enc_files(a, &b, flat) : enc_shards(shards, n, &b);
        if (rc) {
            rc = tdc_error(-ENOMEM, "out of memory encoding %s", arc_section_name(type));
            goto fail;
        }
        arc_secinfo *si = &secs[nsecs];
        if ((rc = code_section(type, &b, level, a->plain, si, &data))) goto fail;
        si->offset = off;
        nsecs++;
        rc = fio_write_all(s->fd, data, si->stored, tmp);
        off += si->stored;
        free(data);
        data = NULL;
        if (rc) goto fail;
    }
    /* Section table, then its checksum. */
    b.n = 0;
    if (buf_reserve(&b, (size_t)nsecs * ARC_SECENT_SIZE + 8)) {
        rc = tdc_error(-ENOMEM, "out of memory writing %s", tmp);
        goto fail;
    }
    for (uint32_t i = 0; i < nsecs; i++)
        arc_secent_encode(b.p + (size_t)i * ARC_SECENT_SIZE, &secs[i]);
    arc_table_seal(b.p, nsecs);
    b.n = (size_t)nsecs * ARC_SECENT_SIZE + 8;
    if ((rc = fio_write_all(s->fd, b.p, b.n, tmp))) goto fail;
    unsigned char hdr[ARC_HDR_SIZE];
    arc_header_encode(
        hdr, &(arc_header){.version = ARC_VERSION, .nsec = nsecs, .flags = flags, .table = off});
    a->flags = flags;
    if (pwrite(s->fd, hdr, ARC_HDR_SIZE, 0) != ARC_HDR_SIZE) {
        rc = tdc_error(-errno, "%s: write header: %s", tmp, strerror(errno));
        goto fail;
    }
    a->file_size = off + b.n;
    if (fsync(s->fd) < 0) {
        rc = tdc_error(-errno, "%s: fsync: %s", tmp, strerror(errno));
        goto fail;
    }
    if ((rc = arc_target_apply(&s->to, s->fd, tmp))) goto fail;
    int fd = s->fd;
    s->fd = -1;
    if (close(fd) < 0) {
        rc = tdc_error(-errno, "%s: %s", tmp, strerror(errno));
        goto fail;
    }
    *tmpout = s->tmp;
    s->tmp = NULL;
    arc_target_free(&s->to);
fail:
    if (rc) arc_sink_abort(s);
    free(data);
    buf_free(&b);
    free(secs);
    free(shards);
    return rc;
}

int arc_sink_finish(arc_sink *s, arc *a, const arc_coded *sh, uint32_t n, int level, char **tmp)
{
    return sink_end(s, a, sh, n, level, 1, 0, tmp);
}

void arc_sink_abort(arc_sink *s)
{
    if (!s->tmp) return; /* finished, or never opened (a zeroed sink) */
    if (s->fd >= 0) close(s->fd);
    unlink(s->tmp);
    free(s->tmp);
    arc_target_free(&s->to);
    s->fd = -1;
    s->tmp = NULL;
}

/* Shards sh[0..n) (left as they are) and the rest into a new temporary file beside path,
 * named in *tmpout; `check` and `flat` as sink_end's. */
static int write_coded(const char *path, arc *a, const arc_coded *sh, uint32_t n, int level,
                       int check, int flat, char **tmpout)
{
    arc_sink s;
    *tmpout = NULL;
    int rc = arc_sink_open(&s, path);
    if (rc) return rc;
    for (uint32_t k = 0; k < n && !rc; k++)
        rc = put_sections(s.fd, s.tmp, &sh[k]);
    if (rc) {
        arc_sink_abort(&s);
        return rc;
    }
    return sink_end(&s, a, sh, n, level, check, flat, tmpout);
}

/* Content bytes of a single-grammar archive: every regular entry that holds its data. */
static uint64_t content_bytes(const arc *a)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < a->nents; i++)
        if (a->ents[i].type == ARC_REG && a->ents[i].root_len) n += a->ents[i].size;
    return n;
}

/* The writer's grammar (a->dict, a->g) as one shard. */
static int write_tmp(const char *path, arc *a, int level, int check, char **tmpout)
{
    arc_coded c;
    dict *empty = NULL;
    const dict *d = a->dict;
    *tmpout = NULL;
    if (!d && !(d = empty = dict_new())) return tdc_error(-ENOMEM, "out of memory");
    int rc = shard_encode(d, &a->g, content_bytes(a), level, a->plain, check, &c);
    dict_free(empty);
    if (rc)
        return check ? tdc_error_ctx(rc, "refusing to write an archive the reader would reject")
                     : rc;
    rc = write_coded(path, a, &c, 1, level, check, 1, tmpout);
    arc_coded_free(&c);
    return rc;
}

int arc_write_tmp(const char *path, arc *a, int level, char **tmp)
{
    return write_tmp(path, a, level, 1, tmp);
}

int arc_write_coded_tmp(const char *path, arc *a, const arc_coded *sh, uint32_t n, int level,
                        char **tmp)
{
    return write_coded(path, a, sh, n, level, 1, 0, tmp);
}

int arc_write_coded_over(const char *tmp, arc *a, const arc_coded *sh, uint32_t n, int level)
{
    arc_sink s;
    char *t = NULL;
    int rc = sink_over(&s, tmp);
    if (!rc) rc = sink_end(&s, a, sh, n, level, 1, 0, &t);
    free(t);
    return rc;
}

int arc_commit(const char *tmp, const char *path)
{
    arc_target t;
    int rc = arc_target_of(path, &t);
    if (!rc && rename(tmp, t.path) < 0)
        rc = tdc_error(-errno, "rename %s to %s: %s", tmp, t.path, strerror(errno));
    if (rc) {
        unlink(tmp);
        arc_target_free(&t);
        return rc;
    }
    /* Make the rename itself durable. */
    rc = fio_sync_dir(t.path) ? 1 : 0;
    arc_target_free(&t);
    return rc;
}

/* A written temporary file committed; an fsync failure of the directory counts as -EIO
 * (the message names it). */
static int commit_written(int rc, char *tmp, const char *path)
{
    if (!rc && (rc = arc_commit(tmp, path)) > 0) rc = -EIO;
    free(tmp);
    return rc;
}

int arc_sink_commit(arc_sink *s, arc *a, const arc_coded *sh, uint32_t n, int level,
                    const char *path)
{
    char *tmp = NULL;
    int rc = arc_sink_finish(s, a, sh, n, level, &tmp);
    return commit_written(rc, tmp, path);
}

int arc_write_unchecked(const char *path, arc *a, int level)
{
    char *tmp = NULL;
    int rc = write_tmp(path, a, level, 0, &tmp);
    return commit_written(rc, tmp, path);
}

int arc_write(const char *path, arc *a, int level)
{
    char *tmp = NULL;
    int rc = arc_write_tmp(path, a, level, &tmp);
    return commit_written(rc, tmp, path);
}

int arc_write_coded(const char *path, arc *a, const arc_coded *sh, uint32_t n, int level)
{
    char *tmp = NULL;
    int rc = arc_write_coded_tmp(path, a, sh, n, level, &tmp);
    return commit_written(rc, tmp, path);
}

/* ---------------- decoding ---------------- */

/* Room for the strings of decoded entries: a block (struct arc's strs) or, with `p` NULL,
 * an allocation per string. */
typedef struct strblk {
    char *p;
    size_t n, cap;
} strblk;

static int dec_str(rd *r, char **out, int allow_empty_null, strblk *b)
{
    uint64_t n;
    const unsigned char *p;
    if (rd_varint(r, &n) || rd_bytes(r, n, &p)) return -EBADMSG;
    if (n == 0 && allow_empty_null) {
        *out = NULL;
        return 0;
    }
    if (memchr(p, 0, n)) return -EBADMSG;
    if (b->p && n + 1 > b->cap - b->n) return -EBADMSG; /* its varint made room for the NUL */
    if (!(*out = b->p ? b->p + b->n : malloc(n + 1))) return -ENOMEM;
    if (b->p) b->n += n + 1;
    memcpy(*out, p, n);
    (*out)[n] = 0;
    return 0;
}

/* Whether s lies in the archive's block of strings (not to be freed alone). */
static int in_strs(const arc *a, const char *s)
{
    return a && mem_within(s, a->strs, a->nstrs);
}

/* String s of an entry of `from`, for an entry of `to`: where it lies in from's block, the
 * same place in to's (a copy of it), else a copy of its own. */
static char *str_for(const arc *from, arc *to, const char *s)
{
    return in_strs(from, s) ? to->strs + (s - from->strs) : strdup(s);
}

static int dec_xattrs(rd *r, arc_entry *e)
{
    uint64_t cnt;
    if (rd_varint(r, &cnt) || cnt > (uint64_t)(r->end - r->p)) return -EBADMSG;
    if (!cnt) return 0;
    if (!(e->xattrs = calloc(cnt, sizeof *e->xattrs))) return -ENOMEM;
    for (uint64_t k = 0; k < cnt; k++) {
        arc_xattr *x = &e->xattrs[k];
        uint64_t len;
        const unsigned char *v;
        e->nxattrs = (uint32_t)k + 1;
        strblk own = {0};
        int rc = dec_str(r, &x->name, 0, &own);
        if (rc) return rc;
        if (rd_varint(r, &len) || len > UINT32_MAX || rd_bytes(r, len, &v)) return -EBADMSG;
        if (!(x->val = malloc(len ? len : 1))) return -ENOMEM;
        memcpy(x->val, v, len);
        x->len = (uint32_t)len;
        if (!x->name[0] || (k && strcmp(e->xattrs[k - 1].name, x->name) >= 0)) return -EBADMSG;
    }
    return 0;
}

static int entry_decode(rd *r, uint32_t version, arc_entry *e, uint64_t *shard, strblk *b)
{
    uint64_t mode, uid, gid, zz, nsec;
    const unsigned char *t;
    *shard = 0;
    int rc = dec_str(r, &e->path, 0, b);
    if (!rc && rd_bytes(r, 1, &t)) rc = -EBADMSG;
    if (!rc) e->type = *t;
    if (!rc &&
        (rd_varint(r, &mode) || rd_varint(r, &uid) || rd_varint(r, &gid) || rd_varint(r, &zz) ||
         rd_varint(r, &nsec) || rd_varint(r, &e->size) || (version >= 4 && rd_varint(r, shard)) ||
         rd_varint(r, &e->root_start) || rd_varint(r, &e->root_len) || rd_u64(r, &e->hash)))
        rc = -EBADMSG;
    if (!rc) rc = dec_str(r, &e->link, 1, b);
    if (!rc && ((version >= 2 && rd_varint(r, &e->ino)) ||
                (version >= 3 && is_dev(e->type) && rd_varint(r, &e->rdev))))
        rc = -EBADMSG;
    if (!rc && version >= 2) rc = dec_xattrs(r, e);
    uint64_t tz[4] = {0};
    for (int k = 0; !rc && version >= 5 && k < 4; k++)
        if (rd_varint(r, &tz[k])) rc = -EBADMSG;
    if (rc) return rc == -ENOMEM ? rc : -EPROTO; /* cut short or malformed */
    if (mode > 07777 || uid > 0xffffffffu || gid > 0xffffffffu || nsec >= 1000000000u)
        return tdc_error(-EBADMSG, "file table: '%s' has bad mode, owner or time", e->path);
    if (e->type > (version >= 3 ? ARC_BLK : ARC_LNK))
        return tdc_error(-EBADMSG, "file table: '%s' has unknown type %u", e->path, e->type);
    e->mode = (uint32_t)mode;
    e->uid = (uint32_t)uid;
    e->gid = (uint32_t)gid;
    e->mtime_sec = (int64_t)unzig64(zz);
    e->mtime_nsec = (uint32_t)nsec;
    if (times_from(tz, e))
        return tdc_error(-EBADMSG, "file table: '%s' has bad mode, owner or time", e->path);
    return 0;
}

int arc_entry_decode(rd *r, uint32_t version, arc_entry *e, uint64_t *shard)
{
    strblk own = {0};
    return entry_decode(r, version, e, shard, &own);
}

static int by_ino(const void *x, const void *y, void *ctx)
{
    const arc_entry *e = ctx;
    uint32_t i = *(const uint32_t *)x, j = *(const uint32_t *)y;
    if (e[i].ino != e[j].ino) return e[i].ino < e[j].ino ? -1 : 1;
    return i < j ? -1 : i > j;
}

/* Hard links: entries sharing an inode are non-directories of one type that agree on
 * everything an inode has, and only the first holds a regular file's content. */
static int check_link(const arc_entry *f, const arc_entry *e)
{
    int same = e->type == f->type && e->type != ARC_DIR && !e->root_len && e->size == f->size &&
               e->hash == f->hash && e->mode == f->mode && e->uid == f->uid && e->gid == f->gid &&
               e->rdev == f->rdev && (!e->link || !strcmp(e->link, f->link));
    return same ? 0
                : tdc_error(-EBADMSG, "file table: '%s' shares inode %llu with '%s' but differs",
                            e->path, (unsigned long long)e->ino, f->path);
}

/* Order entries by inode (a->byino) and check numbers and hard links. */
/* a->byino: the entries ordered by (inode, index). */
static int sort_by_ino(arc *a)
{
    free(a->byino);
    if (!(a->byino = malloc((a->nents + 1) * sizeof *a->byino)))
        return tdc_error(-ENOMEM, "file table: out of memory");
    int sorted = 1;
    for (uint32_t i = 0; i < a->nents; i++) {
        a->byino[i] = i;
        if (i && a->ents[i].ino < a->ents[i - 1].ino) sorted = 0;
    }
    /* A packed archive numbers its entries in order: the sort is for archives since edited */
    if (!sorted) sort_r(a->byino, a->nents, sizeof *a->byino, by_ino, a->ents);
    return 0;
}

static int index_inodes(arc *a)
{
    int rc = sort_by_ino(a);
    if (rc) return rc;
    if (a->ents[0].ino != 1) return tdc_error(-EBADMSG, "file table: root is not inode 1");
    for (uint32_t k = 0; k < a->nents; k++) {
        const arc_entry *e = &a->ents[a->byino[k]];
        if (!e->ino || e->ino >= a->next_ino)
            return tdc_error(-EBADMSG, "file table: '%s' has bad inode number %llu", e->path,
                             (unsigned long long)e->ino);
        if (k && a->ents[a->byino[k - 1]].ino == e->ino) {
            int rc = check_link(&a->ents[a->byino[k - 1]], e);
            if (rc) return rc;
        }
    }
    return 0;
}

/* The directories above the entry being checked, outermost first: the root (entry 0) and
 * each directory on the way down, with their path lengths. */
typedef struct dir_stack {
    uint32_t *ent;
    size_t *len;
    size_t n;
} dir_stack;

/* Pop the directories of st that are not above entry i; the innermost one left holds it. In
 * path order a directory's subtree follows it, so the parent of an entry, when it is a
 * directory entry, is above the entry before it: on the stack. */
static void pop_to_parent(const arc *a, dir_stack *st, uint32_t i)
{
    const char *p = a->ents[i].path;
    size_t n = strlen(p);
    while (st->n > 1) {
        size_t l = st->len[st->n - 1];
        if (l < n && p[l] == '/' && !memcmp(a->ents[st->ent[st->n - 1]].path, p, l)) break;
        st->n--;
    }
}

/* Whether entry i's parent directory is the innermost directory on st, after popping those
 * that are not above it. */
static int parent_ok(const arc *a, dir_stack *st, uint32_t i)
{
    const char *slash = strrchr(a->ents[i].path, '/');
    pop_to_parent(a, st, i);
    return st->len[st->n - 1] == (slash ? (size_t)(slash - a->ents[i].path) : 0);
}

static int dir_stack_init(const arc *a, dir_stack *st)
{
    size_t cap = 1; /* every directory is pushed at most once */
    for (uint32_t i = 0; i < a->nents; i++)
        if (a->ents[i].type == ARC_DIR) cap++;
    *st = (dir_stack){malloc(cap * sizeof *st->ent), malloc(cap * sizeof *st->len), 1};
    if (!st->ent || !st->len) {
        free(st->ent);
        free(st->len);
        return tdc_error(-ENOMEM, "file table: out of memory");
    }
    st->ent[0] = 0; /* the root: above every entry */
    st->len[0] = 0;
    return 0;
}

static void push_dir(const arc *a, dir_stack *st, uint32_t i)
{
    if (a->ents[i].type != ARC_DIR) return;
    st->ent[st->n] = i;
    st->len[st->n++] = strlen(a->ents[i].path);
}

int arc_parents(const arc *a, uint32_t *parent)
{
    dir_stack st;
    int rc = dir_stack_init(a, &st);
    if (rc) return rc;
    parent[0] = 0;
    for (uint32_t i = 1; i < a->nents; i++) {
        pop_to_parent(a, &st, i);
        parent[i] = st.ent[st.n - 1];
        push_dir(a, &st, i);
    }
    free(st.ent);
    free(st.len);
    return 0;
}

/* The per-entry rules of arc_check_table for entry i (entries before it already checked; st:
 * the directories above the entry before it). */
static int check_entry(const arc *a, uint32_t i, dir_stack *st)
{
    const arc_entry *e = &a->ents[i];
    if (!arc_mode_of_type(e->type))
        return tdc_error(-EBADMSG, "file table: '%s' has unknown type %u", e->path, e->type);
    if (e->mode > 07777 || e->mtime_nsec >= 1000000000u || e->ctime_nsec >= 1000000000u ||
        e->atime_nsec >= 1000000000u)
        return tdc_error(-EBADMSG, "file table: '%s' has bad mode, owner or time", e->path);
    if (i == 0)
        return e->path[0] || e->type != ARC_DIR
                   ? tdc_error(-EBADMSG, "file table: first entry is not the root directory")
                   : 0;
    if (arc_path_check(e->path)) return tdc_error_ctx(-EBADMSG, "file table: unsafe path");
    if (arc_path_cmp(a->ents[i - 1].path, e->path) >= 0)
        return tdc_error(-EBADMSG, "file table: '%s' is duplicated or out of order", e->path);
    if ((e->type == ARC_LNK) != (e->link != NULL))
        return tdc_error(-EBADMSG, "file table: '%s' has a bad symlink target", e->path);
    if (e->type != ARC_REG && e->root_len != 0)
        return tdc_error(-EBADMSG, "file table: '%s' has a bad root range", e->path);
    if (e->type == ARC_LNK && e->size != strlen(e->link))
        return tdc_error(-EBADMSG, "file table: '%s' has a bad symlink size", e->path);
    if (e->type > ARC_LNK && e->size)
        return tdc_error(-EBADMSG, "file table: special file '%s' has a size", e->path);
    if (!is_dev(e->type) && e->rdev)
        return tdc_error(-EBADMSG, "file table: '%s' has a device number", e->path);
    /* The parent must be an earlier directory entry. */
    if (!parent_ok(a, st, i))
        return tdc_error(-EBADMSG, "file table: '%s' has no parent directory", e->path);
    push_dir(a, st, i);
    return 0;
}

int arc_check_table(arc *a)
{
    if (!a->nents) return tdc_error(-EBADMSG, "file table: no entries");
    dir_stack st;
    int rc = dir_stack_init(a, &st);
    for (uint32_t i = 0; i < a->nents && !rc; i++)
        rc = check_entry(a, i, &st);
    free(st.ent);
    free(st.len);
    return rc ? rc : index_inodes(a);
}

int arc_finish(arc *a)
{
    a->next_ino = 2;
    for (uint32_t i = 0; i < a->nents; i++)
        if (a->ents[i].ino >= a->next_ino) a->next_ino = a->ents[i].ino + 1;
    int rc = gram_topo(&a->g);
    return rc ? rc : arc_check_table(a);
}

uint32_t arc_ino_links(const arc *a, uint64_t ino, uint32_t *pos)
{
    uint32_t lo = 0, hi = a->nents;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (a->ents[a->byino[mid]].ino < ino)
            lo = mid + 1;
        else
            hi = mid;
    }
    uint32_t n = 0;
    while (lo + n < a->nents && a->ents[a->byino[lo + n]].ino == ino)
        n++;
    if (pos) *pos = lo;
    return n;
}

int64_t arc_ino_entry(const arc *a, uint64_t ino)
{
    uint32_t pos;
    return arc_ino_links(a, ino, &pos) ? (int64_t)a->byino[pos] : -ENOENT;
}

/* Parse the file table; arc_check_table then checks what it says. */
static int dec_files(arc *a, const unsigned char *p, size_t n, uint32_t version)
{
    rd r = {p, p + n};
    uint64_t cnt;
    if (version >= 2 && (rd_u64(&r, &a->id) || rd_u64(&r, &a->prev_id) ||
                         rd_varint(&r, &a->next_ino) || a->next_ino > ARC_INO_MAX))
        return tdc_error(-EBADMSG, "file table: bad header");
    if (rd_varint(&r, &cnt) || cnt == 0 || cnt > n)
        return tdc_error(-EBADMSG, "file table: bad entry count");
    if (version < 2) a->next_ino = cnt + 1;
    /* Every string of the rows is its bytes after a varint of their count: n bytes of rows
     * hold no more than n bytes of strings with their NULs. */
    if (!(a->ents = calloc(cnt, sizeof *a->ents)) || !(a->strs = malloc(n)))
        return tdc_error(-ENOMEM, "file table: out of memory");
    mem_populate(a->ents, cnt * sizeof *a->ents);
    strblk blk = {a->strs, 0, n};
    a->nstrs = n;
    for (uint64_t i = 0; i < cnt; i++) {
        arc_entry *e = &a->ents[i];
        uint64_t shard = 0;
        a->nents = (uint32_t)i + 1;
        e->ino = i + 1;
        int rc = entry_decode(&r, version, e, &shard, &blk);
        if (rc == -EBADMSG) return rc;
        if (rc)
            return tdc_error(-EBADMSG, "file table: entry %llu is truncated or malformed",
                             (unsigned long long)i);
        if (shard >= a->nshards || e->root_start > a->shards[shard].root_syms)
            return tdc_error(-EBADMSG, "file table: '%s' has a bad shard or root range", e->path);
        e->shard = (uint32_t)shard;
        e->root_start += a->shards[shard].root_off; /* archive-wide from here on */
    }
    if (r.p != r.end) return tdc_error(-EBADMSG, "file table: trailing bytes");
    return arc_check_table(a);
}

/* Expand a zstd frame that must hold exactly `want` bytes into a fresh buffer. */
static int unzstd(const unsigned char *z, size_t zn, uint64_t want, const char *name,
                  unsigned char **out)
{
    unsigned long long fcs = ZSTD_getFrameContentSize(z, zn);
    if (fcs != want)
        return tdc_error(-EBADMSG, "section %s: compressed frame does not match declared size",
                         name);
    unsigned char *raw = malloc(want ? want : 1);
    if (!raw)
        return tdc_error(-ENOMEM, "section %s: cannot allocate %llu bytes", name,
                         (unsigned long long)want);
    mem_populate(raw, want);
    size_t got = ZSTD_decompress(raw, want, z, zn);
    if (ZSTD_isError(got) || got != want) {
        free(raw);
        return tdc_error(-EBADMSG, "section %s: decompression failed", name);
    }
    *out = raw;
    return 0;
}

/* The zstd frame of a section stored in a layout of its own (CODEC_ZSTD_FRONT, _COLS),
 * expanded into *out (*n bytes). Such a layout is never much longer than the section's raw
 * bytes: at most 3 x raw + slack, or the frame is refused before anything is allocated. The
 * front coding adds three bytes of prefix per token at most, and a token has two bytes at
 * least (slack 16); the columns grow a few varints per entry by a byte or two where the
 * rows' do not shrink, and every entry has a dozen fields (slack 256). */
static int unzstd_layout(const unsigned char *z, const arc_secinfo *s, const char *name,
                         uint64_t slack, unsigned char **out, uint64_t *n)
{
    unsigned long long fcs = ZSTD_getFrameContentSize(z, s->stored);
    if (fcs == ZSTD_CONTENTSIZE_UNKNOWN || fcs == ZSTD_CONTENTSIZE_ERROR ||
        fcs > 3 * s->raw + slack)
        return tdc_error(-EBADMSG, "section %s: compressed frame does not match declared size",
                         name);
    *n = fcs;
    return unzstd(z, s->stored, fcs, name, out);
}

/* A file table's frame of columns, back to its rows in *out (s->raw bytes). */
static int uncols(const unsigned char *z, const arc_secinfo *s, const char *name, uint32_t version,
                  unsigned char **out)
{
    unsigned char *cols;
    uint64_t n;
    int rc = unzstd_layout(z, s, name, 256, &cols, &n);
    if (rc) return rc;
    rc = ftcols_decode(cols, n, s->raw, version, out);
    free(cols);
    return rc;
}

/* Section s's stored bytes, read and checked against its checksum, in *st (fresh). */
static int read_stored(int fd, const char *path, const arc_secinfo *s, unsigned char **st)
{
    const char *name = arc_section_name(s->type);
    if (!(*st = malloc(s->stored ? s->stored : 1)))
        return tdc_error(-ENOMEM, "section %s: cannot allocate %llu bytes", name,
                         (unsigned long long)s->stored);
    mem_populate(*st, s->stored);
    int rc = fio_read_at(fd, *st, s->stored, s->offset, path);
    if (!rc && XXH3_64bits(*st, s->stored) != s->hash)
        rc = tdc_error(-EBADMSG, "section %s: checksum mismatch (archive is corrupt)", name);
    if (rc) {
        free(*st);
        *st = NULL;
    }
    return rc;
}

/* Read, verify and expand one section into a fresh buffer of *n bytes: its raw bytes, or for
 * a front-coded dictionary with `front` set, the front coding (dict_front_load's input). */
static int read_section(const arc *a, const arc_secinfo *s, int front, unsigned char **out,
                        uint64_t *n)
{
    const char *name = arc_section_name(s->type);
    unsigned char *st = NULL, *raw = NULL;
    int rc;
    int stored_raw = s->codec == CODEC_RAW || s->codec == CODEC_KIND ||
                     (is_text(s) && s->type != ARC_SEC_DICT); /* empty */
    if (s->raw > RAW_MAX || (stored_raw && s->raw != s->stored))
        return tdc_error(-EBADMSG, "section %s: declared size %llu is impossible", name,
                         (unsigned long long)s->raw);
    if ((rc = read_stored(a->fd, a->path, s, &st))) return rc;
    *n = s->raw;
    if (stored_raw) {
        *out = st;
        return 0;
    }
    if (s->codec == CODEC_ZSTD_COLS) {
        rc = uncols(st, s, name, a->version, &raw);
    } else if (s->codec != CODEC_ZSTD_FRONT) {
        rc = unzstd(st, s->stored, s->raw, name, &raw);
    } else if (!(rc = unzstd_layout(st, s, name, 16, &raw, n)) && !front) {
        /* back to dict_encode's layout */
        buf b = {0};
        rc = dict_front_decode(raw, *n, s->raw, &b);
        free(raw);
        raw = b.p;
        *n = s->raw;
        if (rc) buf_free(&b);
    }
    if (rc) goto fail;
    free(st);
    *out = raw;
    return 0;
fail:
    free(st);
    return rc;
}

/* Read, verify and expand one section into a fresh buffer of its raw bytes. */
static int load_section(const arc *a, const arc_secinfo *s, unsigned char **out)
{
    uint64_t n;
    return read_section(a, s, 0, out, &n);
}

int arc_long_words(const arc *a)
{
    if (!(a->flags & ARC_HF_LONG_KNOWN)) return ARC_LONG_UNKNOWN;
    return a->flags & ARC_HF_LONG ? ARC_LONG_YES : ARC_LONG_NO;
}

static int load_text(const arc *a, uint32_t k, dict **d, gram *g);

/* ARC_LONG_* of shard k: where the header does not say, its dictionary decoded alone (a text
 * shard's text tokenized); a dictionary that cannot be decoded leaves it unknown (a writer
 * copying the shard checks it and says why). */
static uint8_t shard_long_words(const arc *a, uint32_t k)
{
    const arc_shard *sh = &a->shards[k];
    if (sh->long_words != ARC_LONG_UNKNOWN || a->version < 4) return sh->long_words;
    const arc_secinfo *s = &a->secs[sh->sec];
    dict *d = NULL;
    gram g = {0};
    int rc;
    if (is_text(s)) {
        rc = load_text(a, k, &d, &g);
        gram_free(&g);
    } else {
        int front = s->codec == CODEC_ZSTD_FRONT;
        unsigned char *raw = NULL;
        uint64_t n;
        rc = read_section(a, s, front, &raw, &n);
        if (!rc) rc = front ? dict_front_load(raw, n, s->raw, &d) : dict_decode(raw, n, &d);
        free(raw);
    }
    uint8_t r = rc ? ARC_LONG_UNKNOWN : long_of(d);
    dict_free(d);
    return r;
}

int arc_shard_ref(const arc *a, uint32_t k, arc_coded *out)
{
    memset(out, 0, sizeof *out);
    if (k >= a->nshards || !a->path || a->fd < 0) return tdc_error(-EINVAL, "no shard %u", k);
    out->info = a->shards[k];
    out->info.damage = NULL; /* the archive's */
    out->from_shard = k;
    for (int i = 0; i < 3; i++)
        out->secs[i] = a->secs[a->shards[k].sec + i];
    out->from = a;
    return 0;
}

int arc_shard_check(const arc *a, uint32_t k)
{
    if (k >= a->nshards || !a->path || a->fd < 0) return tdc_error(-EINVAL, "no shard %u", k);
    int rc = 0;
    for (int i = 0; i < 3 && !rc; i++)
        rc = pass_section(a, &a->secs[a->shards[k].sec + i], -1, NULL);
    return rc ? tdc_error_ctx(rc, "shard %u", k) : 0;
}

int arc_shard_text(const arc *a, uint32_t k)
{
    if (k >= a->nshards || a->version < 4) return 0;
    const arc_secinfo *s = &a->secs[a->shards[k].sec];
    return s->codec == CODEC_ZSTD_BARE ? 2 : is_text(s);
}

int arc_shard_rule_syms(const arc *a, uint32_t k, uint64_t *n)
{
    *n = 0;
    if (k >= a->nshards || a->version < 4)
        return tdc_error(-EINVAL, "%s: no shard %u in the shard table", a->path, k);
    const arc_secinfo *s = &a->secs[a->shards[k].sec + 1];
    if (arc_shard_text(a, k) || !s->raw) return 0;
    unsigned char *p;
    int rc = load_section(a, s, &p);
    if (rc) return rc;
    rd r = {p, p + s->raw};
    uint64_t nr, len;
    if (rd_varint(&r, &nr) || nr != a->shards[k].nrules)
        rc = tdc_error(-EBADMSG, "shard %u: rules section: bad rule count", k);
    for (uint64_t i = 0; !rc && i < nr; i++)
        if (rd_varint(&r, &len) || len > s->raw)
            rc = tdc_error(-EBADMSG, "shard %u: rules section: bad length of rule %llu", k,
                           (unsigned long long)i + 1);
        else
            *n += len;
    free(p);
    return rc;
}

int arc_section_bytes(arc *a, uint32_t i, unsigned char **out)
{
    if (i >= a->nsecs || !a->path) return tdc_error(-EINVAL, "no section %u", i);
    return load_section(a, &a->secs[i], out);
}

/* Every regular file's run lies inside the archive's root of `root_syms` symbols. */
static int check_runs(const arc *a, uint64_t root_syms)
{
    for (uint32_t i = 0; i < a->nents; i++) {
        const arc_entry *e = &a->ents[i];
        if (e->type == ARC_REG &&
            (e->root_start > root_syms || e->root_len > root_syms - e->root_start))
            return tdc_error(-EBADMSG, "file table: '%s' has a bad root range", e->path);
    }
    return 0;
}

/* Name the archive in a message from a decoder that does not know it. */
static int with_path(int rc, const char *path)
{
    if (strncmp(tdc_errmsg(), path, strlen(path))) tdc_error_ctx(rc, "%s", path);
    return rc;
}

/* Whether a section's codec is one its type may have in an archive of `version`: the front
 * coding is the dictionary's only, the kind layout the rules' and root's only, the columns a
 * version 4 file table's only. */
static int codec_fits(const arc_secinfo *s, uint32_t version)
{
    switch (s->codec) {
    case CODEC_RAW:
    case CODEC_ZSTD:
        return 1;
    case CODEC_ZSTD_FRONT:
        return s->type == ARC_SEC_DICT;
    case CODEC_KIND:
    case CODEC_ZSTD_KIND:
        return s->type == ARC_SEC_RULES || s->type == ARC_SEC_ROOT;
    case CODEC_ZSTD_COLS:
        return s->type == ARC_SEC_FILES && version >= 4;
    case CODEC_ZSTD_TEXT:
    case CODEC_ZSTD_BARE:
        return s->type <= ARC_SEC_ROOT && version >= 4;
    }
    return 0;
}

static int is_kinded(const arc_secinfo *s)
{
    return s->codec == CODEC_KIND || s->codec == CODEC_ZSTD_KIND;
}

/* A shard's rules and root are both in the kind layout or neither (the root's numbers are
 * those the rules section defines); a shard stored as its text has that codec on all three
 * sections, its rules and root holding nothing. */
static int check_kinds_agree(const arc *a)
{
    for (uint32_t k = 0; k < a->nshards; k++) {
        const arc_secinfo *s = &a->secs[3 * k];
        int text = is_text(&s[0]) || is_text(&s[1]) || is_text(&s[2]);
        if ((text && (s[0].codec != s[1].codec || s[0].codec != s[2].codec)) ||
            (text && (s[1].raw || s[1].stored || s[2].raw || s[2].stored)))
            return tdc_error(-EBADMSG, "shard %u: stored as text in some sections only", k);
        if (is_kinded(&s[1]) != is_kinded(&s[2]))
            return tdc_error(-EBADMSG, "shard %u: rules in the %s layout but root in the %s one", k,
                             is_kinded(&s[1]) ? "kind" : "plain",
                             is_kinded(&s[2]) ? "kind" : "plain");
    }
    return 0;
}

/* The section table's shape: version 4 holds three sections per shard (dictionary, rules,
 * root), then the file table and the shard table; older versions the four sections of
 * their one grammar. Sets a->nshards (older versions: one shard, its figures unknown until
 * it is loaded). */
static int check_layout(arc *a)
{
    uint32_t n = a->nsecs;
    if (a->version < 4) {
        if (n != 4) return tdc_error(-EBADMSG, "%u sections where version %u has 4", n, a->version);
        for (uint32_t i = 0; i < n; i++)
            if (a->secs[i].type != i + 1)
                return tdc_error(-EBADMSG, "section %u has type %u, not %u", i, a->secs[i].type,
                                 i + 1);
        a->nshards = 1;
        if (!(a->shards = calloc(1, sizeof *a->shards))) return -ENOMEM;
        return check_kinds_agree(a);
    }
    if (n < 5 || (n - 2) % 3)
        return tdc_error(-EBADMSG, "%u sections: not three per shard and two more", n);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t want = i + 2 >= n ? ARC_SEC_FILES + (i + 2 - n) : ARC_SEC_DICT + i % 3;
        if (a->secs[i].type != want)
            return tdc_error(-EBADMSG, "section %u is a %s where a %s belongs", i,
                             arc_section_name(a->secs[i].type), arc_section_name(want));
    }
    a->nshards = (n - 2) / 3;
    if (!(a->shards = calloc(a->nshards, sizeof *a->shards))) return -ENOMEM;
    return check_kinds_agree(a);
}

/* The shard table (version 4): per shard its content bytes, root symbols, tokens and rules,
 * in the order of its sections. */
static int dec_shards(arc *a, const unsigned char *p, size_t n)
{
    rd r = {p, p + n};
    uint64_t cnt, root = 0;
    if (rd_varint(&r, &cnt) || cnt != a->nshards)
        return tdc_error(-EBADMSG, "shard table: shard count does not match the sections");
    for (uint32_t k = 0; k < a->nshards; k++) {
        arc_shard *s = &a->shards[k];
        uint64_t nt, nr;
        if (rd_varint(&r, &s->bytes) || rd_varint(&r, &s->root_syms) || rd_varint(&r, &nt) ||
            rd_varint(&r, &nr) || nt > 0x7fffffffu || nr + nt + 1 > 0xffffffffu ||
            s->root_syms > (uint64_t)1 << 56 || root + s->root_syms < root)
            return tdc_error(-EBADMSG, "shard table: shard %u is malformed", k);
        s->ntokens = (uint32_t)nt;
        s->nrules = (uint32_t)nr;
        s->root_off = root;
        s->sec = 3 * k;
        /* one shard's answer where the header's says it for every shard */
        s->long_words = arc_long_words(a) == ARC_LONG_NO ? ARC_LONG_NO : ARC_LONG_UNKNOWN;
        root += s->root_syms;
    }
    if (r.p != r.end) return tdc_error(-EBADMSG, "shard table: trailing bytes");
    return 0;
}

/* Symbols of the archive's root: all shards' roots. */
static uint64_t total_root(const arc *a)
{
    const arc_shard *l = &a->shards[a->nshards - 1];
    return l->root_off + l->root_syms;
}

/* a->byshard and a->shard_at (arc.h), by a counting sort on the shard. An entry holds its
 * inode's content where it is a regular file with a run and its inode's first entry, the
 * first of its inode in a->byino (arc_ino_entry), marked in one pass over a->byino. */
static int index_shards(arc *a)
{
    uint32_t *at = calloc((size_t)a->nshards + 1, sizeof *at);
    uint32_t *ids = malloc((a->nents ? a->nents : 1) * sizeof *ids);
    unsigned char *holds = calloc(a->nents ? a->nents : 1, 1);
    if (!at || !ids || !holds) {
        free(at);
        free(ids);
        free(holds);
        return tdc_error(-ENOMEM, "out of memory");
    }
    for (uint32_t k = 0; k < a->nents; k++) {
        const arc_entry *e = &a->ents[a->byino[k]];
        holds[a->byino[k]] =
            e->type == ARC_REG && e->root_len && (!k || a->ents[a->byino[k - 1]].ino != e->ino);
    }
    for (uint32_t i = 0; i < a->nents; i++)
        if (holds[i]) at[a->ents[i].shard + 1]++;
    for (uint32_t k = 0; k < a->nshards; k++)
        at[k + 1] += at[k];
    for (uint32_t i = 0, k; i < a->nents; i++)
        if (holds[i]) ids[at[k = a->ents[i].shard]++] = i;
    for (uint32_t k = a->nshards; k > 0; k--) /* each at[k] was moved to the next group's start */
        at[k] = at[k - 1];
    at[0] = 0;
    free(holds);
    a->byshard = ids;
    a->shard_at = at;
    return 0;
}

/* Read and check the table sections: the shard table (version 4) and the file table. */
static int load_tables(arc *a)
{
    unsigned char *p = NULL;
    int rc = 0;
    uint32_t files = a->version >= 4 ? a->nsecs - 2 : 3;
    if (a->version >= 4) {
        rc = load_section(a, &a->secs[a->nsecs - 1], &p);
        if (!rc) rc = dec_shards(a, p, a->secs[a->nsecs - 1].raw);
        free(p);
        p = NULL;
    } else {
        a->shards[0].root_syms = UINT64_MAX >> 8; /* known once loaded */
    }
    if (!rc) rc = load_section(a, &a->secs[files], &p);
    if (!rc) rc = dec_files(a, p, a->secs[files].raw, a->version);
    free(p);
    if (!rc && a->version >= 4) rc = check_runs(a, total_root(a));
    if (!rc && a->version < 4) a->shards[0].bytes = content_bytes(a);
    if (!rc) rc = index_shards(a);
    return rc;
}

int arc_open_meta(const char *path, arc **out)
{
    arc *a = calloc(1, sizeof *a);
    unsigned char hdr[ARC_HDR_SIZE], *tab = NULL;
    struct stat st;
    int rc;
    if (!a) return tdc_error(-ENOMEM, "out of memory");
    a->fd = fio_open_file(path, O_RDONLY | O_CLOEXEC, &st);
    if (a->fd < 0) {
        rc = errno == EINVAL ? tdc_error(-EINVAL, "%s: not a regular file", path)
                             : tdc_error(-errno, "%s: %s", path, strerror(errno));
        goto fail;
    }
    a->pending = 1;
    if (!(a->path = strdup(path))) {
        rc = tdc_error(-ENOMEM, "out of memory");
        goto fail;
    }
    a->file_size = (uint64_t)st.st_size;
    if (a->file_size < ARC_HDR_SIZE) {
        rc = tdc_error(-EBADMSG, "%s: too short to be an archive (%llu bytes)", path,
                       (unsigned long long)a->file_size);
        goto fail;
    }
    if ((rc = fio_read_at(a->fd, hdr, ARC_HDR_SIZE, 0, path))) goto fail;
    arc_header hd;
    int bad = arc_header_decode(hdr, &hd);
    if (bad == -1) {
        rc = tdc_error(-EBADMSG, "%s: not a tadocfs archive (bad magic)", path);
        goto fail;
    }
    if (bad) {
        rc = tdc_error(-EBADMSG, "%s: header checksum mismatch", path);
        goto fail;
    }
    a->version = hd.version;
    a->flags = hd.flags;
    if (a->version < 1 || a->version > ARC_VERSION) {
        rc = tdc_error(-EBADMSG, "%s: unsupported archive version %u", path, a->version);
        goto fail;
    }
    uint64_t toff = hd.table;
    uint32_t nsec = hd.nsec;
    uint64_t tlen = (uint64_t)nsec * ARC_SECENT_SIZE + 8;
    if (nsec < 4 || toff < ARC_HDR_SIZE || toff > a->file_size || tlen > a->file_size - toff) {
        rc = tdc_error(-EBADMSG, "%s: section table lies outside the file (truncated archive?)",
                       path);
        goto fail;
    }
    if (tlen != a->file_size - toff) {
        rc = tdc_error(-EBADMSG, "%s: %llu bytes after the section table (damaged or appended to)",
                       path, (unsigned long long)(a->file_size - toff - tlen));
        goto fail;
    }
    if (!(tab = malloc(tlen)) || !(a->secs = calloc(nsec, sizeof *a->secs))) {
        rc = -ENOMEM;
        goto fail;
    }
    if ((rc = fio_read_at(a->fd, tab, tlen, toff, path))) goto fail;
    if (XXH3_64bits(tab, tlen - 8) != le64(tab + tlen - 8)) {
        rc = tdc_error(-EBADMSG, "%s: section table checksum mismatch", path);
        goto fail;
    }
    if (a->version < 2) a->id = le64(tab + tlen - 8) | 1; /* stable, as v1 has no stored identity */
    for (uint32_t i = 0; i < nsec; i++) {
        arc_secinfo *s = &a->secs[i];
        arc_secent_decode(tab + (size_t)i * ARC_SECENT_SIZE, s);
        if (s->type < ARC_SEC_DICT || s->type > ARC_SEC_SHARDS || !codec_fits(s, a->version) ||
            s->offset < ARC_HDR_SIZE || s->offset > toff || s->stored > toff - s->offset) {
            rc = tdc_error(-EBADMSG, "%s: section %u (%s) has a bad table entry", path, i,
                           arc_section_name(s->type));
            goto fail;
        }
    }
    a->nsecs = nsec;
    if ((rc = check_layout(a)) || (rc = load_tables(a))) goto fail;
    free(tab);
    *out = a;
    return 0;
fail:
    free(tab);
    arc_free(a);
    return with_path(rc, path);
}

/* One shard's grammar being loaded on three threads: the dictionary on one, the root on
 * another, the rules on the caller's. The rules need only the token count, handed over as
 * soon as the dictionary section is expanded. In the kind layout the rules need each token's
 * kind, which a front-coded dictionary gives from its lengths before its tokens are decoded
 * (another one once decoded), and the root the kinds the rules section starts with: the
 * root's thread expands its section meanwhile, then waits for those kinds and decodes the
 * root while the rule bodies are decoded. */
typedef struct job_result {
    int done; /* rc and msg are set */
    int rc;
    char msg[512];
} job_result;

typedef struct side_job {
    const arc *a;
    const arc_secinfo *secs; /* the shard's dictionary, rules and root */
    int kinded;              /* rules and root in the kind layout */
    dict *dict;
    gram *g;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int count_known;            /* ntokens is set */
    const unsigned char *words; /* each token's kind (1: word), once known */
    unsigned char *words_own;   /* words when they came before the dictionary */
    int kinds_state; /* kinded: 0 not yet read, 1 kinds set, -1 the rules failed before them */
    const syms_kinds *kinds;
    uint32_t ntokens;
    job_result side, root; /* the dictionary's job, the root's */
} side_job;

/* syms_dec_rules's callback: the kinds the root needs are read. */
static void kinds_known(void *ctx, const syms_kinds *k)
{
    side_job *j = ctx;
    pthread_mutex_lock(&j->lock);
    j->kinds = k;
    j->kinds_state = 1;
    pthread_cond_broadcast(&j->cond);
    pthread_mutex_unlock(&j->lock);
}

/* After the rules: if their kinds never came, say so, so the root's job stops waiting. */
static void kinds_settle(side_job *j)
{
    pthread_mutex_lock(&j->lock);
    if (!j->kinds_state) j->kinds_state = -1;
    pthread_cond_broadcast(&j->cond);
    pthread_mutex_unlock(&j->lock);
}

/* The rules section's kinds, or NULL when the rules failed before them. */
static const syms_kinds *kinds_wait(side_job *j)
{
    pthread_mutex_lock(&j->lock);
    while (!j->kinds_state)
        pthread_cond_wait(&j->cond, &j->lock);
    const syms_kinds *k = j->kinds_state > 0 ? j->kinds : NULL;
    pthread_mutex_unlock(&j->lock);
    return k;
}

/* The token count is known, and with words (when not NULL) each token's kind. */
static void side_publish(side_job *j, uint32_t ntokens, const unsigned char *words)
{
    pthread_mutex_lock(&j->lock);
    j->ntokens = ntokens;
    j->count_known = 1;
    if (words && !j->words) j->words = words;
    pthread_cond_broadcast(&j->cond);
    pthread_mutex_unlock(&j->lock);
}

/* The dictionary: a front-coded one decoded straight from its front coding. */
static int dict_load(side_job *j)
{
    const arc *a = j->a;
    const arc_secinfo *s = &j->secs[0];
    int front = s->codec == CODEC_ZSTD_FRONT;
    unsigned char *raw = NULL;
    uint64_t n;
    int rc = read_section(a, s, front, &raw, &n);
    if (rc) return rc;
    uint32_t nt; /* both layouts start with the count */
    if (front && j->kinded && !dict_front_words(raw, n, &j->words_own, &nt))
        side_publish(j, nt, j->words_own);
    else if (!dict_encoded_count(raw, n, &nt))
        side_publish(j, nt, NULL);
    rc = front ? dict_front_load(raw, n, s->raw, &j->dict) : dict_decode(raw, n, &j->dict);
    free(raw);
    if (!rc) side_publish(j, dict_count(j->dict), j->dict->word.p);
    return rc;
}

static int root_load(side_job *j)
{
    unsigned char *raw = NULL;
    int rc = load_section(j->a, &j->secs[2], &raw);
    const syms_kinds *k = !rc && j->kinded ? kinds_wait(j) : NULL;
    if (!rc && (k || !j->kinded)) /* else the rules failed */
        rc = syms_dec_root(j->g, k, raw, j->secs[2].raw);
    free(raw);
    return rc;
}

static void job_finish(side_job *j, job_result *res, int rc)
{
    pthread_mutex_lock(&j->lock);
    res->rc = rc;
    if (rc) snprintf(res->msg, sizeof res->msg, "%s", tdc_errmsg());
    res->done = 1;
    pthread_cond_broadcast(&j->cond);
    pthread_mutex_unlock(&j->lock);
}

static void *side_main(void *arg)
{
    side_job *j = arg;
    job_finish(j, &j->side, dict_load(j));
    return NULL;
}

static void *root_main(void *arg)
{
    side_job *j = arg;
    job_finish(j, &j->root, root_load(j));
    return NULL;
}

/* The token count (with the tokens' kinds when the rules are kinded): 0, or -1 once the
 * dictionary's job failed before finding what is needed. */
static int side_wait(side_job *j, uint32_t *ntokens)
{
    pthread_mutex_lock(&j->lock);
    while (!(j->kinded ? j->words != NULL : j->count_known) && !j->side.done)
        pthread_cond_wait(&j->cond, &j->lock);
    int known = j->kinded ? j->words != NULL : j->count_known;
    *ntokens = j->ntokens;
    pthread_mutex_unlock(&j->lock);
    return known ? 0 : -1;
}

/* The rules, decoded and ordered while the other jobs run. */
static int load_rules(side_job *j, syms_kinds **k)
{
    unsigned char *rules = NULL;
    int rc = load_section(j->a, &j->secs[1], &rules);
    if (!rc && !side_wait(j, &j->g->ntokens))
        rc = syms_dec_rules(j->g, j->kinded ? j->words : NULL, rules, j->secs[1].raw, k,
                            j->kinded ? kinds_known : NULL, j);
    if (j->kinded) kinds_settle(j);
    free(rules);
    return rc;
}

/* Shard k stored as its text: its dictionary section's payload, tokenized. */
static int load_text(const arc *a, uint32_t k, dict **d, gram *g)
{
    const arc_shard *sh = &a->shards[k];
    const arc_secinfo *dsec = &a->secs[sh->sec];
    unsigned char *raw = NULL;
    *d = NULL;
    int rc = load_section(a, dsec, &raw);
    if (!rc)
        rc = textshard_grammar(raw, dsec->raw, dsec->codec == CODEC_ZSTD_BARE, sh->root_syms,
                               sh->ntokens, d, g, NULL);
    free(raw);
    return rc;
}

/* Shard k's grammar in *d and *g, as loaded with result rc: checked against the shard table
 * (and its root's symbols unless the kind layout made them), or freed with the failure. */
static int check_shard(const arc *a, uint32_t k, int rc, int check_root, dict **d, gram *g)
{
    const arc_shard *sh = &a->shards[k];
    if (!rc && dict_count(*d) != g->ntokens)
        rc = tdc_error(-EBADMSG, "dictionary: token count changed while decoding");
    else if (!rc && a->version >= 4 &&
             (g->ntokens != sh->ntokens || g->nrules != sh->nrules || g->root.n != sh->root_syms))
        rc = tdc_error(-EBADMSG, "grammar does not match the shard table");
    if (!rc && check_root) rc = gram_check_root(g);
    if (rc) {
        dict_free(*d);
        *d = NULL;
        gram_free(g);
        memset(g, 0, sizeof *g);
        if (a->nshards > 1) tdc_error_ctx(rc, "shard %u", k);
    }
    return rc;
}

/* Read, verify and decode shard k's grammar into *d and *g (freed again on failure), and
 * check it against the shard table. */
static int load_shard(const arc *a, uint32_t k, dict **d, gram *g)
{
    const arc_shard *sh = &a->shards[k];
    if (is_text(&a->secs[sh->sec])) return check_shard(a, k, load_text(a, k, d, g), 0, d, g);
    side_job j = {.a = a, .secs = &a->secs[sh->sec], .g = g};
    j.kinded = is_kinded(&j.secs[1]);
    pthread_mutex_init(&j.lock, NULL);
    pthread_cond_init(&j.cond, NULL);
    pthread_t th[2];
    syms_kinds *kinds = NULL;
    /* A job whose thread cannot start runs here: the dictionary's before the rules (which
     * wait for it), the root's after them (it waits for their kinds). */
    int side = !pthread_create(&th[0], NULL, side_main, &j);
    if (!side) side_main(&j);
    int root = !pthread_create(&th[1], NULL, root_main, &j);
    int rc = load_rules(&j, &kinds);
    if (!root) root_main(&j);
    if (side) pthread_join(th[0], NULL);
    if (root) pthread_join(th[1], NULL);
    pthread_mutex_destroy(&j.lock);
    pthread_cond_destroy(&j.cond);
    syms_kinds_free(kinds);
    free(j.words_own);
    *d = j.dict;
    if (j.side.rc) /* first: without a count the rules were not decoded */
        rc = tdc_error(j.side.rc, "%s", j.side.msg);
    else if (!rc && j.root.rc)
        rc = tdc_error(j.root.rc, "%s", j.root.msg);
    /* the kind layout yields valid symbols only */
    return check_shard(a, k, rc, !j.kinded, d, g);
}

/* Shards loaded by several threads, each taking the next shard not yet taken. */
typedef struct shard_load {
    const arc *a;
    uint32_t first, end; /* the shards to load: [first, end); d, g, damage indexed from first */
    dict **d;
    gram *g;
    char **damage; /* per shard: why it is damaged (a shard of several only), or NULL */
    pthread_mutex_t lock;
    uint32_t next;
    int rc; /* the first failure that fails the whole load, with its message */
    char msg[512];
} shard_load;

static void *shard_load_main(void *arg)
{
    shard_load *l = arg;
    for (;;) {
        pthread_mutex_lock(&l->lock);
        uint32_t k = l->rc ? l->end : l->first + l->next++;
        pthread_mutex_unlock(&l->lock);
        if (k >= l->end) return NULL;
        uint32_t i = k - l->first;
        int rc = load_shard(l->a, k, &l->d[i], &l->g[i]);
        /* Damaged data costs one shard of several only its files; anything else (no
         * memory, a failed read) fails the load. */
        if (rc == -EBADMSG && l->a->nshards > 1) {
            if ((l->damage[i] = strdup(tdc_errmsg()))) continue;
            rc = tdc_error(-ENOMEM, "out of memory");
        }
        if (rc) {
            pthread_mutex_lock(&l->lock);
            if (!l->rc) {
                l->rc = rc;
                snprintf(l->msg, sizeof l->msg, "%s", tdc_errmsg());
            }
            pthread_mutex_unlock(&l->lock);
        }
    }
}

/* Shards decoded alone (load_shards), before they are merged: per shard its dictionary and
 * grammar, and for a damaged one why. */
typedef struct decoded {
    uint32_t n;
    dict **d;
    gram *g;
    char **damage;
} decoded;

static void decoded_free(decoded *s)
{
    for (uint32_t k = 0; s->d && s->g && s->damage && k < s->n; k++) {
        dict_free(s->d[k]);
        gram_free(&s->g[k]);
        free(s->damage[k]);
    }
    free(s->d);
    free(s->g);
    free(s->damage);
}

/* Load shards [first, first + n), on up to one thread per CPU, into s (free it with
 * decoded_free whatever the result): s->d[k - first] and s->g[k - first]; s->damage[k - first]
 * receives the message of each damaged shard that does not fail the load. */
static int load_shards(const arc *a, uint32_t first, uint32_t n, decoded *s)
{
    *s = (decoded){n, calloc(n, sizeof *s->d), calloc(n, sizeof *s->g),
                   calloc(n, sizeof *s->damage)};
    if (!s->d || !s->g || !s->damage) return tdc_error(-ENOMEM, "out of memory");
    shard_load l = {
        .a = a, .first = first, .end = first + n, .d = s->d, .g = s->g, .damage = s->damage};
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    uint32_t nth = n < (cpus > 1 ? (uint32_t)cpus : 1) ? n : (uint32_t)cpus;
    pthread_mutex_init(&l.lock, NULL);
    par_run(nth ? nth : 1, shard_load_main, &l, 0);
    pthread_mutex_destroy(&l.lock);
    return l.rc ? tdc_error(l.rc, "%s", l.msg) : 0;
}

/* The stand-in for damaged shard k: one token and a root of as many symbols as the shard
 * table gives it, so that the merged root keeps every other shard's symbols where the file
 * table puts them. Its bytes are never read (arc_entry_damaged). A root longer than its
 * section's declared size allows is not stood in for (the shard's damage fails the load):
 * the stand-in takes no more memory than the shard itself would. */
static int stand_in(const arc *a, uint32_t k, dict **d, gram *g)
{
    static const unsigned char tok[1] = {'\n'};
    const arc_shard *sh = &a->shards[k];
    uint32_t id;
    memset(g, 0, sizeof *g);
    /* A root of N symbols takes 4N bytes in the plain layout, at least N in the kind layout
     * (a number is a byte or more) and a text of at least N bytes (a token is a byte or
     * more): a shard table that says more is not believed. */
    const arc_secinfo *s = &a->secs[sh->sec];
    uint64_t room = is_text(&s[0]) ? s[0].raw : s[2].raw / (is_kinded(&s[2]) ? 1 : 4);
    if (sh->root_syms > room) return tdc_error(-EBADMSG, "%s", sh->damage);
    if (sh->root_syms > SIZE_MAX / 8 || !(*d = dict_new()) || dict_intern(*d, tok, 1, &id) ||
        vec32_reserve(&g->root, sh->root_syms) || vec64_push(&g->rule_start, 0))
        return tdc_error(-ENOMEM, "out of memory");
    memset(g->root.p, 0, sh->root_syms * sizeof *g->root.p); /* token 0 */
    g->root.n = sh->root_syms;
    g->ntokens = 1;
    return 0;
}

/* Record the damaged shards among [first, first + n) (their messages move into a->shards)
 * with their stand-ins. */
static int take_damage(arc *a, uint32_t first, uint32_t n, dict **d, gram *g, char **damage)
{
    for (uint32_t i = 0; i < n; i++) {
        if (!damage[i]) continue;
        a->shards[first + i].damage = damage[i];
        damage[i] = NULL;
        a->ndamaged++;
        int rc = stand_in(a, first + i, &d[i], &g[i]);
        if (rc) return rc;
    }
    return 0;
}

/* 1 + the first damaged shard that the run [start, start + len) of the archive's root
 * touches, or 0. */
static uint32_t run_damage(const arc *a, uint32_t first, uint64_t start, uint64_t len)
{
    for (uint32_t k = first; k < a->nshards && a->shards[k].root_off < start + len; k++) {
        const arc_shard *s = &a->shards[k];
        if (s->damage && s->root_off + s->root_syms > start) return k + 1;
    }
    return 0;
}

/* Every other name of a regular file takes the damage mark of the name holding its content
 * (arc_ino_entry: its inode's first in a->byino), in one pass over a->byino. */
static void share_damage(arc *a)
{
    for (uint32_t k = 1, h = 0; k < a->nents; k++) {
        arc_entry *e = &a->ents[a->byino[k]];
        const arc_entry *holder = &a->ents[a->byino[h]];
        if (e->ino != holder->ino)
            h = k;
        else if (e->type == ARC_REG)
            e->damaged = holder->damaged;
    }
}

/* Mark every regular file with content in a damaged shard, all names of its inode. */
static void mark_damaged(arc *a)
{
    for (uint32_t i = 0; i < a->nents && a->ndamaged; i++) {
        arc_entry *e = &a->ents[i];
        if (e->type == ARC_REG && e->root_len)
            e->damaged = run_damage(a, e->shard, e->root_start, e->root_len);
    }
    if (a->ndamaged) share_damage(a);
}

/* Forget recorded damage (a load that failed after all). */
static void clear_damage(arc *a)
{
    for (uint32_t k = 0; k < a->nshards; k++) {
        free(a->shards[k].damage);
        a->shards[k].damage = NULL;
    }
    for (uint32_t i = 0; i < a->nents; i++)
        a->ents[i].damaged = 0;
    a->ndamaged = 0;
}

int arc_entry_damaged(const arc *a, uint32_t ent)
{
    const arc_entry *e = &a->ents[ent];
    if (!e->damaged) return 0;
    if (e->damaged == ARC_NOT_LOADED)
        return tdc_error(-EINVAL, "%s: '%s' is not in the shards loaded",
                         a->path ? a->path : "archive", e->path);
    return arc_damage_error(a, ent, e->damaged - 1, a->shards[e->damaged - 1].damage);
}

int arc_damage_error(const arc *a, uint32_t ent, uint32_t k, const char *why)
{
    (void)k; /* the reason names the shard */
    return tdc_error(-EBADMSG, "%s: '%s' cannot be read: its content lies in a damaged shard (%s)",
                     a->path ? a->path : "archive", a->ents[ent].path, why);
}

int arc_range_damaged(const arc *a, uint32_t first, uint32_t end, const unsigned char *vis)
{
    for (uint32_t i = first; i < end && i < a->nents && a->ndamaged; i++)
        if (a->ents[i].damaged && (!vis || vis[i])) return arc_entry_damaged(a, i);
    return 0;
}

/* Whether regular file e's run lies inside shards [first, last] (an empty run: its shard
 * does). */
static int run_in_span(const arc *a, const arc_entry *e, uint32_t first, uint32_t last)
{
    uint64_t base = a->shards[first].root_off;
    uint64_t end = a->shards[last].root_off + a->shards[last].root_syms;
    return e->shard >= first && e->root_start >= base && e->root_start + e->root_len <= end &&
           (e->root_len || e->shard <= last);
}

/* Entries whose runs lie outside the loaded shards [first, last] (arc_load_span): marked
 * unreadable; the others' runs made relative to the first loaded shard's root. */
static void keep_span(arc *a, uint32_t first, uint32_t last)
{
    uint64_t base = a->shards[first].root_off;
    for (uint32_t i = 0; i < a->nents; i++) {
        arc_entry *e = &a->ents[i];
        if (e->type != ARC_REG) continue;
        if (run_in_span(a, e, first, last)) {
            e->root_start -= base;
        } else {
            e->root_start = e->root_len = 0;
            e->damaged = ARC_NOT_LOADED;
        }
    }
    share_damage(a);
}

/* Load shards [first, last] and merge them into a->dict and a->g (all of them: archive-wide
 * runs; else keep_span). */
static int load_span(arc *a, uint32_t first, uint32_t last)
{
    if (!a->pending) return 0; /* loaded already */
    uint32_t n = last - first + 1;
    int all = n == a->nshards;
    decoded s;
    int rc = load_shards(a, first, n, &s);
    if (!rc && a->version < 4) {
        a->shards[0].root_syms = s.g[0].root.n;
        a->shards[0].ntokens = s.g[0].ntokens;
        a->shards[0].nrules = s.g[0].nrules;
    }
    if (!rc) rc = take_damage(a, first, n, s.d, s.g, s.damage);
    if (!rc) rc = gram_merge(s.d, s.g, n, &a->dict, &a->g);
    if (!rc) {
        mark_damaged(a);
        if (!all) keep_span(a, first, last);
        rc = check_runs(a, a->g.root.n);
    }
    decoded_free(&s);
    if (rc) {
        /* Leave the archive as arc_open_meta made it: a later call fails the same way. */
        dict_free(a->dict);
        a->dict = NULL;
        gram_free(&a->g);
        memset(&a->g, 0, sizeof a->g);
        clear_damage(a);
        return with_path(rc, a->path);
    }
    a->pending = 0;
    a->partial = !all;
    return 0;
}

int arc_load_data(arc *a)
{
    return load_span(a, 0, a->nshards - 1);
}

int arc_load_span(arc *a, uint32_t first, uint32_t last)
{
    if (first > last || last >= a->nshards)
        return tdc_error(-EINVAL, "shards %u to %u: the archive has %u", first, last, a->nshards);
    return load_span(a, first, last);
}

static int u32_cmp(const void *x, const void *y)
{
    uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
    return (a > b) - (a < b);
}

/* The entries of `meta` a span of shards [first, last] holds: regular files holding their
 * inode's content, with a run inside the span. */
static int span_entries(const arc *meta, uint32_t first, uint32_t last, vec32 *ids)
{
    for (uint32_t j = meta->shard_at[first]; j < meta->shard_at[last + 1]; j++) {
        uint32_t i = meta->byshard[j];
        if (run_in_span(meta, &meta->ents[i], first, last) && vec32_push(ids, i))
            return tdc_error(-ENOMEM, "out of memory");
    }
    if (first < last) qsort(ids->p, ids->n, sizeof *ids->p, u32_cmp); /* groups interleave */
    return 0;
}

/* A copy of meta's header, section and shard tables, with its own descriptor. */
static int span_shell(const arc *meta, arc *s)
{
    s->fd = -1;
    s->pending = 1;
    s->version = meta->version;
    s->id = meta->id;
    s->prev_id = meta->prev_id;
    s->next_ino = meta->next_ino;
    s->file_size = meta->file_size;
    s->nsecs = meta->nsecs;
    s->nshards = meta->nshards;
    if (!(s->path = strdup(meta->path)) || !(s->secs = malloc(meta->nsecs * sizeof *s->secs)) ||
        !(s->shards = calloc(meta->nshards, sizeof *s->shards)))
        return tdc_error(-ENOMEM, "out of memory");
    memcpy(s->secs, meta->secs, meta->nsecs * sizeof *s->secs);
    for (uint32_t k = 0; k < meta->nshards; k++) {
        s->shards[k] = meta->shards[k];
        s->shards[k].damage = NULL;
    }
    if ((s->fd = dup(meta->fd)) < 0) return tdc_error(-errno, "%s: %s", s->path, strerror(errno));
    return 0;
}

/* A span of shards [first, last] of meta with the entries `part` < 0: span_entries; else
 * entry `part` alone, cut to its part in shard first == last. */
static int open_span(const arc *meta, uint32_t first, uint32_t last, int64_t part, arc **out,
                     vec32 *ids)
{
    *out = NULL;
    *ids = (vec32){0}; /* what a failure leaves: the caller frees it either way */
    if (!meta->pending || first > last || last >= meta->nshards)
        return tdc_error(-EINVAL, "shards %u to %u: not a span of an unloaded archive", first,
                         last);
    vec32 v = {0};
    arc *s = calloc(1, sizeof *s);
    int rc = s ? span_shell(meta, s) : tdc_error(-ENOMEM, "out of memory");
    if (!rc && part < 0)
        rc = span_entries(meta, first, last, &v);
    else if (!rc && vec32_push(&v, (uint32_t)part))
        rc = tdc_error(-ENOMEM, "out of memory");
    if (!rc && !(s->ents = calloc(v.n + 1, sizeof *s->ents)))
        rc = tdc_error(-ENOMEM, "out of memory");
    for (size_t i = 0; !rc && i < v.n; i++) {
        arc_entry *e = &s->ents[i];
        *e = meta->ents[v.p[i]];
        e->link = NULL;
        e->xattrs = NULL;
        e->nxattrs = 0;
        if (!(e->path = strdup(meta->ents[v.p[i]].path))) rc = tdc_error(-ENOMEM, "out of memory");
        s->nents = (uint32_t)i + 1;
    }
    if (!rc && part >= 0) { /* its run and size in shard `first` alone */
        arc_entry *e = &s->ents[0];
        e->shard = first;
        e->root_start = meta->shards[first].root_off;
        e->root_len = meta->shards[first].root_syms;
        e->size = meta->shards[first].bytes;
    }
    if (!rc) rc = sort_by_ino(s);
    if (!rc) rc = load_span(s, first, last);
    if (rc) {
        arc_free(s);
        vec32_free(&v);
        return rc;
    }
    *out = s;
    *ids = v;
    return 0;
}

int arc_open_span(const arc *meta, uint32_t first, uint32_t last, arc **out, uint32_t **ids,
                  uint32_t *nids)
{
    vec32 v;
    int rc = open_span(meta, first, last, -1, out, &v);
    if (!rc) {
        *ids = v.p;
        *nids = (uint32_t)v.n;
    }
    return rc;
}

ssize_t arc_text_bytes(const arc_text *t, uint32_t i, uint64_t off, size_t n,
                       const unsigned char **p)
{
    uint64_t len = t->len[i];
    *p = t->text + t->at[i] + (off < len ? off : len);
    n = off >= len ? 0 : n < len - off ? n : (size_t)(len - off);
    int rc = n && t->lazy ? zlazy_need(t->lazy, (size_t)(*p - t->payload) + n) : 0;
    return rc ? rc : (ssize_t)n;
}

void arc_text_free(arc_text *t)
{
    zlazy_free(t->lazy);
    free(t->payload);
    free(t->ids);
    free(t->at);
    free(t->len);
    memset(t, 0, sizeof *t);
}

typedef struct run_order {
    const arc *meta;
    const uint32_t *ids;
} run_order;

/* Local indices into ids, by where their entries' runs begin. */
static int run_cmp(const void *a, const void *b, void *ctx)
{
    const run_order *o = ctx;
    const arc_entry *x = &o->meta->ents[o->ids[*(const uint32_t *)a]];
    const arc_entry *y = &o->meta->ents[o->ids[*(const uint32_t *)b]];
    return (x->root_start > y->root_start) - (x->root_start < y->root_start);
}

/* Payloads from this size are opened lazily where asked (arc_open_text): below it, a read's
 * share of the decoding is too small to matter. */
#define TEXT_LAZY_MIN (256u << 10)

/* Text shard section s's payload in t: decoded whole, or with `lazy` as far as its pieces'
 * lengths, the rest on demand (zlazy.h). */
static int text_payload(const arc *meta, const arc_secinfo *s, int lazy, arc_text *t)
{
    if (!lazy || s->raw < TEXT_LAZY_MIN || s->raw > RAW_MAX)
        return load_section(meta, s, &t->payload);
    unsigned char *st;
    int rc = read_stored(meta->fd, meta->path, s, &st);
    if (rc) return rc;
    if (!(t->payload = malloc(s->raw))) {
        free(st);
        return tdc_error(-ENOMEM, "section dictionary: cannot allocate %llu bytes",
                         (unsigned long long)s->raw);
    }
    if ((rc = zlazy_new(st, s->stored, t->payload, s->raw, "dictionary", &t->lazy))) return rc;
    size_t head = 0;
    for (size_t want = 4096; !rc; want *= 4) { /* as far as the lengths end */
        rc = zlazy_need(t->lazy, want);
        if (!rc && (!textshard_head(t->payload, zlazy_done(t->lazy), &head) || want >= s->raw))
            break;
    }
    return rc ? rc : zlazy_need(t->lazy, head);
}

int arc_open_text(const arc *meta, uint32_t k, int64_t part, int lazy, arc_text *out)
{
    memset(out, 0, sizeof *out);
    if (!meta->pending || !arc_shard_text(meta, k)) return -ENOTSUP;
    vec32 v = {0};
    uint64_t *lens = NULL;
    uint32_t *order = NULL;
    size_t np = 0;
    int rc = part < 0                         ? span_entries(meta, k, k, &v)
             : vec32_push(&v, (uint32_t)part) ? tdc_error(-ENOMEM, "out of memory")
                                              : 0;
    /* Entries without content here (empty files) have no piece. */
    size_t m = 0;
    for (size_t i = 0; !rc && i < v.n; i++)
        if (part >= 0 || meta->ents[v.p[i]].root_len) v.p[m++] = v.p[i];
    v.n = m;
    const arc_secinfo *dsec = &meta->secs[meta->shards[k].sec];
    if (!rc) rc = text_payload(meta, dsec, lazy, out);
    if (!rc) rc = textshard_pieces(out->payload, dsec->raw, &lens, &np, &out->text);
    if (!rc && (part >= 0 ? np != 1 : np < v.n)) rc = -ENOTSUP;
    if (!rc && (!(order = malloc((v.n + 1) * sizeof *order)) ||
                !(out->at = malloc((v.n + 1) * sizeof *out->at)) ||
                !(out->len = malloc((v.n + 1) * sizeof *out->len))))
        rc = tdc_error(-ENOMEM, "out of memory");
    if (!rc) { /* pieces in root order: the entries' local indices sorted by their runs */
        for (size_t i = 0; i < v.n; i++)
            order[i] = (uint32_t)i;
        sort_r(order, v.n, sizeof *order, run_cmp, &(run_order){meta, v.p});
    }
    /* The runs tile the shard's root in the pieces' order, each as long in bytes as its
     * piece (a part: the whole shard). A piece whose place in the root no entry's run starts
     * at is a file's that is gone (compaction copies a shard that lost a few files as it is):
     * its tokens, counted, are its run. */
    const arc_shard *sh = &meta->shards[k];
    uint64_t at = 0, sym = sh->root_off;
    size_t j = 0;
    for (size_t i = 0; !rc && i < np; i++) {
        uint32_t l = j < v.n ? order[j] : 0;
        const arc_entry *e = j < v.n ? &meta->ents[v.p[l]] : NULL;
        if (e && (part >= 0 || e->root_start == sym)) {
            if (lens[i] != (part >= 0 ? sh->bytes : e->size)) rc = -ENOTSUP;
            sym += part >= 0 ? sh->root_syms : e->root_len;
            out->at[l] = at;
            out->len[l] = lens[i];
            j++;
        } else if (!out->lazy ||
                   !(rc = zlazy_need(out->lazy, (size_t)(out->text - out->payload + at + lens[i])))) {
            sym += textshard_run(out->text + at, lens[i]);
        }
        at += lens[i];
    }
    if (!rc && (j != v.n || sym != sh->root_off + sh->root_syms)) rc = -ENOTSUP;
    free(lens);
    free(order);
    if (rc) {
        vec32_free(&v);
        arc_text_free(out);
        return rc;
    }
    out->ids = v.p;
    out->nids = (uint32_t)v.n;
    out->bytes = sizeof *out + dsec->raw + v.n * (4 + 16) + (out->lazy ? zlazy_mem(out->lazy) : 0);
    return 0;
}

int arc_entry_parts(const arc *meta, uint32_t ent, uint32_t *first, uint32_t *last)
{
    const arc_entry *e = &meta->ents[ent];
    if (meta->version < 4 || e->type != ARC_REG || !e->root_len) return 0;
    arc_entry_shards(meta, ent, first, last);
    const arc_shard *f = &meta->shards[*first], *l = &meta->shards[*last];
    if (*first == *last || e->root_start != f->root_off ||
        e->root_start + e->root_len != l->root_off + l->root_syms)
        return 0;
    uint64_t bytes = 0;
    for (uint32_t k = *first; k <= *last; k++)
        bytes += meta->shards[k].bytes;
    return bytes == e->size;
}

int arc_open_part(const arc *meta, uint32_t ent, uint32_t k, arc **out)
{
    uint32_t first, last;
    if (ent >= meta->nents || !arc_entry_parts(meta, ent, &first, &last) || k < first || k > last)
        return tdc_error(-EINVAL, "entry %u has no part of its own in shard %u", ent, k);
    vec32 v;
    int rc = open_span(meta, k, k, ent, out, &v);
    vec32_free(&v);
    return rc;
}

void arc_entry_in_span(const arc *a, uint32_t ent, uint32_t first, uint32_t last, uint64_t *start,
                       uint64_t *len)
{
    const arc_entry *e = &a->ents[ent];
    const arc_shard *f = &a->shards[first], *l = &a->shards[last];
    uint64_t lo = e->root_start > f->root_off ? e->root_start : f->root_off;
    uint64_t hi = e->root_start + e->root_len, top = l->root_off + l->root_syms;
    if (hi > top) hi = top;
    *start = *len = 0;
    if (e->type == ARC_REG && hi > lo) {
        *start = lo - f->root_off;
        *len = hi - lo;
    }
}

void arc_entry_in_shard(const arc *a, uint32_t ent, uint32_t k, uint64_t *start, uint64_t *len)
{
    arc_entry_in_span(a, ent, k, k, start, len);
}

/* Shards [first, first + n) of meta loaded (several threads; each checked against the shard
 * table) and merged into one grammar in p; a damaged one fails the whole (-EBADMSG, its
 * message). */
static int load_pieces(const arc *meta, uint32_t first, uint32_t n, arc *p)
{
    decoded s;
    int rc = load_shards(meta, first, n, &s);
    for (uint32_t i = 0; !rc && i < n; i++)
        if (s.damage[i]) rc = tdc_error(-EBADMSG, "%s", s.damage[i]);
    if (!rc) rc = gram_merge(s.d, s.g, n, &p->dict, &p->g);
    decoded_free(&s);
    return rc;
}

int arc_open_pieces(const arc *meta, uint32_t first, uint32_t last, arc **out)
{
    *out = NULL;
    if (!meta->pending || first > last || last >= meta->nshards || meta->version < 4)
        return tdc_error(-EINVAL, "shards %u to %u: not shards of an unloaded version 4 archive",
                         first, last);
    arc *p = calloc(1, sizeof *p);
    if (!p || !(p->ents = malloc((meta->nents ? meta->nents : 1) * sizeof *p->ents))) {
        free(p);
        return tdc_error(-ENOMEM, "out of memory");
    }
    p->fd = -1;
    p->byino = meta->byino; /* the same entries: arc_ino_entry works on the piece */
    p->version = meta->version;
    p->id = meta->id;
    p->nents = meta->nents;
    p->partial = 1;
    p->piece = (int)(last - first + 1);
    p->nshards = 1;
    for (uint32_t i = 0; i < meta->nents; i++) {
        arc_entry *e = &p->ents[i];
        *e = meta->ents[i];
        e->link = NULL;
        e->xattrs = NULL;
        e->nxattrs = 0;
        e->shard = 0;
        arc_entry_in_span(meta, i, first, last, &e->root_start, &e->root_len);
    }
    int rc = load_pieces(meta, first, last - first + 1, p);
    if (rc) {
        arc_piece_free(p);
        return rc;
    }
    *out = p;
    return 0;
}

int arc_open_piece(const arc *meta, uint32_t k, arc **out)
{
    return arc_open_pieces(meta, k, k, out);
}

/* arc_entry_copy of an entry of `from` into `to`, whose block of strings is a copy of
 * from's (both NULL: no blocks). */
static int entry_copy(const arc *from, const arc_entry *e, arc *to, arc_entry *c)
{
    *c = *e;
    c->path = c->link = NULL;
    c->xattrs = NULL;
    c->nxattrs = 0;
    if (!(c->path = str_for(from, to, e->path)) ||
        (e->link && !(c->link = str_for(from, to, e->link))))
        return -ENOMEM;
    if (!e->nxattrs) return 0;
    if (!(c->xattrs = calloc(e->nxattrs, sizeof *c->xattrs))) return -ENOMEM;
    for (uint32_t k = 0; k < e->nxattrs; k++, c->nxattrs++) {
        arc_xattr *x = &c->xattrs[k];
        x->len = e->xattrs[k].len;
        if (!(x->name = strdup(e->xattrs[k].name)) || !(x->val = malloc(x->len ? x->len : 1))) {
            c->nxattrs++; /* so that arc_entry_clear frees what this one has */
            return -ENOMEM;
        }
        memcpy(x->val, e->xattrs[k].val, x->len);
    }
    return 0;
}

int arc_entry_copy(const arc_entry *e, arc_entry *c)
{
    return entry_copy(NULL, e, NULL, c);
}

int arc_own_strs(arc *a)
{
    for (uint32_t i = 0; i < a->nents; i++) {
        arc_entry *e = &a->ents[i];
        char *p = in_strs(a, e->path) ? strdup(e->path) : e->path;
        char *l = in_strs(a, e->link) ? strdup(e->link) : e->link;
        if (p) e->path = p;
        if (l) e->link = l;
        if (!p || (e->link && !l)) return tdc_error(-ENOMEM, "out of memory");
    }
    free(a->strs);
    a->strs = NULL;
    a->nstrs = 0;
    return 0;
}

int arc_meta_dup(const arc *meta, arc **out)
{
    *out = NULL;
    if (!meta->pending) return tdc_error(-EINVAL, "%s: not an unloaded archive", meta->path);
    arc *a = calloc(1, sizeof *a);
    int rc = a ? span_shell(meta, a) : tdc_error(-ENOMEM, "out of memory");
    if (!rc && (!(a->ents = calloc(meta->nents ? meta->nents : 1, sizeof *a->ents)) ||
                !(a->byino = malloc((meta->nents ? meta->nents : 1) * sizeof *a->byino)) ||
                (meta->strs && !(a->strs = malloc(meta->nstrs ? meta->nstrs : 1)))))
        rc = tdc_error(-ENOMEM, "out of memory");
    if (!rc && meta->strs) {
        memcpy(a->strs, meta->strs, meta->nstrs);
        a->nstrs = meta->nstrs;
    }
    for (uint32_t i = 0; !rc && i < meta->nents; i++, a->nents++) /* counts a partial copy */
        if (entry_copy(meta, &meta->ents[i], a, &a->ents[i]))
            rc = tdc_error(-ENOMEM, "out of memory");
    if (!rc) memcpy(a->byino, meta->byino, meta->nents * sizeof *a->byino);
    if (!rc) rc = index_shards(a);
    if (rc) {
        arc_free(a);
        return rc;
    }
    *out = a;
    return 0;
}

void arc_piece_free(arc *p)
{
    if (!p) return;
    dict_free(p->dict);
    gram_free(&p->g);
    free(p->ents); /* the paths and byino are meta's */
    free(p);
}

uint64_t arc_mem(const arc *a)
{
    uint64_t n = (uint64_t)a->nents * (sizeof *a->ents + sizeof *a->byino) +
                 (uint64_t)a->nsecs * sizeof *a->secs + (uint64_t)a->nshards * sizeof *a->shards;
    for (uint32_t i = 0; i < a->nents; i++)
        n += a->ents[i].path ? strlen(a->ents[i].path) + 1 : 0;
    const dict *d = a->dict;
    /* tcap atomically: a lookup may build the table meanwhile (dict_find) */
    if (d) n += d->offs.cap * 8 + d->blob.cap + __atomic_load_n(&d->tcap, __ATOMIC_RELAXED) * 8 +
                d->word.cap;
    const gram *g = &a->g; /* what the arrays hold, room to grow included */
    return n + (g->root.cap + g->syms.cap + g->topo.cap) * 4 + g->rule_start.cap * 8;
}

uint64_t arc_shard_mem_estimate(const arc *a, uint32_t k)
{
    const arc_shard *s = &a->shards[k];
    return 12 * s->root_syms + 32 * (uint64_t)s->nrules + 24 * (uint64_t)s->ntokens +
           2 * a->secs[s->sec].raw + (16 << 10);
}

int arc_entry_shards(const arc *a, uint32_t ent, uint32_t *first, uint32_t *last)
{
    const arc_entry *e = &a->ents[ent];
    *first = *last = e->shard;
    if (e->type != ARC_REG || !e->root_len) return 0;
    uint64_t end = e->root_start + e->root_len;
    while (*last + 1 < a->nshards && a->shards[*last + 1].root_off < end)
        ++*last;
    return 0;
}

/* Shard k of a and shard l of b are stored alike: their three sections have the same codec,
 * stored and raw lengths and checksum, and the shard table the same figures. */
static int shard_same(const arc *a, uint32_t k, const arc *b, uint32_t l)
{
    const arc_shard *x = &a->shards[k], *y = &b->shards[l];
    if (x->root_syms != y->root_syms || x->ntokens != y->ntokens || x->nrules != y->nrules)
        return 0;
    for (uint32_t i = 0; i < 3; i++) {
        const arc_secinfo *s = &a->secs[x->sec + i], *t = &b->secs[y->sec + i];
        if (s->codec != t->codec || s->stored != t->stored || s->raw != t->raw ||
            s->hash != t->hash)
            return 0;
    }
    return 1;
}

int arc_same_content(const arc *a, uint32_t o, const arc *b, uint32_t i)
{
    const arc_entry *x = &a->ents[o], *y = &b->ents[i];
    if (a->version < 4 || b->version < 4 || a->partial || b->partial || x->type != ARC_REG ||
        y->type != ARC_REG || x->damaged || y->damaged || x->size != y->size ||
        x->hash != y->hash || x->root_len != y->root_len)
        return 0;
    uint32_t f, l, g, m;
    arc_entry_shards(a, o, &f, &l);
    arc_entry_shards(b, i, &g, &m);
    if (l - f != m - g ||
        x->root_start - a->shards[f].root_off != y->root_start - b->shards[g].root_off)
        return 0;
    for (uint32_t k = 0; k <= l - f; k++)
        if (!shard_same(a, f + k, b, g + k)) return 0;
    return 1;
}

int arc_open(const char *path, arc **out)
{
    arc *a;
    int rc = arc_open_meta(path, &a);
    if (rc) return rc;
    if ((rc = arc_load_data(a))) {
        arc_free(a);
        return rc;
    }
    *out = a;
    return 0;
}

void arc_entry_clear(arc_entry *e)
{
    free(e->path);
    free(e->link);
    for (uint32_t k = 0; k < e->nxattrs; k++) {
        free(e->xattrs[k].name);
        free(e->xattrs[k].val);
    }
    free(e->xattrs);
    memset(e, 0, sizeof *e);
}

void arc_free(arc *a)
{
    if (!a) return;
    dict_free(a->dict);
    gram_free(&a->g);
    for (uint32_t i = 0; i < a->nents; i++) {
        arc_entry *e = &a->ents[i];
        if (in_strs(a, e->path)) e->path = NULL;
        if (in_strs(a, e->link)) e->link = NULL;
        arc_entry_clear(e);
    }
    free(a->strs);
    free(a->ents);
    free(a->byino);
    free(a->byshard);
    free(a->shard_at);
    free(a->secs);
    for (uint32_t k = 0; a->shards && k < a->nshards; k++)
        free(a->shards[k].damage);
    free(a->shards);
    free(a->path);
    if (a->path && a->fd >= 0) close(a->fd);
    free(a);
}
