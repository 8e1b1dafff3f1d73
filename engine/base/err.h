/* err: error reporting shared by every module.
 *
 * Functions return 0 (or a count) on success and a negative errno-style code on failure.
 * The failing function also records a human-readable message in a thread-local buffer,
 * which callers print with tdc_errmsg(). Corrupt data is reported as -EBADMSG. */
#ifndef TDC_ERR_H
#define TDC_ERR_H

#include <errno.h>

/* Record a message for the calling thread and return `code` (a negative errno value).
 * Usage: return tdc_error(-EBADMSG, "section %s: checksum mismatch", name); */
int tdc_error(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prefix the calling thread's message with "context: ", returning `code` unchanged. */
int tdc_error_ctx(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The calling thread's last message; never NULL. Valid until the next tdc_error call. */
const char *tdc_errmsg(void);

/* The exit statuses of the command-line programs (tadoc, tadocfs and the test tools). */
enum { EX_OK = 0, EX_FAIL = 1, EX_USAGE = 2, EX_CORRUPT = 3 };

/* The exit status for a failure with code rc: EX_CORRUPT for corrupt data (-EBADMSG), else
 * EX_FAIL. */
static inline int tdc_exit_status(int rc)
{
    return rc == -EBADMSG ? EX_CORRUPT : EX_FAIL;
}

#endif
