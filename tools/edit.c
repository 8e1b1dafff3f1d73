/* edit: `tadoc apply` (batches of the papers' insert/append/extract operations, journaled)
 * and `tadoc compact` (fold the journal into the archive). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../engine/backend/backend.h"
#include "../engine/base/buf.h"
#include "../engine/base/err.h"
#include "../engine/volume/vol.h"
#include "tadoc.h"

const char usage_apply[] =
    "usage: tadoc apply [--offsets=sequence|batch] [-q] ARCHIVE OPS_FILE\n"
    "\n"
    "Apply a batch of operations to the files of ARCHIVE as journal records (ARCHIVE.journal;\n"
    "`tadoc compact` folds them in). OPS_FILE ('-' for standard input) has one operation per\n"
    "line, fields separated by one TAB, PATH and TEXT with C escapes (\\t \\n \\\\ \\xHH):\n"
    "  insert<TAB>PATH<TAB>OFFSET<TAB>TEXT   insert TEXT at byte OFFSET\n"
    "  append<TAB>PATH<TAB>TEXT              add TEXT at the end\n"
    "  extract<TAB>PATH<TAB>OFFSET<TAB>LEN   print LEN bytes from OFFSET (C-escaped, one line)\n"
    "  write<TAB>PATH<TAB>OFFSET<TAB>TEXT    overwrite with TEXT at OFFSET (may extend the file)\n"
    "  truncate<TAB>PATH<TAB>SIZE            cut or extend (with zero bytes) to SIZE bytes\n"
    "  delete<TAB>PATH                       remove the name PATH (not a directory)\n"
    "write, truncate and delete need --offsets=sequence; a path must exist when the file is\n"
    "read, before any line is applied.\n"
    "Empty lines and lines starting with '#' are skipped.\n"
    "\n"
    "  --offsets=sequence  each offset sees the earlier operations of the batch (default)\n"
    "  --offsets=batch     every offset and extract refers to the text before the batch;\n"
    "                      inserts at one offset keep their batch order\n"
    "  -q                  no summary on standard error\n"
    "\n"
    "The archive must not be mounted writable at the same time (the journal has one writer).\n";

const char usage_compact[] =
    "usage: tadoc compact [--level N] [--shard-size SIZE] [-j N] [--mem SIZE] [--force] ARCHIVE\n"
    "\n"
    "Fold ARCHIVE.journal into the archive: edited files are tokenized and compressed into new\n"
    "rules against the existing dictionary (or, when they are a quarter of the content or the\n"
    "grammar has decayed, every file is compressed again, as pack would), unreachable rules\n"
    "and unused tokens are dropped, the new archive is written to a temporary file, fsynced\n"
    "and renamed over the old one, and the journal restarts empty. Does nothing when the\n"
    "journal is empty, unless --force. An archive of several shards, or of one of half the\n"
    "shard size or more, is compacted shard by shard: shards whose files all stay are copied\n"
    "as stored, a shard is rebuilt once a quarter of it is dead (or it is small), and new\n"
    "content goes to new shards.\n"
    "\n"
    "  -l, --level N          zstd level of the rewritten sections (default 9)\n"
    "  -S, --shard-size SIZE  content of the shards it builds, with K, M or G (default: as\n"
    "                         pack would choose for the archive, at least 64M)\n"
    "  -j, --jobs N           shards built at once, shard by shard (default: one a core, those\n"
    "                         past the first while the memory budget has room for them)\n"
    "  -m, --mem SIZE         the memory budget the shards read and the builds past the first\n"
    "                         share, with K, M or G (default 256M, or an eighth of the memory\n"
    "                         where that is less)\n"
    "  -f, --force            rewrite the archive even with an empty journal\n";

enum { OP_INSERT, OP_APPEND, OP_EXTRACT, OP_WRITE, OP_TRUNCATE, OP_DELETE };

typedef struct op {
    int kind;
    uint64_t ino, off, len;
    size_t line;
    buf text;
    uint64_t dir; /* OP_DELETE: the parent directory and the last component (malloc'ed) */
    char *name;
} op;

static int hexval(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

volatile sig_atomic_t tool_stopped;
static void (*stop_hook)(void);

static void on_stop(int sig)
{
    int e = errno;
    if (!tool_stopped) tool_stopped = sig;
    /* Output that blocks (a pipe no one reads) must not keep a stopped command from its next
     * check: what it writes from now on goes nowhere (what it stops is undone anyway). */
    int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
        dup2(fd, 1);
        close(fd);
    }
    if (stop_hook) stop_hook();
    errno = e;
}

