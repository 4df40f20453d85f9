/*
 * alloc.c: allocation that aborts on out-of-memory.
 *
 * An edge gateway that runs out of memory cannot keep its promises anyway;
 * aborting at the allocation site is clearer than threading ENOMEM through
 * every path. Sizes that come from the network are bounded by configuration
 * before they reach these functions.
 */
#include "base/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void oom(size_t n)
{
    char msg[96];
    int len = snprintf(msg, sizeof msg, "tributary: out of memory allocating %zu bytes\n", n);
    if (len > 0 && write(2, msg, (size_t)len) < 0) { /* nothing more to do */ }
    abort();
}

void *tb_malloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) oom(n);
    return p;
}

void *tb_calloc(size_t nmemb, size_t size)
{
    void *p = calloc(nmemb ? nmemb : 1, size ? size : 1);
    if (!p) oom(nmemb * size);
    return p;
}

void *tb_realloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q) oom(n);
    return q;
}

char *tb_strdup(const char *s)
{
    return tb_strndup(s, strlen(s));
}

char *tb_strndup(const char *s, size_t n)
{
    char *p = tb_malloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *tb_asprintf(const char *fmt, ...)
{
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) n = 0;
    char *p = tb_malloc((size_t)n + 1);
    vsnprintf(p, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    return p;
}
