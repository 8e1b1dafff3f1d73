/* tadoc: the command-line tool over the tadocfs engine (no FUSE needed).
 *
 * Exit codes (also in `tadoc --help`):
 *   0  success
 *   1  operation failed (I/O error, missing file or path, out of memory)
 *   2  usage error
 *   3  the archive is corrupt, or verify found a mismatch */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "../engine/analytics/ana.h"
#include "../engine/analytics/analytics.h"
#include "../engine/format/arc.h"
#include "../engine/backend/backend.h"
#include "../engine/base/err.h"
#include "../engine/base/fio.h"
#include "../engine/base/heap.h"
#include "../engine/base/tok.h"
#include "../engine/volume/jrnl.h"
#include "../engine/volume/vol.h"
#include "../engine/build/pack.h"
#include "../engine/grammar/dict.h"
#include "../engine/index/idx.h"
#include "../engine/index/query.h"
#include "../lib/env.h"
#include "tadoc.h"

#define TADOC_VERSION "0.1.0"
#define CHUNK (1u << 20)

const char *prog = "tadoc";
backend_opts tool_opts;

static const char usage_main[] =
    "usage: tadoc COMMAND [OPTIONS] ARGS...\n"
    "\n"
    "Grammar-compressed archives of text trees (tadocfs).\n"
    "\n"
    "commands:\n"
    "  pack DIR -o ARCHIVE          compress a directory tree into an archive\n"
    "  unpack ARCHIVE DIR           recreate the tree (DIR must be new or empty)\n"
    "  ls [-l] ARCHIVE              list the paths in the archive\n"
    "  cat ARCHIVE PATH             write one file to standard output\n"
    "  extract ARCHIVE PATH OFF LEN write LEN bytes of PATH from byte OFF\n"
    "  stat ARCHIVE                 section sizes, rules, DAG depth, dictionary\n"
    "  verify ARCHIVE               check every checksum and every file's content hash\n"
    "  wordcount ARCHIVE [SCOPE]    count<TAB>word, most frequent first, from the grammar\n"
    "  sort ARCHIVE [SCOPE]         word<TAB>count, by word\n"
    "  invindex ARCHIVE [SCOPE]     word<TAB>path<TAB>path..., by word\n"
    "  termvector ARCHIVE [SCOPE]   path<TAB>count<TAB>word for every file\n"
    "  seqcount ARCHIVE [SCOPE]     count<TAB>w1 w2 w3 for every three-word sequence\n"
    "  rankedinvindex ARCHIVE [SCOPE]  w1 w2 w3<TAB>path:count..., files by count\n"
    "  count ARCHIVE PATH WORD      occurrences of WORD in PATH, from the grammar\n"
    "  search ARCHIVE PATH WORD     byte offset of every occurrence of WORD in PATH\n"
    "  apply ARCHIVE OPS_FILE       journal a batch of edits and extracts\n"
    "  compact ARCHIVE              fold the journal (ARCHIVE.journal) into the archive\n"
    "\n"
    "Run 'tadoc COMMAND --help' for a command's options; 'tadoc -h, --help' prints this,\n"
    "'tadoc --version' the version and backend. Manual: tadoc(1), tadocfs(8).\n"
    "\n"
    "environment:\n"
    "  TADOC_GPU=off|auto|on        where analytics and apply's batch offsets run (auto)\n"
    "  TADOC_TRAVERSAL=auto|topdown|bottomup  the analytics' traversal (auto)\n"
    "  TADOC_THREADS=1|2            the analytics' threads (by machine and scope size)\n"
    "  TADOC_ANA_VERBOSE=1|2        analytics' choices on stderr; 2 also phase times\n"
    "  TADOC_ANA_CACHE=0            do not keep a grammar's preparation between analytics\n"
    "  TADOC_GPU_WIDE_SEQ=1         GPU sequence analytics take wide keys (for tests)\n"
    "  TADOC_SHARDS=N|whole         analytics of an archive of several shards: N shards at\n"
    "                               once (one per CPU), or the archive loaded whole\n"
    "  TADOC_MERGE_MEM=SIZE         memory the merge of an archive's shards' analytics may\n"
    "                               hold; the rest goes to a file in $TMPDIR or /var/tmp\n"
    "                               (64M)\n"
    "  TADOC_GPU_MEM=SIZE           device memory a whole archive may take on the GPU (half\n"
    "                               the free memory); a larger one goes shard by shard\n"
    "  TADOC_VIA_MOUNT=1            analytics read from a tadocfs daemon that has the archive\n"
    "                               mounted (its resident copy and cached results) when the\n"
    "                               mount shows the archive as written and every file\n"
    "  TADOC_NO_PRUNE, TADOC_FREQ_ORDER, TADOC_NO_FRONT, TADOC_NO_KIND, TADOC_NO_COLS,\n"
    "  TADOC_NO_TEXT, TADOC_NO_BARE, TADOC_NO_COPIES=1\n"
    "                               pack: size ablations\n"
    "\n"
    "exit status: 0 success, 1 operation failed, 2 usage error,\n"
    "             3 archive corrupt or verification mismatch\n";

int fail(int rc)
{
    fprintf(stderr, "%s: %s\n", prog, tdc_errmsg());
    return tdc_exit_status(rc);
}

int usage_err(const char *usage, const char *msg)
{
    if (msg) fprintf(stderr, "%s: %s\n", prog, msg);
    fputs(usage, stderr);
    return EX_USAGE;
}

/* For a command of arguments alone (no options but --help; argv[0] is its name): the first
 * "--", which ends the options as usual (`tadoc cat A -- -h` reads a file named -h), taken out
 * of argv. The new argc. */
