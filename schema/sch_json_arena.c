/*
 * sch_json_arena.c: the bump allocator behind one compiled JSON Schema.
 *
 * A compiled schema is a graph (nodes point at each other through $ref, in
 * cycles), built once and freed once. Allocating every node, keyword array
 * and string of it from one arena makes the free a walk over a few chunks
 * instead of a graph traversal, and keeps the nodes close in memory for the
 * validation walk. Nothing is ever freed individually.
 */
#include "schema/sch_json.h"

#include <string.h>

#include "base/base.h"

#define CHUNK_MIN 16384

struct sch__json_arena_chunk {
    sch__json_arena_chunk_t *next;
    size_t used, cap;
    _Alignas(max_align_t) unsigned char data[];
};

void *sch__json_arena_alloc(sch__json_arena_t *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    sch__json_arena_chunk_t *c = a->head;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > CHUNK_MIN ? n : CHUNK_MIN;
        c = tb_malloc(sizeof *c + cap);
        c->used = 0;
        c->cap = cap;
        c->next = a->head;
        a->head = c;
    }
    void *p = c->data + c->used;
    c->used += n;
    memset(p, 0, n);
    return p;
}

char *sch__json_arena_strndup(sch__json_arena_t *a, const char *s, size_t n)
{
    char *p = sch__json_arena_alloc(a, n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

void sch__json_arena_free(sch__json_arena_t *a)
{
    sch__json_arena_chunk_t *c = a->head;
    while (c) {
        sch__json_arena_chunk_t *next = c->next;
        free(c);
        c = next;
    }
    a->head = NULL;
}
