/* mkbad: write small archives whose checksums are valid but whose content is wrong in one
 * way, to test that the reader rejects each with a clear message.
 * usage: mkbad KIND OUT   (KIND: good dotdot absolute dup order cycle range root0 size
 *                           noparent rootrange linktarget hugelen badhash badhash2) */
#include <stdio.h>
#include <xxhash.h>
#include <stdlib.h>
#include <string.h>

#include "../../engine/format/arc.h"
#include "../../engine/format/arc_test.h"
#include "../../engine/base/err.h"

static void tok(dict *d, const char *s)
{
    uint32_t id;
    if (dict_intern(d, (const unsigned char *)s, strlen(s), &id)) exit(1);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: mkbad KIND OUT\n");
        return 2;
    }
    const char *k = argv[1];
    arc a = {0};
    a.dict = dict_new();
    tok(a.dict, "hello"); /* 0 */
    tok(a.dict, " ");     /* 1 */
    tok(a.dict, "world"); /* 2 */
    tok(a.dict, "\n");    /* 3 */
    gram *g = &a.g;
    g->ntokens = 4;
    /* rule 1 = hello ' ', rule 2 = R1 world, root = R2 \n R2 */
    uint32_t syms[] = {0, 1, 4 + 1, 2};
    for (int i = 0; i < 4; i++)
        vec32_push(&g->syms, syms[i]);
    vec64_push(&g->rule_start, 0);
    vec64_push(&g->rule_start, 2);
    vec64_push(&g->rule_start, 4);
    g->nrules = 2;
    uint32_t root[] = {4 + 2, 3, 4 + 2};
    for (int i = 0; i < 3; i++)
        vec32_push(&g->root, root[i]);
    static arc_entry ents[5];
    ents[0] = (arc_entry){.path = "", .type = ARC_DIR, .mode = 0755};
    ents[1] = (arc_entry){.path = "a.txt",
                          .type = ARC_REG,
                          .mode = 0644,
                          .size = 23,
                          .root_start = 0,
                          .root_len = 3,
                          .hash = XXH3_64bits("hello world\nhello world", 23)};
    ents[2] = (arc_entry){.path = "d", .type = ARC_DIR, .mode = 0755};
    ents[3] = (arc_entry){.path = "d/l", .type = ARC_LNK, .mode = 0777, .size = 5, .link = "a.txt"};
    a.ents = ents;
    a.nents = 4;
    if (!strcmp(k, "good") || !strcmp(k, "hugelen")) {
    } else if (!strcmp(k, "badhash")) {
        ents[1].hash ^= 1; /* sections intact, content hash wrong: caught only when read */
    } else if (!strcmp(k, "badhash2")) {
        /* a.txt sound, then b.txt ("hello world", the root's fourth symbol) whose content
         * hash is wrong: a reader of a.txt makes the daemon look at b.txt next */
        vec32_push(&g->root, 4 + 2);
        ents[4] = ents[3];
        ents[3] = ents[2];
        ents[2] = ents[1];
        ents[2].path = "b.txt";
        ents[2].size = 11;
        ents[2].root_start = 3;
        ents[2].root_len = 1;
        ents[2].hash = XXH3_64bits("hello world", 11) ^ 1;
        a.nents = 5;
    } else if (!strcmp(k, "dotdot")) {
        ents[3].path = "d/../../etc";
    } else if (!strcmp(k, "absolute")) {
        ents[1].path = "/etc/passwd";
    } else if (!strcmp(k, "dup")) {
        ents[2].path = "a.txt";
        ents[2].type = ARC_REG;
        ents[3].path = "a.txt";
    } else if (!strcmp(k, "order")) {
        ents[1].path = "z.txt";
    } else if (!strcmp(k, "cycle")) {
        g->syms.p[0] = 4 + 2; /* rule 1 uses rule 2, which uses rule 1 */
    } else if (!strcmp(k, "range")) {
        g->root.p[1] = 4 + 99;
    } else if (!strcmp(k, "root0")) {
        g->root.p[1] = 4; /* a reference to the root itself */
    } else if (!strcmp(k, "size")) {
        ents[1].size = 24;
    } else if (!strcmp(k, "noparent")) {
        ents[3].path = "e/l";
    } else if (!strcmp(k, "rootrange")) {
        ents[1].root_len = 1000;
    } else if (!strcmp(k, "linktarget")) {
        ents[3].link = NULL;
    } else {
        fprintf(stderr, "mkbad: unknown kind %s\n", k);
        return 2;
    }
    a.plain = ARC_PLAIN_SYMS; /* the kind layout cannot hold cycles or references past the rules */
    int rc = arc_write_unchecked(argv[2], &a, 3);
    if (rc) fprintf(stderr, "mkbad: %s\n", tdc_errmsg());
    if (!rc && !strcmp(k, "hugelen")) {
        /* Declare a 2^39-byte rules section and re-seal the section table, so only the size
         * check can catch it. */
        FILE *f = fopen(argv[2], "r+b");
        unsigned char hdr[ARC_HDR_SIZE], tab[16 * ARC_SECENT_SIZE + 8];
        arc_header h;
        if (!f || fread(hdr, 1, ARC_HDR_SIZE, f) != ARC_HDR_SIZE || arc_header_decode(hdr, &h))
            return 1;
        uint64_t toff = h.table;
        size_t n = h.nsec * ARC_SECENT_SIZE;
        if (n + 8 > sizeof tab) return 1;
        fseek(f, (long)toff, SEEK_SET);
        if (fread(tab, 1, n + 8, f) != n + 8) return 1;
        /* section 1: the first shard's rules */
        st64(tab + ARC_SECENT_SIZE + ARC_SECENT_RAW, (uint64_t)1 << 39);
        arc_table_seal(tab, h.nsec);
        fseek(f, (long)toff, SEEK_SET);
        fwrite(tab, 1, n + 8, f);
        fclose(f);
    }
    dict_free(a.dict);
    gram_free(g);
    return rc ? 1 : 0;
}