static int drop_dashdash(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--")) {
            memmove(argv + i, argv + i + 1, (size_t)(argc - i) * sizeof *argv); /* with NULL */
            return argc - 1;
        }
    return argc;
}

/* For such a command: an argument before any "--" that looks like an option (--help aside),
 * which it does not take: a usage error (exit 2) naming it, else -1 to continue. */
static int no_options(int argc, char **argv, const char *usage)
{
    char msg[160];
    for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
        if (argv[i][0] == '-' && argv[i][1]) {
            snprintf(msg, sizeof msg,
                     "%s: unknown option (use -- before a name that starts with -)", argv[i]);
            return usage_err(usage, msg);
        }
    return -1;
}

/* Parse options common to every subcommand: --help prints `usage` to stdout. Returns -1 to
 * continue, or an exit code. */
static int want_help(int argc, char **argv, const char *usage)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--")) break;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage, stdout);
            return EX_OK;
        }
    }
    return -1;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int count_record(void *ctx, const jrnl_rec *r)
{
    (void)r;
    ++*(uint64_t *)ctx;
    return 0;
}

/* The commands that read the archive show it as last written: say so when its journal holds
 * edits not folded in yet (a mount or `tadoc apply` wrote them; `tadoc compact` folds them). */
void note_journal(const char *path, const arc *a)
{
    char *jp = malloc(strlen(path) + 16);
    jrnl *j = NULL;
    jrnl_stats st;
    uint64_t n = 0;
    if (!jp) return;
    sprintf(jp, "%s.journal", path);
    if (jrnl_open(jp, a->id, a->prev_id, 0, count_record, &n, &st, &j) == 0) {
        if (n)
            fprintf(stderr,
                    "%s: note: %s holds %llu edits not in the archive yet (run 'tadoc compact' "
                    "to fold them in; a mount shows them)\n",
                    prog, jp, (unsigned long long)n);
        if (st.unread) fprintf(stderr, "%s: note: %s: %s; left unread\n", prog, jp, st.why);
        jrnl_close(j);
    }
    free(jp);
}

/* ---------------- pack ---------------- */

static const char usage_pack[] =
    "usage: tadoc pack DIR -o ARCHIVE [--level N] [--shard-size SIZE] [-j N] "
    "[--segment TOKENS] [-q]\n"
    "\n"
    "Compress the tree under DIR into ARCHIVE, written atomically. Regular files,\n"
    "directories, symlinks, FIFOs, sockets and devices are kept with their modes, owners,\n"
    "times, user.* xattrs and hard links; a special file has no content (a device keeps its\n"
    "number). Files are packed in shards of about SIZE bytes of content, each an independent\n"
    "grammar, on N threads at once; a file larger than a shard is cut over several.\n"
    "\n"
    "  -o, --output ARCHIVE   the archive to write (required)\n"
    "  -l, --level N          zstd level of the sections, 1..22 (default 19)\n"
    "  -S, --shard-size SIZE  content per shard, with K, M or G (default: one shard up to\n"
    "                         64M, else about 32 shards of 8M to 16M)\n"
    "  -j, --jobs N           shards packed at once (default: one per CPU)\n"
    "  -s, --segment TOKENS   tokens per Sequitur segment; bounds memory at about\n"
    "                         40 bytes per token (default 25165824)\n"
    "  -q, --quiet            no progress bar and no summary\n"
    "\n"
    "For the size measurements of bench/codecs.sh, eight environment variables switch off one\n"
    "size technique each when set to 1: TADOC_NO_PRUNE (keep every rule), TADOC_FREQ_ORDER\n"
    "(tokens in plain frequency order), TADOC_NO_FRONT (no front-coded dictionary),\n"
    "TADOC_NO_KIND (rules and root in the plain layout, not the kind layout), TADOC_NO_COLS\n"
    "(the file table in rows, not in columns), TADOC_NO_TEXT (no file stored as its text,\n"
    "however incompressible), TADOC_NO_BARE (no shard stored as its text without token\n"
    "references, the form a shard takes where it is smaller as its text than as a grammar)\n"
    "and TADOC_NO_COPIES (copies of a file packed in their own places, not in the shard of\n"
    "the first).\n";

/* 1 when environment variable `name` is "1" (the ablation switches of tadoc pack). */
static int env_on(const char *name)
{
    const char *e = getenv(name);
    return e && !strcmp(e, "1");
}

typedef struct progress {
    int tty;
    double start, last;
} progress;

static void on_progress(void *ctx, uint64_t done, uint64_t total)
{
    progress *p = ctx;
    double t = now();
    if (!p->tty || (t - p->last < 0.1 && done < total)) return;
    p->last = t;
    int pct = total ? (int)(done * 100 / total) : 100;
    if (pct > 100) pct = 100;
    char bar[31];
    for (int i = 0; i < 30; i++)
        bar[i] = i < pct * 30 / 100 ? '#' : ' ';
    bar[30] = 0;
    double rate = t > p->start ? (double)done / (t - p->start) / 1e6 : 0;
    fprintf(stderr, "\r[%s] %3d%%  %.1f/%.1f MB  %.1f MB/s ", bar, pct, (double)done / 1e6,
            (double)total / 1e6, rate);
}

static void on_warn(void *ctx, const char *msg)
{
    progress *p = ctx;
    fprintf(stderr, "%s%s: warning: %s\n", p->tty ? "\r\033[K" : "", prog, msg);
}

