/* example.c: a small program over libtadoc (include/tadoc.h).
 *
 * usage: example ARCHIVE [PATH [WORD]]
 * Lists the archive's entries with their sizes; with PATH, prints the file's first line
 * (read from the grammar at offset 0) and the archive's five most frequent words; with
 * WORD, also how often and where WORD occurs in PATH.
 *
 * Build against the installed library:
 *   cc -o example example.c $(pkg-config --cflags --libs tadoc)
 * or statically: cc -o example example.c $(pkg-config --static --cflags --libs tadoc) -static */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tadoc.h>

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 4) {
        fprintf(stderr, "usage: %s ARCHIVE [PATH [WORD]]\n", argv[0]);
        return 2;
    }
    tadoc_archive *a;
    if (tadoc_open(argv[1], &a) < 0) {
        fprintf(stderr, "example: %s\n", tadoc_errmsg());
        return 1;
    }
    printf("libtadoc %s: %zu entries\n", tadoc_version(), tadoc_entry_count(a));
    for (size_t i = 0; i < tadoc_entry_count(a); i++) {
        tadoc_stat st;
        if (tadoc_entry(a, i, &st) < 0) continue;
        char kind = '-';
        if (st.type == TADOC_DIR) kind = 'd';
        if (st.type == TADOC_LNK) kind = 'l';
        printf("%c %10" PRIu64 " %s\n", kind, st.size, *st.path ? st.path : ".");
    }
    int rc = 0;
    if (argc >= 3) {
        /* The first line of PATH: read a block at offset 0 and stop at the newline. */
        char line[256];
        ssize_t n = tadoc_read(a, argv[2], 0, line, sizeof line - 1);
        if (n < 0) {
            fprintf(stderr, "example: %s\n", tadoc_errmsg());
            tadoc_close(a);
            return 1;
        }
        line[n] = 0;
        line[strcspn(line, "\n")] = 0;
        printf("first line of %s: %s\n", argv[2], line);

        /* The analytics return their text output in one buffer. */
        char *wc;
        size_t len;
        if (tadoc_analytic(a, TADOC_WORDCOUNT, NULL, &wc, &len) == 0) {
            printf("top words (count<TAB>word):\n");
            char *p = wc;
            for (int k = 0; k < 5 && *p; k++) {
                char *nl = strchr(p, '\n');
                printf("  %.*s\n", (int)(nl - p), p);
                p = nl + 1;
            }
            tadoc_free(wc);
        } else {
            fprintf(stderr, "example: %s\n", tadoc_errmsg());
            rc = 1;
        }
    }
    if (argc == 4) {
        uint64_t count, *offs;
        size_t n;
        if (tadoc_count(a, argv[2], argv[3], &count) < 0 ||
            tadoc_search(a, argv[2], argv[3], &offs, &n) < 0) {
            fprintf(stderr, "example: %s\n", tadoc_errmsg());
            tadoc_close(a);
            return 1;
        }
        printf("%s occurs %" PRIu64 " times in %s, at", argv[3], count, argv[2]);
        for (size_t i = 0; i < n && i < 10; i++)
            printf(" %" PRIu64, offs[i]);
        printf("%s\n", n > 10 ? " ..." : "");
        tadoc_free(offs);
    }
    tadoc_close(a);
    return rc;
}