void tool_catch_stops(void (*hook)(void))
{
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    stop_hook = hook;
    struct sigaction sa = {.sa_handler = on_stop}, old;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++)
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN)
            sigaction(sigs[i], &sa, NULL);
}

void tool_die_if_stopped(void)
{
    int sig = tool_stopped;
    if (!sig) return;
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Decode C escapes of s[0..n) into out. -1 on a bad escape. */
static int unescape(const char *s, size_t n, buf *out)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '\\') {
            if (++i == n) return -1;
            switch (s[i]) {
            case 'n':
                ch = '\n';
                break;
            case 't':
                ch = '\t';
                break;
            case 'r':
                ch = '\r';
                break;
            case '\\':
                ch = '\\';
                break;
            case '0':
                ch = 0;
                break;
            case 'x': {
                int hi = i + 2 < n ? hexval(s[i + 1]) : -1, lo = i + 2 < n ? hexval(s[i + 2]) : -1;
                if (hi < 0 || lo < 0) return -1;
                ch = (unsigned char)(hi << 4 | lo);
                i += 2;
                break;
            }
            default:
                return -1;
            }
        }
        if (buf_put(out, &ch, 1)) return -1;
    }
    return 0;
}

void put_escaped(FILE *f, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = b[i];
        if (ch == '\n')
            fputs("\\n", f);
        else if (ch == '\t')
            fputs("\\t", f);
        else if (ch == '\\')
            fputs("\\\\", f);
        else if (ch < 0x20 || ch == 0x7f)
            fprintf(f, "\\x%02x", ch);
        else
            putc(ch, f);
    }
}

/* A delete names its parent directory and last component: resolve the one, keep the other. */
static int parse_parent(vol *v, char *path, size_t lineno, op *o)
{
    char *slash = strrchr(path, '/');
    const char *name = slash ? slash + 1 : path;
    int r = 0;
    o->dir = 1; /* the root directory */
    if (slash) {
        *slash = 0;
        r = vol_resolve(v, path, &o->dir);
        *slash = '/';
    }
    if (!r && !(o->name = strdup(name))) r = -ENOMEM;
    if (r) fprintf(stderr, "%s: line %zu: %s: %s\n", prog, lineno, path, strerror(-r));
    return r ? -2 : 0;
}

/* Parse one line into `o`; 1 for a line to skip, 0 for an op, with a message -1 for a line
 * that is not an op (a usage error) and -2 for one naming what is not there (a failure). */
static int parse_line(vol *v, char *line, size_t lineno, op *o)
{
    size_t n = strlen(line);
    if (n && line[n - 1] == '\n') line[--n] = 0;
    if (!n || line[0] == '#') return 1;
    char *f[4];
    size_t nf = 0;
    for (char *p = line; nf < 4;) {
        f[nf++] = p;
        char *t = strchr(p, '\t');
        if (!t) break;
        *t = 0;
        p = t + 1;
    }
    buf path = {0};
    memset(o, 0, sizeof *o);
    o->line = lineno;
    int rc = -1;
    if (!strcmp(f[0], "insert") && nf == 4)
        o->kind = OP_INSERT;
    else if (!strcmp(f[0], "append") && nf == 3)
        o->kind = OP_APPEND;
    else if (!strcmp(f[0], "extract") && nf == 4)
        o->kind = OP_EXTRACT;
    else if (!strcmp(f[0], "write") && nf == 4)
        o->kind = OP_WRITE;
    else if (!strcmp(f[0], "truncate") && nf == 3)
        o->kind = OP_TRUNCATE;
    else if (!strcmp(f[0], "delete") && nf == 2)
        o->kind = OP_DELETE;
    else {
        fprintf(stderr,
                "%s: line %zu: expected insert/append/extract/write/truncate/delete with its "
                "fields\n",
                prog, lineno);
        return -1;
    }
    if (unescape(f[1], strlen(f[1]), &path) || (path.n && memchr(path.p, 0, path.n)) ||
        buf_put(&path, "", 1)) { /* a NUL would end the path early: another file */
        fprintf(stderr, "%s: line %zu: bad escape in path\n", prog, lineno);
        goto out;
    }
    int r = vol_resolve(v, (char *)path.p, &o->ino);
    if (r) {
        fprintf(stderr, "%s: line %zu: %s: %s\n", prog, lineno, (char *)path.p, strerror(-r));
        rc = -2;
        goto out;
    }
    if (o->kind == OP_DELETE) {
        rc = parse_parent(v, (char *)path.p, lineno, o);
        goto out;
    }
    struct stat st; /* no line changes a type: checked before anything is applied */
    if (!vol_getattr(v, o->ino, &st) && !S_ISREG(st.st_mode)) {
        fprintf(stderr, "%s: line %zu: %s: not a regular file\n", prog, lineno, (char *)path.p);
        rc = -2;
        goto out;
    }
    if (o->kind != OP_APPEND && parse_uint(f[2], &o->off)) {
        fprintf(stderr, "%s: line %zu: bad %s\n", prog, lineno,
                o->kind == OP_TRUNCATE ? "size" : "offset");
        goto out;
    }
    if (o->kind == OP_TRUNCATE) {
        rc = 0;
        goto out;
    }
    if (o->kind == OP_EXTRACT) {
        if (parse_uint(f[3], &o->len) || o->len > (1u << 30)) {
            fprintf(stderr, "%s: line %zu: bad length\n", prog, lineno);
            goto out;
        }
    } else {
        const char *t = o->kind == OP_APPEND ? f[2] : f[3];
        if (unescape(t, strlen(t), &o->text)) {
            fprintf(stderr, "%s: line %zu: bad escape in text\n", prog, lineno);
            goto out;
        }
    }
    rc = 0;
out:
    buf_free(&path);
    if (rc) buf_free(&o->text);
    return rc;
}