static int cmd_pack(int argc, char **argv)
{
    static const struct option lo[] = {{"output", 1, 0, 'o'},
                                       {"level", 1, 0, 'l'},
                                       {"segment", 1, 0, 's'},
                                       {"shard-size", 1, 0, 'S'},
                                       {"jobs", 1, 0, 'j'},
                                       {"quiet", 0, 0, 'q'},
                                       {0, 0, 0, 0}};
    const char *out = NULL;
    int quiet = 0, c;
    pack_opts o = {0};
    progress pr = {0};
    while ((c = getopt_long(argc, argv, "o:l:s:S:j:q", lo, NULL)) != -1) {
        uint64_t n;
        switch (c) {
        case 'o':
            out = optarg;
            break;
        case 'l':
            if (parse_uint(optarg, &n) || n < 1 || n > 22)
                return usage_err(usage_pack, "--level must be 1..22");
            o.level = (int)n;
            break;
        case 's':
            if (parse_uint(optarg, &o.seg_tokens) || o.seg_tokens < 1024 ||
                o.seg_tokens > ((uint64_t)1 << 31))
                return usage_err(usage_pack, "--segment must be 1024..2^31");
            break;
        case 'S':
            if (parse_size(optarg, &o.shard_size) || o.shard_size < 1024)
                return usage_err(usage_pack, "--shard-size must be a size of 1K or more");
            break;
        case 'j':
            if (parse_uint(optarg, &n) || n < 1 || n > 1024)
                return usage_err(usage_pack, "--jobs must be 1..1024");
            o.jobs = (unsigned)n;
            break;
        case 'q':
            quiet = 1;
            break;
        default:
            return usage_err(usage_pack, NULL);
        }
    }
    if (optind + 1 != argc || !out || !*out)
        return usage_err(usage_pack, "need DIR and -o ARCHIVE");
    pr.tty = !quiet && isatty(2);
    pr.start = pr.last = now();
    o.progress = on_progress;
    o.warn = on_warn;
    o.keep_rules = env_on("TADOC_NO_PRUNE");
    o.freq_order = env_on("TADOC_FREQ_ORDER");
    o.copies_apart = env_on("TADOC_NO_COPIES");
    o.plain = (env_on("TADOC_NO_FRONT") ? ARC_PLAIN_DICT : 0) |
              (env_on("TADOC_NO_KIND") ? ARC_PLAIN_SYMS : 0) |
              (env_on("TADOC_NO_COLS") ? ARC_PLAIN_FILES : 0) |
              (env_on("TADOC_NO_TEXT") ? ARC_PLAIN_TEXT : 0) |
              (env_on("TADOC_NO_BARE") ? ARC_PLAIN_BARE : 0);
    o.ctx = &pr;
    pack_stats st;
    vol_replace vr; /* packing over an archive: its journal must hold no edit, then goes */
    tool_catch_stops(NULL);
    o.stop = &tool_stopped;
    int rc = vol_replace_begin(out, &vr);
    if (!rc) {
        rc = pack_dir(argv[optind], out, &o, &st);
        vol_replace_end(&vr, !rc);
    }
    if (pr.tty) fputs("\r\033[K", stderr);
    if (rc) {
        int ex = fail(rc);
        tool_die_if_stopped();
        return ex;
    }
    if (!quiet) {
        double secs = now() - pr.start;
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        fprintf(stderr,
                "packed %llu files, %llu dirs, %llu symlinks, %llu special files%s\n"
                "  bytes in   %llu\n  bytes out  %llu\n  ratio      %.2f\n"
                "  tokens     %llu (%llu in the shards' dictionaries)\n"
                "  rules      %llu in %llu segment(s)\n  shards     %llu (%llu stored as text)\n"
                "  copies     %llu files (%llu bytes) packed beside their first\n"
                "  time       %.2f s (%.1f MB/s)\n  peak RSS   %.1f MB\n",
                (unsigned long long)st.files, (unsigned long long)st.dirs,
                (unsigned long long)st.links, (unsigned long long)st.special,
                st.skipped ? " (some files of other types skipped)" : "",
                (unsigned long long)st.bytes_in, (unsigned long long)st.bytes_out,
                st.bytes_out ? (double)st.bytes_in / (double)st.bytes_out : 0.0,
                (unsigned long long)st.tokens, (unsigned long long)st.dict_tokens,
                (unsigned long long)st.rules, (unsigned long long)st.segments,
                (unsigned long long)st.shards, (unsigned long long)st.text_shards,
                (unsigned long long)st.copies, (unsigned long long)st.copy_bytes, secs,
                secs > 0 ? (double)st.bytes_in / secs / 1e6 : 0.0, (double)ru.ru_maxrss / 1024);
    }
    /* As tar: the archive is written, but it may not hold what the tree holds now. */
    if (st.changed) return fail(pack_changed_error(out, st.changed));
    return EX_OK;
}

/* ---------------- ls / cat / extract ---------------- */

static const char usage_ls[] =
    "usage: tadoc ls [-l] ARCHIVE\n"
    "\n"
    "List the archived paths, one per line, directories first in each subtree; tab, newline,\n"
    "backslash and other control bytes in names as C escapes (\\t \\n \\\\ \\xHH).\n"
    "  -l   also type, mode, owner, size and modification time\n";

