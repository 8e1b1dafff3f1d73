#include "err.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local char tdc_msg[1024];

int tdc_error(int code, const char *fmt, ...)
{
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    int n = vsnprintf(tdc_msg, sizeof tdc_msg, fmt, ap);
    /* Too long (a path of thousands of bytes): the middle gives way, so that the end, which
     * says what went wrong, stays. */
    char *whole = n >= (int)sizeof tdc_msg ? malloc((size_t)n + 1) : NULL;
    if (whole) {
        vsnprintf(whole, (size_t)n + 1, fmt, again);
        size_t head = sizeof tdc_msg / 3, tail = sizeof tdc_msg - head - 6;
        snprintf(tdc_msg, sizeof tdc_msg, "%.*s[...]%s", (int)head, whole, whole + n - tail);
        free(whole);
    }
    va_end(again);
    va_end(ap);
    return code;
}

int tdc_error_ctx(int code, const char *fmt, ...)
{
    char prefix[512], old[sizeof tdc_msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, tdc_msg, sizeof old);
    if (old[0] == '\0') snprintf(old, sizeof old, "%s", strerror(code < 0 ? -code : code));
    snprintf(tdc_msg, sizeof tdc_msg, "%.500s: %.500s", prefix, old);
    return code;
}

const char *tdc_errmsg(void)
{
    return tdc_msg[0] ? tdc_msg : "unknown error";
}