/* A failed operation's error: the vol's calls answer as the system calls do, with an errno
 * alone (a full disk, a file too large), so the message names the line. */
static int line_error(const op *o, int rc)
{
    return tdc_error(rc, "line %zu: %s", o->line, strerror(-rc));
}

static int do_extract(vol *v, vol_reader *r, const op *o)
{
    unsigned char *b = malloc(o->len ? o->len : 1);
    if (!b) return tdc_error(-ENOMEM, "out of memory");
    ssize_t k = vol_read(v, r, o->ino, o->off, b, o->len);
    if (k >= 0) {
        put_escaped(stdout, b, (size_t)k);
        putchar('\n');
    }
    free(b);
    return k < 0 ? line_error(o, (int)k) : 0;
}

static int do_change(vol *v, const op *o)
{
    struct stat st;
    int rc;
    if (o->kind == OP_DELETE) {
        /* vol_unlink answers as unlink(2) does, with an errno and no message. */
        rc = vol_unlink(v, o->dir, o->name, 0);
        return rc ? tdc_error(rc, "line %zu: delete %s: %s", o->line, o->name, strerror(-rc)) : 0;
    }
    rc = vol_getattr(v, o->ino, &st);
    if (rc) return line_error(o, rc); /* removed by a line before */
    if (o->kind == OP_WRITE) {
        rc = vol_write(v, o->ino, o->off, o->text.p, o->text.n);
    } else if (o->kind == OP_TRUNCATE) {
        struct stat in = {.st_size = (off_t)o->off}, out;
        rc = vol_setattr(v, o->ino, VOL_SET_SIZE, &in, &out);
    } else if (o->kind == OP_APPEND) {
        rc = vol_write(v, o->ino, (uint64_t)st.st_size, o->text.p, o->text.n);
    } else {
        if (o->off > (uint64_t)st.st_size)
            return tdc_error(-EINVAL, "line %zu: offset %" PRIu64 " is past the end (%lld bytes)",
                             o->line, o->off, (long long)st.st_size);
        rc = vol_insert(v, o->ino, o->off, o->text.p, o->text.n);
    }
    return rc ? line_error(o, rc) : 0;
}

typedef struct ino_at {
    uint64_t ino;
    size_t i;
} ino_at;

static int by_ino(const void *x, const void *y)
{
    const ino_at *a = x, *b = y;
    return a->ino != b->ino ? (a->ino < b->ino ? -1 : 1) : (a->i > b->i) - (a->i < b->i);
}

/* The inserts and appends of a batch whose offsets all refer to the text before it: the
 * offsets at which to make them one after another in batch order come from backend_edits (the
 * papers' double parsing; on the GPU with TADOC_GPU=on, or auto for very large batches), which
 * checks every offset before anything changes. `chg` holds the batch's changes in order. */