static int cmd_ls(int argc, char **argv)
{
    int lng = 0, c;
    while ((c = getopt(argc, argv, "l")) != -1) {
        if (c == 'l')
            lng = 1;
        else
            return usage_err(usage_ls, NULL);
    }
    if (optind + 1 != argc) return usage_err(usage_ls, "need ARCHIVE");
    arc *a;
    int rc = arc_open_meta(argv[optind], &a); /* the file table alone: no shard is decoded */
    if (rc) return fail(rc);
    note_journal(argv[optind], a);
    for (uint32_t i = 1; i < a->nents; i++) {
        const arc_entry *e = &a->ents[i];
        if (lng) {
            char tb[32];
            time_t t = (time_t)e->mtime_sec;
            struct tm tm;
            if (gmtime_r(&t, &tm)) /* else a year past what struct tm holds: the seconds */
                strftime(tb, sizeof tb, "%Y-%m-%d %H:%M", &tm);
            else
                snprintf(tb, sizeof tb, "@%lld", (long long)e->mtime_sec);
            char type = "?-dlpscb"[e->type], size[32];
            if (e->type == ARC_CHR || e->type == ARC_BLK) /* "major, minor", as ls(1) */
                snprintf(size, sizeof size, "%u, %u", major(e->rdev), minor(e->rdev));
            else
                snprintf(size, sizeof size, "%llu", (unsigned long long)e->size);
            printf("%c%04o %5u %5u %12s %s ", type, e->mode, e->uid, e->gid, size, tb);
        }
        put_escaped(stdout, e->path, strlen(e->path));
        if (lng && e->type == ARC_LNK) {
            fputs(" -> ", stdout);
            put_escaped(stdout, e->link, strlen(e->link));
        }
        putchar('\n');
    }
    arc_free(a);
    return EX_OK;
}

/* ---------------- stat / verify ---------------- */

static const char usage_stat[] =
    "usage: tadoc stat ARCHIVE\n"
    "\n"
    "Print the archive's sections (offset, stored and expanded sizes, codec), the number of\n"
    "files, tokens and rules, the grammar's symbol counts and the DAG depth. The shards are\n"
    "loaded one at a time, each with an index of its own, so memory follows the largest shard.\n";

/* What stat prints of the grammar, summed over the shards (depth and flat bound: the
 * largest). */
typedef struct gram_figs {
    uint64_t tokens, blob, rules, syms, root, index;
    uint32_t depth, flat;
    int long_words; /* a dictionary holds a word token of TOK_CAP bytes */
} gram_figs;

static int add_figs(const arc *a, gram_figs *f)
{
    idx *x;
    int rc = idx_build(a, &x);
    if (rc) return rc;
    uint32_t depth = idx_depth(x);
    f->tokens += dict_count(a->dict);
    f->blob += dict_blob_size(a->dict);
    f->rules += a->g.nrules;
    f->syms += a->g.syms.n;
    f->root += a->g.root.n;
    f->index += idx_mem(x);
    f->depth = depth > f->depth ? depth : f->depth;
    f->long_words |= dict_has_word_of(a->dict, TOK_CAP);
    f->flat = idx_flat_max(x) > f->flat ? idx_flat_max(x) : f->flat;
    idx_free(x);
    return 0;
}

/* The grammar's figures of archive a (from arc_open_meta): shard by shard, each loaded and
 * indexed alone, so that memory follows one shard, not the archive; an archive before
 * version 4 whole. A damaged shard is left out with its message in damage[k] (NULL for the
 * others). */
static int grammar_figs(arc *a, gram_figs *f, char **damage)
{
    memset(f, 0, sizeof *f);
    if (a->version < 4) {
        int rc = arc_load_data(a);
        return rc ? rc : add_figs(a, f);
    }
    for (uint32_t k = 0; k < a->nshards; k++) {
        arc *p;
        int rc = arc_open_piece(a, k, &p);
        if (rc == -EBADMSG && a->nshards > 1) {
            if (!(damage[k] = strdup(tdc_errmsg()))) return tdc_error(-ENOMEM, "out of memory");
            continue;
        }
        if (!rc) rc = add_figs(p, f);
        arc_piece_free(p);
        if (rc) return rc;
    }
    return 0;
}

