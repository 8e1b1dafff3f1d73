/* zlazy: one zstd frame expanded on demand into a buffer of its full size. A read of a few
 * bytes of a large text shard needs only the frame up to them: bytes [0, upto) are decoded
 * when first asked for, by whichever thread asks, and the rest stays compressed until a read
 * reaches it. zstd writes straight into the buffer (its stable-output mode), so nothing is
 * decoded twice and no window is copied. */
#ifndef TDC_ZLAZY_H
#define TDC_ZLAZY_H

#include <stddef.h>
#include <stdint.h>

typedef struct zlazy zlazy;

/* A frame of `stored` bytes at st (checked against its checksum already; zlazy takes it and
 * frees it) that expands to exactly `raw` bytes, into dst (raw bytes, the caller's). 0;
 * -EBADMSG with a message naming `name` when the frame does not declare that size; -ENOMEM. */
int zlazy_new(unsigned char *st, size_t stored, unsigned char *dst, size_t raw, const char *name,
              zlazy **out);

/* dst[0, upto) decoded (upto is clamped to raw). Thread-safe; a call that finds them decoded
 * takes no lock. 0, or -EBADMSG with a message where the frame turns out corrupt (every later
 * call fails the same way) or ends short. */
int zlazy_need(zlazy *z, size_t upto);

/* Bytes decoded so far. */
size_t zlazy_done(const zlazy *z);

/* What z holds besides dst, at most: the compressed frame and zstd's context (both freed
 * once the frame is decoded whole). */
size_t zlazy_mem(const zlazy *z);

void zlazy_free(zlazy *z);

#endif