static int batch_changes(vol *v, backend *be, op **chg, size_t n, int *on_gpu)
{
    ino_at *ia = malloc((n ? n : 1) * sizeof *ia);
    tdc_edit *e = malloc((n ? n : 1) * sizeof *e);
    uint64_t *size = malloc((n ? n : 1) * sizeof *size), *at = malloc((n ? n : 1) * sizeof *at),
             *pos = malloc((n ? n : 1) * sizeof *pos), *fin = malloc((n ? n : 1) * sizeof *fin);
    int rc = ia && e && size && at && pos && fin ? 0 : tdc_error(-ENOMEM, "out of memory");
    uint32_t nf = 0;
    for (size_t i = 0; i < n && !rc; i++)
        ia[i] = (ino_at){chg[i]->ino, i};
    if (!rc) qsort(ia, n, sizeof *ia, by_ino);
    for (size_t k = 0; k < n && !rc; k++) { /* files numbered in inode order */
        if (k == 0 || ia[k].ino != ia[k - 1].ino) {
            struct stat st;
            rc = vol_getattr(v, ia[k].ino, &st);
            size[nf++] = (uint64_t)st.st_size;
        }
        const op *o = chg[ia[k].i];
        e[ia[k].i] = (tdc_edit){nf - 1, o->kind == OP_APPEND ? TDC_EDIT_APPEND : TDC_EDIT_INSERT,
                                o->off, o->text.n};
    }
    size_t bad = 0;
    if (!rc) rc = backend_edits(be, TDC_OFFSETS_BATCH, size, nf, e, n, at, pos, fin, &bad, on_gpu);
    if (rc == -EINVAL && bad < n)
        rc = tdc_error(-EINVAL, "line %zu: offset %" PRIu64 " is past the end (%" PRIu64 " bytes)",
                       chg[bad]->line, chg[bad]->off, size[e[bad].file]);
    for (size_t i = 0; i < n && !rc; i++)
        rc = chg[i]->kind == OP_APPEND
                 ? vol_write(v, chg[i]->ino, at[i], chg[i]->text.p, chg[i]->text.n)
                 : vol_insert(v, chg[i]->ino, at[i], chg[i]->text.p, chg[i]->text.n);
    free(ia), free(e), free(size), free(at), free(pos), free(fin);
    return rc;
}