static int cmd_stat(int argc, char **argv)
{
    if (argc != 2) return usage_err(usage_stat, "need ARCHIVE");
    arc *a;
    int rc = arc_open_meta(argv[1], &a);
    if (rc) return fail(rc);
    note_journal(argv[1], a);
    gram_figs f = {0};
    char **damage = calloc(a->nshards ? a->nshards : 1, sizeof *damage);
    rc = damage ? grammar_figs(a, &f, damage) : tdc_error(-ENOMEM, "out of memory");
    if (rc) {
        for (uint32_t k = 0; damage && k < a->nshards; k++)
            free(damage[k]);
        free(damage);
        arc_free(a);
        return fail(tdc_error_ctx(rc, "%s", argv[1]));
    }
    uint64_t nf = 0, nd = 0, nl = 0, ns = 0, bytes = 0;
    for (uint32_t i = 0; i < a->nents; i++) {
        nf += a->ents[i].type == ARC_REG;
        nd += a->ents[i].type == ARC_DIR;
        nl += a->ents[i].type == ARC_LNK;
        ns += a->ents[i].type > ARC_LNK;
        if (a->ents[i].type == ARC_REG) bytes += a->ents[i].size;
    }
    uint32_t ndamaged = 0;
    for (uint32_t k = 0; k < a->nshards; k++)
        ndamaged += damage[k] != NULL;
    const char *over = a->nshards > 1 ? ", over the shards" : "";
    printf("archive      %s\n", argv[1]);
    printf("size         %llu bytes\n", (unsigned long long)a->file_size);
    printf("content      %llu bytes in %llu files, %llu directories, %llu symlinks, %llu special\n",
           (unsigned long long)bytes, (unsigned long long)nf, (unsigned long long)nd,
           (unsigned long long)nl, (unsigned long long)ns);
    printf("ratio        %.3f\n", a->file_size ? (double)bytes / (double)a->file_size : 0.0);
    if (ndamaged)
        printf("grammar      %u damaged shards left out of the figures below\n", ndamaged);
    printf("dictionary   %llu tokens, %llu bytes%s\n", (unsigned long long)f.tokens,
           (unsigned long long)f.blob, a->nshards > 1 ? " (each shard's own, summed)" : "");
    printf("rules        %llu (plus the root%s)\n", (unsigned long long)f.rules,
           a->nshards > 1 ? " of each shard" : "");
    printf("symbols      %llu in rules, %llu in the root%s\n", (unsigned long long)f.syms,
           (unsigned long long)f.root, over);
    printf("dag depth    %u\n", f.depth);
    int hl = arc_long_words(a);
    printf("long words   %s of %u bytes or more (%s)\n", f.long_words ? "some" : "none", TOK_CAP,
           hl == ARC_LONG_UNKNOWN                 ? "not recorded in the header"
           : (hl == ARC_LONG_YES) == f.long_words ? "as the header says"
                                                  : "the header says otherwise");
    printf("index        %llu bytes in memory%s (rules up to %u bytes kept flat)\n",
           (unsigned long long)f.index, a->nshards > 1 ? ", each shard's own, summed" : "", f.flat);
    printf("shards       %u\n", a->nshards);
    printf("             %5s %12s %12s %10s %10s %12s\n", "shard", "content", "stored", "tokens",
           "rules", "root syms");
    for (uint32_t k = 0; k < a->nshards; k++) {
        const arc_shard *sh = &a->shards[k];
        uint64_t stored = 0;
        for (uint32_t i = sh->sec; i < sh->sec + 3 && i < a->nsecs; i++)
            stored += a->secs[i].stored;
        printf("             %5u %12llu %12llu %10u %10u %12llu%s\n", k,
               (unsigned long long)sh->bytes, (unsigned long long)stored, sh->ntokens, sh->nrules,
               (unsigned long long)sh->root_syms, damage[k] ? "  damaged" : "");
    }
    printf("sections     %-11s %-10s %12s %12s %12s\n", "name", "codec", "offset", "stored", "raw");
    for (uint32_t i = 0; i < a->nsecs; i++) {
        const arc_secinfo *s = &a->secs[i];
        printf("             %-11s %-10s %12llu %12llu %12llu\n", arc_section_name(s->type),
               arc_codec_name(s->codec), (unsigned long long)s->offset,
               (unsigned long long)s->stored, (unsigned long long)s->raw);
    }
    for (uint32_t k = 0; k < a->nshards; k++) {
        if (damage[k]) fprintf(stderr, "%s: %s\n", argv[1], damage[k]);
        free(damage[k]);
    }
    free(damage);
    arc_free(a);
    return EX_OK;
}

static const char usage_verify[] =
    "usage: tadoc verify ARCHIVE\n"
    "\n"
    "Check the header, section table and section checksums, the grammar's structure, then\n"
    "extract every file and compare its XXH3-64 with the one recorded at pack time; then\n"
    "replay ARCHIVE.journal, if any, checking every record's checksum and that it applies.\n"
    "Exit status 3 on any mismatch or damaged journal record (a torn last record, which a\n"
    "crash during an append leaves, is reported but is not an error). A damaged shard of an\n"
    "archive of several is named with the files it costs; the others are checked as usual.\n";

/* idx_check_spans' report of one damaged file (entry `ent` of the span `s`): named on
 * stderr. */
static void on_bad_file(void *ctx, const arc *s, uint32_t ent)
{
    (void)ctx;
    const arc_entry *e = &s->ents[ent];
    if (e->damaged)
        fprintf(stderr, "%s: %s: content lies in damaged shard %u\n", prog, e->path,
                e->damaged - 1);
    else
        fprintf(stderr, "%s: %s: content hash mismatch\n", prog, e->path);
}

/* idx_check_spans' report of a damaged shard of the archive whose path is ctx. */
static void on_damaged_shard(void *ctx, uint32_t k, const char *why)
{
    (void)k;
    fprintf(stderr, "%s: %s: damaged: %s\n", prog, (const char *)ctx, why);
}

