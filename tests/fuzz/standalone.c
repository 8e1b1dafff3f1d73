/* standalone: a main for the fuzz targets without libFuzzer. Feeds every file named on the
 * command line (directories: every file in them) through LLVMFuzzerTestOneInput once, so the
 * normal and sanitizer builds replay the seeds and regression inputs. Prints one TAP line. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = malloc(n > 0 ? (size_t)n : 1);
    if (!p || fread(p, 1, (size_t)n, f) != (size_t)n) {
        perror(path);
        fclose(f);
        free(p);
        return 1;
    }
    fclose(f);
    /* A copy of exactly n bytes, so ASan sees reads past the input's end. */
    uint8_t *q = malloc(n > 0 ? (size_t)n : 1);
    memcpy(q, p, (size_t)n);
    free(p);
    LLVMFuzzerTestOneInput(q, (size_t)n);
    free(q);
    return 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
    if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
    int bad = 0, files = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st)) {
            perror(argv[i]);
            bad++;
            continue;
        }
        if (!S_ISDIR(st.st_mode)) {
            bad += run_file(argv[i]);
            files++;
            continue;
        }
        DIR *d = opendir(argv[i]);
        struct dirent *e;
        char **names = NULL;
        size_t n = 0;
        while (d && (e = readdir(d))) {
            if (e->d_name[0] == '.') continue;
            names = realloc(names, (n + 1) * sizeof *names);
            names[n] = malloc(strlen(argv[i]) + strlen(e->d_name) + 2);
            sprintf(names[n++], "%s/%s", argv[i], e->d_name);
        }
        if (d) closedir(d);
        if (n) qsort(names, n, sizeof *names, by_name);
        for (size_t k = 0; k < n; k++) {
            bad += run_file(names[k]);
            files++;
            free(names[k]);
        }
        free(names);
    }
    fprintf(stderr, "%d inputs replayed, %d unreadable\n", files, bad);
    return bad ? 1 : 0;
}
