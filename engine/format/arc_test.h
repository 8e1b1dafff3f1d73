/* arc_test: what only test generators use. Not part of the product's interface. */
#ifndef TDC_ARC_TEST_H
#define TDC_ARC_TEST_H

#include "arc.h"

/* arc_write without the check that refuses archives the reader would reject: the generators
 * of damaged archives (tests/tools/mkcorrupt.c, mkbad.c) write such archives on purpose. */
int arc_write_unchecked(const char *path, arc *a, int level);

/* Section i of an archive from arc_open_meta (before arc_load_data), read, verified and
 * expanded into a fresh malloc'ed buffer of a->secs[i].raw bytes (the codec measurements of
 * tests/tools/codecs.c use it). 0 or a negative errno with a message. */
int arc_section_bytes(arc *a, uint32_t i, unsigned char **out);

#endif