static int cmd_verify(int argc, char **argv)
{
    if (argc != 2) return usage_err(usage_verify, "need ARCHIVE");
    /* Span by span: memory follows the shards one file needs at once (a file cut over shards
     * of its own, one of them), not the archive. */
    arc *a;
    int rc = arc_open_meta(argv[1], &a);
    if (rc) return fail(rc);
    note_journal(argv[1], a);
    idx_span_check sc = {.on_bad = on_bad_file, .on_damage = on_damaged_shard, .ctx = a->path};
    rc = idx_check_spans(a, NULL, &sc);
    int long_words = arc_long_words(a);
    arc_free(a);
    uint64_t files = sc.files, bytes = sc.bytes;
    if (rc && !sc.bad && !sc.damaged) return fail(rc);
    if (sc.bad || sc.damaged) {
        fprintf(stderr, "%s: %llu of %llu files damaged", prog, (unsigned long long)sc.bad,
                (unsigned long long)files);
        if (sc.damaged) fprintf(stderr, "; damaged shards: %u", sc.damaged);
        fputc('\n', stderr);
        return EX_CORRUPT;
    }
    /* the header's record of long words: only the analytics' choice of the GPU follows it */
    if (long_words != ARC_LONG_UNKNOWN && (long_words == ARC_LONG_YES) != sc.long_words) {
        fprintf(stderr, "%s: %s: the header says %s word of %u bytes or more, the shards hold %s\n",
                prog, argv[1], sc.long_words ? "no" : "a", TOK_CAP, sc.long_words ? "one" : "none");
        return EX_CORRUPT;
    }
    printf("ok: %llu files, %llu bytes verified\n", (unsigned long long)files,
           (unsigned long long)bytes);
    /* The journal: every record's checksum, and that each applies to the archive. */
    vol *v;
    vol_opts vo = {.writable = 0, .cache_bytes = 1, .lazy = 1}; /* the file table alone */
    jrnl_stats js;
    if ((rc = vol_open(argv[1], &vo, &v, &js))) return fail(rc);
    vol_info in;
    vol_get_info(v, &in);
    vol_close(v);
    if (js.unread) {
        fprintf(stderr,
                "%s: %s.journal: %s; move the file aside to use the archive without its "
                "pending edits\n",
                prog, argv[1], js.why);
        return EX_CORRUPT;
    }
    if (js.dropped) {
        /* A record cut short is what a crash mid-append leaves; anything else is damage. */
        int torn = !strncmp(js.why, "torn", 4);
        if (js.intact_at)
            printf("journal: %llu records apply; %llu bytes after them are damaged (%s), and an "
                   "intact record follows at offset %llu: writable opens refuse the journal "
                   "until it is cut or moved aside\n",
                   (unsigned long long)js.records, (unsigned long long)js.dropped, js.why,
                   (unsigned long long)js.intact_at);
        else
            printf("journal: %llu records apply; %llu bytes after them are %s (%s) and will be "
                   "dropped at the next writable open\n",
                   (unsigned long long)js.records, (unsigned long long)js.dropped,
                   torn ? "a torn last record" : "damaged", js.why);
        if (!torn) return EX_CORRUPT;
    }
    if (js.stale)
        printf("journal: already folded into the archive (left by an interrupted compaction)\n");
    else if (js.records)
        printf("journal: %llu records apply; %llu files with pending edits\n",
               (unsigned long long)js.records, (unsigned long long)in.dirty_files);
    return EX_OK;
}

/* ---------------- analytics ---------------- */

/* An ana_sink writing to the file descriptor *ctx. */
static int to_fd(void *ctx, const unsigned char *p, size_t n)
{
    return fio_write_all(*(int *)ctx, p, n, "stdout");
}

/* via_mount's search: the newest tadocfs mount of the archive at `real`. */
typedef struct mount_find {
    const char *real;
    char mnt[4096];
} mount_find;

static int mount_of(void *ctx, const char *mnt, const char *type, const char *dev)
{
    mount_find *m = ctx;
    char v[4200];
    (void)dev;
    if (strcmp(type, "fuse.tadocfs")) return 0;
    /* readable by root and the mount's owner only, who see every file through it */
    ssize_t n = getxattr(mnt, "user.tadoc.archive", v, sizeof v - 1);
    if (n < 0) return 0;
    v[n] = 0;
    if (!strcmp(v, m->real)) snprintf(m->mnt, sizeof m->mnt, "%s", mnt);
    return 0;
}

/* TADOC_VIA_MOUNT=1: analytic `kind` of directory `scope` read from the virtual file of a
 * tadocfs daemon that has `archive` mounted, to stdout: its resident copy (on the GPU where it
 * has one) and its cached results answer, with no archive load here. Only where the output is
 * the one tadoc computes: the caller sees every file through the mount (root or its owner),
 * and the mount shows the archive as written (its journal holds no record). 0 when served; 1
 * when not (compute it here); a negative errno when copying failed midway. */
static int via_mount(const char *archive, const arc *a, uint32_t scope, int kind)
{
    char *real = realpath(archive, NULL), v[32];
    mount_find m = {.real = real, .mnt = ""};
    if (real) fio_mounts(mount_of, &m);
    free(real);
    if (!m.mnt[0]) return 1;
    ssize_t n = getxattr(m.mnt, "user.tadoc.journal_records", v, sizeof v - 1);
    if (n <= 0 || (v[n] = 0, strcmp(v, "0"))) return 1;
    if (a->ents[scope].type != ARC_DIR) return 1;
    char *path = malloc(strlen(m.mnt) + strlen(a->ents[scope].path) + 32);
    if (!path) return 1;
    sprintf(path, "%s/%s%s%s", m.mnt, a->ents[scope].path, scope ? "/" : "", ana_table[kind].vfile);
    int fd = open(path, O_RDONLY | O_CLOEXEC), rc = fd < 0 ? 1 : 0;
    static char blk[CHUNK];
    for (ssize_t k; !rc && (k = read(fd, blk, sizeof blk)) != 0;)
        rc = k < 0 ? (errno == EINTR ? 0 : tdc_error(-errno, "%s: %s", path, strerror(errno)))
                   : fio_write_all(1, blk, (size_t)k, "stdout");
    if (fd >= 0) close(fd);
    free(path);
    return rc;
}

/* Analytic `kind` (analytics.h), which argv[0] names; TADOC_GPU=off|auto|on (main) picks the
 * backend. */