static double secs(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* -EINTR with a message once a signal asked the batch to stop (tool_catch_stops). */
static int stopped(void)
{
    int sig = tool_stopped;
    return sig ? tdc_error(-EINTR, "stopped by %s", strsignal(sig)) : 0;
}

int apply_stream(vol *v, backend *be, FILE *in, int batch, apply_stats *as)
{
    op *ops = NULL;
    size_t nops = 0, cap = 0, lineno = 0, len = 0;
    char *line = NULL;
    int rc = 0, ret = EX_OK;
    memset(as, 0, sizeof *as);
    while (getline(&line, &len, in) >= 0 || (ferror(in) && errno == EINTR && !tool_stopped)) {
        if (ferror(in)) { /* a signal during the read: read on */
            clearerr(in);
            continue;
        }
        lineno++;
        if (nops == cap) {
            cap = cap ? cap * 2 : 1024;
            op *p = realloc(ops, cap * sizeof *p);
            if (!p) {
                rc = tdc_error(-ENOMEM, "out of memory");
                break;
            }
            ops = p;
        }
        int r = parse_line(v, line, lineno, &ops[nops]);
        if (r < 0) {
            ret = r == -2 ? EX_FAIL : EX_USAGE;
            break;
        }
        if (r == 0) nops++;
    }
    /* the end of the input, not an error that would look like it: a batch cut short */
    if (!rc && ret == EX_OK && ferror(in))
        rc = tdc_error(errno ? -errno : -EIO, "line %zu: read: %s", lineno + 1,
                       strerror(errno ? errno : EIO));
    free(line);
    vol_reader rd;
    vol_reader_init(&rd);
    vol_mark mark; /* a batch that stops midway is undone */
    vol_mark_get(v, &mark);
    double t0 = secs();
    if (!rc && ret == EX_OK && !batch) {
        for (size_t i = 0; i < nops && !rc && !(rc = stopped()); i++)
            rc = ops[i].kind == OP_EXTRACT ? do_extract(v, &rd, &ops[i]) : do_change(v, &ops[i]);
    } else if (!rc && ret == EX_OK) {
        for (size_t i = 0; i < nops && !rc; i++)
            if (ops[i].kind >= OP_WRITE)
                rc = tdc_error(-EINVAL, "line %zu: write, truncate and delete need %s", ops[i].line,
                               "--offsets=sequence");
    }
    if (!rc && ret == EX_OK && batch) {
        /* Everything refers to the text before the batch: extracts first, then the changes. */
        op **chg = malloc((nops ? nops : 1) * sizeof *chg);
        size_t nch = 0;
        if (!chg) rc = tdc_error(-ENOMEM, "out of memory");
        for (size_t i = 0; i < nops && !rc; i++) {
            if (ops[i].kind == OP_EXTRACT)
                rc = do_extract(v, &rd, &ops[i]);
            else
                chg[nch++] = &ops[i];
        }
        if (!rc) rc = stopped();
        if (!rc) rc = batch_changes(v, be, chg, nch, &as->offsets_gpu);
        free(chg);
    }
    /* The extracts' output written out before the batch counts as applied: where it cannot
     * be (a closed pipe, a full disk), nothing of it is; nor when a signal came (then stdout,
     * which may be what blocked, is not flushed again). */
    if (!rc && ret == EX_OK) rc = stopped();
    if (!rc && ret == EX_OK && (fflush(stdout) == EOF || ferror(stdout)))
        rc = tdc_error(errno ? -errno : -EIO, "stdout: write: %s", strerror(errno ? errno : EIO));
    if (!rc && ret == EX_OK) rc = vol_sync(v);
    as->secs = secs() - t0;
    for (size_t i = 0; i < nops; i++) {
        as->inserts += ops[i].kind == OP_INSERT;
        as->appends += ops[i].kind == OP_APPEND;
        as->extracts += ops[i].kind == OP_EXTRACT;
        as->others += ops[i].kind >= OP_WRITE;
        as->bytes += ops[i].text.n;
        buf_free(&ops[i].text);
        free(ops[i].name);
    }
    free(ops);
    vol_reader_free(&rd);
    if (!tool_stopped) fflush(stdout);
    if (rc) {
        int ex = fail(rc), u = vol_undo(v, &mark);
        if (u)
            fprintf(stderr,
                    "%s: the batch stopped midway and could not be undone (%s): the "
                    "journal holds its changes before the failed line\n",
                    prog, tdc_errmsg());
        else
            fprintf(stderr, "%s: nothing of the batch was applied\n", prog);
        return ex;
    }
    return ret;
}

/* How apply and compact open an archive: writable, as the daemon does, the file table
 * alone under its default budget. Edits need no content, extracts read their files' shards,
 * and an archive of shards compacts shard by shard, never loaded whole (which takes many
 * times the archive's size). */
static vol_opts writer_opts(void)
{
    return (vol_opts){.writable = 1, .lazy = 1, .mem_auto = vol_mem_default()};
}

int cmd_apply(int argc, char **argv)
{
    static const struct option lo[] = {{"offsets", 1, 0, 'o'}, {"quiet", 0, 0, 'q'}, {0, 0, 0, 0}};
    int batch = 0, quiet = 0, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "q", lo, NULL)) != -1) {
        if (c == 'o' && !strcmp(optarg, "sequence"))
            batch = 0;
        else if (c == 'o' && !strcmp(optarg, "batch"))
            batch = 1;
        else if (c == 'q')
            quiet = 1;
        else
            return usage_err(usage_apply, c == 'o' ? "--offsets is sequence or batch" : NULL);
    }
    if (argc - optind != 2) return usage_err(usage_apply, "need ARCHIVE and OPS_FILE");
    const char *ops_path = argv[optind + 1];
    FILE *in = strcmp(ops_path, "-") ? fopen(ops_path, "r") : stdin;
    if (!in) {
        fprintf(stderr, "%s: %s: %s\n", prog, ops_path, strerror(errno));
        return EX_FAIL;
    }
    vol *v = NULL;
    backend *be = NULL;
    vol_opts vo = writer_opts();
    int rc = backend_new(&tool_opts, &be);
    if (!rc) rc = vol_open(argv[optind], &vo, &v, NULL);
    if (rc) {
        if (in != stdin) fclose(in);
        backend_free(be);
        return fail(rc);
    }
    apply_stats as;
    tool_catch_stops(NULL);
    signal(SIGPIPE, SIG_IGN); /* a closed stdout fails the batch (undone), not the process */
    int ret = apply_stream(v, be, in, batch, &as);
    if (in != stdin) fclose(in);
    if (ret == EX_OK && !quiet) {
        uint64_t n = as.inserts + as.appends + as.extracts + as.others;
        fprintf(stderr,
                "%s: %" PRIu64 " inserts, %" PRIu64 " appends (%" PRIu64 " bytes), %" PRIu64
                " writes/truncates/deletes, %" PRIu64 " extracts in %.3f s (%.0f ops/s, "
                "offsets=%s%s), journaled and synced\n",
                prog, as.inserts, as.appends, as.bytes, as.others, as.extracts, as.secs,
                as.secs > 0 ? (double)n / as.secs : 0, batch ? "batch" : "sequence",
                as.offsets_gpu ? " computed on the GPU" : "");
    }
    vol_close(v);
    backend_free(be);
    tool_die_if_stopped();
    return ret;
}

