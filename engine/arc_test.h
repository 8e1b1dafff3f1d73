/* arc_test: what only test generators use. Not part of the product's interface. */
#ifndef TDC_ARC_TEST_H
#define TDC_ARC_TEST_H

#include "arc.h"

/* arc_write without the check that refuses archives the reader would reject: the generators
 * of damaged archives (tests/tools/mkcorrupt.c, mkbad.c) write such archives on purpose. */
int arc_write_unchecked(const char *path, arc *a, int level);

#endif