static int run_analytic(int argc, char **argv, int kind)
{
    char usage[1024];
    snprintf(usage, sizeof usage, "usage: tadoc %s ARCHIVE [SCOPE]\n\n%s", ana_table[kind].name,
             ana_table[kind].doc);
    int h = want_help(argc, argv, usage);
    if (h < 0) h = no_options(argc, argv, usage);
    if (h >= 0) return h;
    argc = drop_dashdash(argc, argv);
    if (argc != 2 && argc != 3) return usage_err(usage, "need ARCHIVE and an optional SCOPE");
    arc *a;
    int rc = arc_open_meta(argv[1], &a);
    if (rc) return fail(rc);
    note_journal(argv[1], a);
    uint32_t first = 0;
    if (argc == 3 && (rc = arc_lookup_path(a, argv[2], &first))) {
        arc_free(a);
        return fail(rc);
    }
    uint32_t end = ana_subtree_end(a, first);
    /* a hard-linked file whose first name is outside the scope counts under its name inside,
     * as the mount's virtual files count it: this process's copy of the file table says so */
    if ((rc = ana_relink(a, NULL, first, end, a->ents))) {
        arc_free(a);
        return fail(tdc_error(rc, "out of memory"));
    }
    if (env_on("TADOC_VIA_MOUNT") && (rc = via_mount(argv[1], a, first, kind)) <= 0) {
        arc_free(a);
        return rc ? fail(rc) : EX_OK;
    }
    /* one analytic in a fresh process: auto takes the GPU only for a large scope */
    backend_opts o = tool_opts;
    o.auto_min = BACKEND_CLI_AUTO_MIN_BYTES;
    backend *be = NULL;
    buf out = {0};
    /* As sort(1) does, a merge of the shards' outputs that would hold more than
     * TADOC_MERGE_MEM goes on in an unlinked file. By default as much as the daemon's merges
     * hold under its default budget: on Linux 6.1 its sequence counts took 83-87 s and
     * 0.71 GB so, against 222 s and 6.2 GB in memory (smaller tables, fewer cache misses). */
    tdc_env_merge_spill(&o);
    rc = backend_new(&o, &be);
    /* An archive of several shards is analysed shard by shard, each shard loaded alone, on
     * every core; where auto's threshold (or on) gives the scope to the GPU, whole on one GPU
     * when it fits there and there is one (faster), else in parts of consecutive shards as
     * large as a GPU takes, at least one per GPU. One that cannot be (a word cut between
     * shards) is loaded whole. */
    int whole = rc || a->nshards < 2 || o.ana.shards == ANA_WHOLE, gpu = 0, done = 0;
    if (!whole) {
        uint64_t bytes, all;
        backend_scope_bytes(a, first, end, &bytes, &all);
        unsigned cpus = backend_cpus();
        /* Asking the GPU whether the archive fits starts CUDA: only where the GPU can win. */
        int could = o.mode == BACKEND_ON || (o.mode == BACKEND_AUTO && bytes >= o.auto_min &&
                                             (backend_cli_gpu_wins(kind, bytes, all, cpus, 1) ||
                                              backend_cli_gpu_wins(kind, bytes, all, cpus, 0)));
        /* where the header says a word of TOK_CAP bytes is in the archive, the GPU would
         * refuse it whole (below) after the load: shard by shard at once */
        int fits = could && arc_long_words(a) != ARC_LONG_YES && backend_gpu_fits(be, a);
        gpu = could && (o.mode == BACKEND_ON || backend_cli_gpu_wins(kind, bytes, all, cpus, fits));
        /* Whole on the GPU; where it leaves the whole to the CPU (a word longer than TOK_CAP
         * in the scope, keys too wide), shard by shard from a copy of the file table taken
         * before the load, each shard on the GPU that takes it: never the whole grammar on
         * the CPU, which runs on fewer threads than the shards do. The GPU refuses cut words
         * only after the upload, its index and the ranking of the words: a dictionary without
         * a word token of TOK_CAP bytes has none, one with such a token skips all that (an
         * archive whose writer did not record it in the header). */
        arc *meta = NULL;
        int one = gpu && fits && backend_gpu_devices(be) == 1;
        if (one && !(rc = arc_meta_dup(a, &meta)) && !(rc = arc_load_data(a)) &&
            (dict_has_word_of(a->dict, TOK_CAP) ||
             (rc = backend_gpu_analytic(be, kind, a, 1, first, end, NULL, &out)) == 1)) {
            rc = 0;
            gpu = o.mode == BACKEND_ON || backend_cli_gpu_wins(kind, bytes, all, cpus, 0);
            /* The refused upload goes: its device memory back for the shards, and no
             * resident copy is left keyed by the address of an archive freed here. */
            backend_release(be, a);
            arc_free(a);
            a = meta;
            meta = NULL;
        } else if (one) {
            done = !rc;
        }
        arc_free(meta);
    }
    int fd = 1;
    if (!whole && !done && !rc) { /* written out as the merge makes it, never held whole */
        backend_set_mode(be, gpu ? BACKEND_ON : BACKEND_OFF);
        rc = backend_by_shard_to(be, NULL, kind, a, first, end, NULL, to_fd, &fd);
        if (rc == -ENOTSUP) {
            whole = 1;
            rc = 0;
            out.n = 0;
            backend_set_mode(be, o.mode);
        }
    }
    if (whole && !rc) rc = arc_load_data(a);
    if (whole && !rc) rc = backend_analytic(be, kind, a, 1, first, end, NULL, &out);
    if (!rc) rc = fio_write_all(1, out.p, out.n, "stdout");
    buf_free(&out);
    backend_free(be);
    arc_free(a);
    return rc ? fail(rc) : EX_OK;
}

/* ---------------- word queries ---------------- */

static const char usage_count[] =
    "usage: tadoc count ARCHIVE PATH WORD\n"
    "\n"
    "Print how many times WORD occurs as a whole word in the file PATH, using the word index\n"
    "(word2rule and the DAG's reverse edges), without expanding the file.\n";

