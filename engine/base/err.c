#include "err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char tdc_msg[1024];

int tdc_error(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tdc_msg, sizeof tdc_msg, fmt, ap);
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
