/* querylat: latency of word queries (`tadoc count` and `tadoc search`) inside one process,
 * so process start-up and archive opening are not measured with every query.
 * usage: querylat ARCHIVE COUNT SEED
 * Opens the archive, builds the random-access index and the word index (word2rule and the
 * DAG's reverse edges; their build time, the resident memory they add and the process's peak
 * RSS after building them are printed), then picks COUNT random (file, word) pairs: a file
 * weighted by size, a random byte offset in it, and the whole word at or after that offset
 * (read back with idx_extract), so the word occurs in its file. Every tenth query asks
 * instead for a word that occurs nowhere (the picked word with a suffix that makes it absent
 * from the dictionary: its count must be 0), and every tenth plus one for the picked word in
 * another random file (where it may or may not occur). Times idx_count and idx_search for
 * each pair separately (a count must equal the number of search results) and prints median,
 * p99 and mean in microseconds, over all queries and over the absent words alone, in wall
 * time, and over all queries in the thread's CPU time (on a busy machine a query's wall time
 * includes the time it waited for a core). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "../engine/base/err.h"
#include "../engine/base/tok.h"
#include "../engine/index/idx.h"
#include "../engine/index/words.h"
#include "pick.h"

/* This thread's CPU time: on a busy machine, wall times include waiting for a core. */
static double cpu(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Resident set size in KiB, from /proc/self/statm. */
static long rss_kib(void)
{
    long pages = 0, res = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return 0;
    if (fscanf(f, "%ld %ld", &pages, &res) != 2) res = 0;
    fclose(f);
    return res * 4;
}

static void stats(const char *name, double *lat, long n)
{
    if (n == 0) return;
    qsort(lat, (size_t)n, sizeof *lat, cmp_d);
    double sum = 0;
    for (long t = 0; t < n; t++)
        sum += lat[t];
    printf(" %s_median_us %.3f %s_p99_us %.3f %s_mean_us %.3f", name, lat[n / 2], name,
           lat[n * 99 / 100], name, sum / (double)n);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: querylat ARCHIVE COUNT SEED\n");
        return 2;
    }
    double t0 = now();
    arc *a;
    idx *x;
    idx_words *w;
    if (arc_open(argv[1], &a)) {
        fprintf(stderr, "querylat: %s\n", tdc_errmsg());
        return 1;
    }
    double t1 = now();
    if (idx_build(a, &x)) {
        fprintf(stderr, "querylat: %s\n", tdc_errmsg());
        return 1;
    }
    double t2 = now();
    long rss0 = rss_kib();
    if (idx_words_build(x, &w)) {
        fprintf(stderr, "querylat: %s\n", tdc_errmsg());
        return 1;
    }
    double t3 = now();
    long rss1 = rss_kib();
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    long count = atol(argv[2]);
    uint64_t seed = strtoull(argv[3], NULL, 10) | 1, total, found = 0, at;
    if (count < 1) count = 1;
    uint64_t *cum = pick_table(a, &total);
    double *lc = malloc((size_t)count * sizeof *lc), *ls = malloc((size_t)count * sizeof *ls);
    double *la = malloc((size_t)count * sizeof *la), *lsa = malloc((size_t)count * sizeof *lsa);
    double *cc = malloc((size_t)count * sizeof *cc), *cs = malloc((size_t)count * sizeof *cs);
    if (!cum || !lc || !ls || !la || !lsa || !cc || !cs) return 1;
    vec64 offs = {0};
    unsigned char buf[TOK_CAP + 32];
    long done = 0, tries = 0, absent = 0, other = 0;
    while (done < count && tries++ < count * 100) {
        uint32_t lo = pick(a, cum, total, &seed, &at);
        uint64_t off = rnd(&seed) % a->ents[lo].size;
        /* back to the start of the word holding off, then its bytes */
        while (off > 0) {
            unsigned char c;
            if (idx_extract(x, lo, off - 1, &c, 1) != 1 || !tok_is_word_byte(c)) break;
            off--;
        }
        ssize_t k = idx_extract(x, lo, off, buf, TOK_CAP);
        if (k < 0) return 1;
        size_t n = 0;
        while (n < (size_t)k && tok_is_word_byte(buf[n]))
            n++;
        if (n == 0 || n >= TOK_CAP - 24) continue; /* a separator, or a (nearly) cut long word */
        int kind = done % 10 == 0 ? 1 : done % 10 == 1 ? 2 : 0; /* 1: absent, 2: other file */
        if (kind == 1) /* no dictionary word ends so: TOK_CAP > n + 24 keeps it one token */
            n += (size_t)snprintf((char *)buf + n, 24, "_absent%016llx",
                                  (unsigned long long)rnd(&seed));
        else if (kind == 2)
            lo = pick(a, cum, total, &seed, &at);
        uint64_t c = 0;
        double s = now(), u = cpu();
        if (idx_count(w, lo, (const char *)buf, n, &c)) return 1;
        lc[done] = (now() - s) * 1e6;
        cc[done] = (cpu() - u) * 1e6;
        offs.n = 0;
        s = now();
        u = cpu();
        if (idx_search(w, lo, (const char *)buf, n, &offs)) return 1;
        ls[done] = (now() - s) * 1e6;
        cs[done] = (cpu() - u) * 1e6;
        if ((kind == 0 && c == 0) || (kind == 1 && c != 0) || offs.n != c) {
            fprintf(stderr, "querylat: %s: %.*s: count %llu, search %zu\n", a->ents[lo].path,
                    (int)n, buf, (unsigned long long)c, offs.n);
            return 1;
        }
        if (kind == 1) {
            la[absent] = lc[done];
            lsa[absent++] = ls[done];
        }
        other += kind == 2;
        found += c;
        done++;
    }
    printf("open_s %.3f index_s %.3f words_index_s %.3f words_index_rss_mb %.1f "
           "peak_rss_mb %.1f queries %ld absent %ld other_file %ld occurrences %llu",
           t1 - t0, t2 - t1, t3 - t2, (double)(rss1 - rss0) / 1024, (double)ru.ru_maxrss / 1024,
           done, absent, other, (unsigned long long)found);
    stats("count", lc, done);
    stats("search", ls, done);
    stats("count_absent", la, absent);
    stats("search_absent", lsa, absent);
    stats("count_cpu", cc, done);
    stats("search_cpu", cs, done);
    printf("\n");
    vec64_free(&offs);
    idx_words_free(w);
    idx_free(x);
    arc_free(a);
    free(cum);
    free(lc);
    free(ls);
    free(la);
    free(lsa);
    free(cc);
    free(cs);
    return 0;
}