static const char usage_search[] =
    "usage: tadoc search ARCHIVE PATH WORD\n"
    "\n"
    "Print the byte offset of every whole-word occurrence of WORD in the file PATH, one per\n"
    "line, ascending; only the rules that hold WORD are visited.\n";

/* count or search: the file's shards queried one by one, several at once (idx_query_parts),
 * never merged; the answer of each part shifted by the bytes of the parts before it. */
static int run_query(int argc, char **argv, const char *usage, int search)
{
    if (argc != 4) return usage_err(usage, "need ARCHIVE PATH WORD");
    arc *a;
    uint32_t e, first, last;
    idx_part *parts = NULL;
    size_t n = 0;
    int rc = arc_open_meta(argv[1], &a);
    if (rc) return fail(rc);
    if (!(rc = arc_find_file(a, argv[2], &e))) {
        note_journal(argv[1], a);
        int64_t ce = arc_ino_entry(a, a->ents[e].ino);
        e = ce >= 0 ? (uint32_t)ce : e;
        arc_entry_shards(a, e, &first, &last);
        n = (size_t)last - first + 1;
        rc = (parts = calloc(n, sizeof *parts)) ? idx_query_parts(a, e, first, last + 1, argv[3],
                                                                  strlen(argv[3]), search, 0, parts)
                                                : tdc_error(-ENOMEM, "out of memory");
        if (rc && a->version >= 4) rc = tdc_error_ctx(rc, "%s", argv[1]);
    }
    uint64_t base = 0, count = 0;
    for (size_t i = 0; !rc && i < n; i++) {
        for (size_t j = 0; search && j < parts[i].offs.n; j++)
            printf("%llu\n", (unsigned long long)(base + parts[i].offs.p[j]));
        base += parts[i].bytes;
        count += parts[i].count;
    }
    if (!rc && !search) printf("%llu\n", (unsigned long long)count);
    if (parts) idx_parts_free(parts, n);
    free(parts);
    arc_free(a);
    return rc ? fail(rc) : EX_OK;
}

static int cmd_count(int argc, char **argv)
{
    return run_query(argc, argv, usage_count, 0);
}

static int cmd_search(int argc, char **argv)
{
    return run_query(argc, argv, usage_search, 1);
}

/* A command's exit status `rc`, made a failure where what it printed to stdout through stdio
 * did not all reach it (a full disk, a closed pipe): the output is not there to rely on. A
 * command that failed has said why already. */
static int out_written(int rc)
{
    int e = fflush(stdout) ? errno : ferror(stdout) ? EIO : 0;
    if (!e || rc) return rc;
    fprintf(stderr, "%s: stdout: write: %s\n", prog, strerror(e));
    return EX_FAIL;
}

/* A standard descriptor the caller closed: held by /dev/null opened the wrong way, so that
 * reading stdin or writing stdout fails (EBADF) as on the closed descriptor would, and no file
 * this process opens takes its number (an extract written into the archive's lock file). */
static void hold_std_fds(void)
{
    for (int fd = 0; fd < 3; fd++)
        if (fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
            int n = open("/dev/null", fd ? O_RDONLY : O_WRONLY);
            if (n >= 0 && n != fd) {
                dup2(n, fd);
                close(n);
            }
        }
}

int main(int argc, char **argv)
{
    /* A command runs its own function; an analytic (ana_table) runs run_analytic. */
    static const struct {
        const char *name;
        int (*fn)(int, char **);
        const char *usage;
        int plain; /* arguments alone: no options parsed (drop_dashdash) */
    } cmds[] = {{"pack", cmd_pack, usage_pack, 0},
                {"unpack", cmd_unpack, usage_unpack, 0},
                {"ls", cmd_ls, usage_ls, 0},
                {"cat", cmd_cat, usage_cat, 1},
                {"extract", cmd_extract, usage_extract, 1},
                {"stat", cmd_stat, usage_stat, 1},
                {"verify", cmd_verify, usage_verify, 1},
                {"count", cmd_count, usage_count, 1},
                {"search", cmd_search, usage_search, 1},
                {"apply", cmd_apply, usage_apply, 0},
                {"compact", cmd_compact, usage_compact, 0}};
    hold_std_fds();
    if (argc < 2) return usage_err(usage_main, "missing command");
    /* The environment (usage_main lists it) sets the engine's options for this process. */
    backend_opts_init(&tool_opts);
    if (tdc_env_tool(&tool_opts)) {
        fprintf(stderr, "%s: %s\n", prog, tdc_errmsg());
        return EX_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        fputs(usage_main, stdout);
        return out_written(EX_OK);
    }
    if (!strcmp(argv[1], "--version")) {
        printf("tadoc %s (%s)\n", TADOC_VERSION, backend_describe());
        return out_written(EX_OK);
    }
    heap_huge(HEAP_HUGE_MIN); /* every command opens an archive's file table first */
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        if (strcmp(argv[1], cmds[i].name)) continue;
        int h = want_help(argc - 1, argv + 1, cmds[i].usage);
        if (h < 0 && cmds[i].plain) h = no_options(argc - 1, argv + 1, cmds[i].usage);
        if (h >= 0) return out_written(h);
        if (cmds[i].plain) argc = drop_dashdash(argc - 1, argv + 1) + 1;
        return out_written(cmds[i].fn(argc - 1, argv + 1));
    }
    int kind = ana_find(argv[1]);
    if (kind >= 0) return out_written(run_analytic(argc - 1, argv + 1, kind));
    fprintf(stderr, "%s: unknown command '%s'\n", prog, argv[1]);
    fputs(usage_main, stderr);
    return EX_USAGE;
}