/* The compaction a signal stops (tool_catch_stops's hook). */
static vol *cancel_vol;

static void cancel_compaction(void)
{
    vol_cancel(cancel_vol);
}

int cmd_compact(int argc, char **argv)
{
    static const struct option lo[] = {
        {"level", 1, 0, 'l'}, {"shard-size", 1, 0, 'S'}, {"jobs", 1, 0, 'j'},
        {"mem", 1, 0, 'm'},   {"force", 0, 0, 'f'},      {0, 0, 0, 0}};
    int level = 0, force = 0, jobs = 0, c;
    uint64_t shard_size = 0, mem = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "l:S:j:m:f", lo, NULL)) != -1) {
        if (c == 'm') {
            if (parse_size(optarg, &mem) || mem < ((uint64_t)1 << 20))
                return usage_err(usage_compact, "--mem must be a size of 1M or more");
        } else if (c == 'j') {
            uint64_t n;
            if (parse_uint(optarg, &n) || n < 1 || n > 1024)
                return usage_err(usage_compact, "-j is 1..1024");
            jobs = (int)n;
        } else if (c == 'S') {
            if (parse_size(optarg, &shard_size) || shard_size < 1024)
                return usage_err(usage_compact, "--shard-size must be a size of 1K or more");
        } else if (c == 'l') {
            uint64_t n;
            if (parse_uint(optarg, &n) || n < 1 || n > 22)
                return usage_err(usage_compact, "level is 1..22");
            level = (int)n;
        } else if (c == 'f') {
            force = 1;
        } else {
            return usage_err(usage_compact, NULL);
        }
    }
    if (argc - optind != 1) return usage_err(usage_compact, "need ARCHIVE");
    vol *v = NULL;
    vol_opts vo = writer_opts();
    vo.level = level;
    vo.shard_size = shard_size;
    vo.compact_jobs = (unsigned)jobs;
    if (mem) vo.mem = mem;
    jrnl_stats js;
    int rc = vol_open(argv[optind], &vo, &v, &js);
    if (rc) return fail(rc);
    if (js.dropped)
        fprintf(stderr, "%s: %s.journal: dropped %" PRIu64 " bytes (%s)\n", prog, argv[optind],
                js.dropped, js.why);
    vol_info in;
    vol_get_info(v, &in);
    if (!in.journal_records && !force) {
        printf("nothing to compact: the journal is empty\n");
        vol_close(v);
        return EX_OK;
    }
    vol_compact_stats st;
    cancel_vol = v;
    tool_catch_stops(cancel_compaction);
    rc = vol_compact(v, &st);
    if (!rc)
        printf("compacted %" PRIu64 " records: %" PRIu64 " files rewritten (%" PRIu64
               " bytes) of %" PRIu64 " entries; rules %" PRIu64 " -> %" PRIu64 " (%" PRIu64
               " new); archive %" PRIu64 " -> %" PRIu64 " bytes; build %.3f s on %u threads, "
               "write %.3f s, "
               "switch %.3f s; check %.3f s: %" PRIu64 " files (%" PRIu64 " bytes) read back in %.3f s\n",
               in.journal_records, st.dirty_files, st.dirty_bytes, st.files, st.rules_before,
               st.rules_after, st.rules_new, st.archive_before, st.archive_after, st.build_s,
               st.build_threads, st.write_s, st.swap_s, st.check_s, st.check_files, st.check_bytes,
               st.check_read_s);
    vol_close(v);
    if (rc) fail(rc);
    tool_die_if_stopped();
    return rc ? tdc_exit_status(rc) : EX_OK;
}
