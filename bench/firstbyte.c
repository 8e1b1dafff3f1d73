/* firstbyte: how long each file takes to give its first byte: open(2) and a one-byte read(2),
 * timed in this process, so that the figure is the filesystem's (path lookups, open, the read
 * and whatever loading they wait for) without the start of a process like `head -c1`.
 * usage: firstbyte FILE...   prints one line per file: milliseconds and the path. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "pick.h"

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: firstbyte FILE...\n");
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        char c;
        double t = now();
        int fd = open(argv[i], O_RDONLY);
        ssize_t n = fd < 0 ? -1 : read(fd, &c, 1);
        t = now() - t;
        if (n != 1) {
            fprintf(stderr, "firstbyte: %s: %s\n", argv[i], n == 0 ? "empty" : strerror(errno));
            return 1;
        }
        close(fd);
        printf("%.2f %s\n", t * 1e3, argv[i]);
    }
    return 0;
}
