#include "par.h"

#include <pthread.h>
#include <stdlib.h>

void par_run(unsigned n, void *(*fn)(void *), void *arg, size_t stride)
{
    pthread_t *th = n > 1 ? calloc(n, sizeof *th) : NULL;
    unsigned char *started = n > 1 ? calloc(n, 1) : NULL;
    for (unsigned t = 1; th && started && t < n; t++)
        started[t] = !pthread_create(&th[t], NULL, fn, (char *)arg + t * stride);
    fn(arg);
    for (unsigned t = 1; t < n; t++) {
        if (started && started[t])
            pthread_join(th[t], NULL);
        else
            fn((char *)arg + t * stride);
    }
    free(th);
    free(started);
}
