/*
 * jsonschema_suite.c: runs the official JSON-Schema-Test-Suite against our
 * JSON Schema validator (schema/sch_json*.c).
 *
 *   jsonschema_suite required <draft7|draft2020-12> <skip file>
 *       every tests/<draft>/NAME.json; exits 1 on any failure not listed in the
 *       skip file, so ctest fails.
 *   jsonschema_suite optional <draft7|draft2020-12|all> <skip file>
 *       tests/<draft>/optional/NAME.json, and optional/format/NAME.json with
 *       formats asserted; prints the counts and always exits 0.
 *
 * Output: one "FAIL ..." line per failure, then "<draft>: N/M passed"
 * (and the skipped count). The suite is the snapshot vendored in
 * $TRIB_TESTDATA/json-schema-test-suite (tests/data/, see its README.md); its
 * remotes/ directory is served, as the suite expects, for
 * http://localhost:1234/ through sch_opts_t.resolve, the same hook the
 * registry uses.
 *
 * Each case's schema is dumped back to text and compiled through
 * sch__json_compile_draft (the text path the gateway uses); draft 7 files
 * carry no "$schema", so the runner names the default dialect. Tests are
 * run through sch__json_validate_value on the suite's parsed data.
 *
 * Skip file lines: <draft>/<file> | <case description> | <test description
 * or *> | <reason>. Blank lines and '#' comments are ignored.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "schema/sch_json.h"

typedef struct {
    char *draft_file, *cas, *test;
} skip_t;

static skip_t *skips;
static size_t nskips;

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t') s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' || s[n - 1] == '\r')) s[--n] = '\0';
    return s;
}

static void load_skips(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "cannot open skip file %s\n", path);
        exit(2);
    }
    char line[2048];
    while (fgets(line, sizeof line, f)) {
        char *l = trim(line);
        if (!*l || *l == '#') continue;
        char *parts[4] = { 0 };
        int k = 0;
        for (char *tok = strtok(l, "|"); tok && k < 4; tok = strtok(NULL, "|")) parts[k++] = trim(tok);
        if (k != 4 || !*parts[3]) {
            fprintf(stderr, "skip file: a line needs 4 fields with a reason: %s\n", l);
            exit(2);
        }
        skips = tb_realloc(skips, (nskips + 1) * sizeof *skips);
        skips[nskips++] = (skip_t){ tb_strdup(parts[0]), tb_strdup(parts[1]), tb_strdup(parts[2]) };
    }
    fclose(f);
}

static bool skipped(const char *draft_file, const char *cas, const char *test)
{
    for (size_t k = 0; k < nskips; k++)
        if (!strcmp(skips[k].draft_file, draft_file) && !strcmp(skips[k].cas, cas) &&
            (!strcmp(skips[k].test, "*") || !strcmp(skips[k].test, test)))
            return true;
    return false;
}

/* ---- remotes: http://localhost:1234/<path> -> <suite>/remotes/<path> ------- */

static const char *suite_dir;
static char *remote_texts[256];
static size_t nremote_texts;

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = tb_malloc((size_t)(n > 0 ? n : 0) + 1);
    *len = fread(buf, 1, (size_t)(n > 0 ? n : 0), f);
    buf[*len] = '\0';
    fclose(f);
    return buf;
}

static const char *resolve_remote(void *arg, const char *uri, size_t *len)
{
    (void)arg;
    const char *prefix = "http://localhost:1234/";
    if (strncmp(uri, prefix, strlen(prefix)) != 0 || strstr(uri, "..")) return NULL;
    char path[4096];
    snprintf(path, sizeof path, "%s/remotes/%s", suite_dir, uri + strlen(prefix));
    char *text = read_file(path, len);
    if (text && nremote_texts < TB_ARRAY_LEN(remote_texts)) remote_texts[nremote_texts++] = text;
    else if (text) { free(text); text = NULL; }
    return text;
}

static void free_remote_texts(void)
{
    while (nremote_texts) free(remote_texts[--nremote_texts]);
}

/* ---- running -------------------------------------------------------------- */

typedef struct {
    size_t passed, total, skipped;
} counts_t;

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void run_file(const char *dir, const char *rel, const char *name, sch_json_draft_t draft, bool formats,
                     counts_t *c)
{
    char path[8192], label[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(label, sizeof label, "%s/%s", rel, name);
    size_t len;
    char *text = read_file(path, &len);
    json_error_t jerr;
    json_t *cases = text ? sch__json_parse(text, len, &jerr) : NULL;
    free(text);
    if (!json_is_array(cases)) {
        printf("FAIL %s: cannot read the test file\n", label);
        c->total++;
        json_decref(cases);
        return;
    }
    sch_opts_t opts = { .format_assert = formats, .resolve = resolve_remote };
    for (size_t i = 0; i < json_array_size(cases); i++) {
        json_t *cs = json_array_get(cases, i);
        const char *cdesc = json_string_value(json_object_get(cs, "description"));
        json_t *tests = json_object_get(cs, "tests");
        char *stext = json_dumps(json_object_get(cs, "schema"), JSON_ENCODE_ANY | JSON_COMPACT);
        char err[512];
        sch__json_t *s = NULL;
        int rc = sch__json_compile_draft(stext, strlen(stext), &opts, draft, &s, err, sizeof err);
        free(stext);
        free_remote_texts();
        for (size_t t = 0; t < json_array_size(tests); t++) {
            json_t *test = json_array_get(tests, t);
            const char *tdesc = json_string_value(json_object_get(test, "description"));
            bool want = json_is_true(json_object_get(test, "valid"));
            if (skipped(label, cdesc, tdesc)) {
                c->skipped++;
                continue;
            }
            c->total++;
            if (rc) {
                printf("FAIL %s: %s / %s: schema does not compile: %s\n", label, cdesc, tdesc, err);
                continue;
            }
            char verr[512];
            bool got = sch__json_validate_value(s, json_object_get(test, "data"), verr, sizeof verr) == 0;
            if (got == want) {
                c->passed++;
            } else {
                printf("FAIL %s: %s / %s: expected %s, got %s%s%s\n", label, cdesc, tdesc,
                       want ? "valid" : "invalid", got ? "valid" : "invalid", got ? "" : ": ", got ? "" : verr);
            }
        }
        sch__json_free(s);
    }
    json_decref(cases);
}

static void run_dir(const char *rel, sch_json_draft_t draft, bool formats, counts_t *c)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/tests/%s", suite_dir, rel);
    DIR *d = opendir(dir);
    if (!d) {
        printf("FAIL %s: cannot open %s\n", rel, dir);
        c->total++;
        return;
    }
    char **names = NULL;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l > 5 && strcmp(e->d_name + l - 5, ".json") == 0) {
            names = tb_realloc(names, (n + 1) * sizeof *names);
            names[n++] = tb_strdup(e->d_name);
        }
    }
    closedir(d);
    qsort(names, n, sizeof *names, name_cmp);
    for (size_t k = 0; k < n; k++) {
        run_file(dir, rel, names[k], draft, formats, c);
        free(names[k]);
    }
    free(names);
}

static void report(const char *what, const counts_t *c)
{
    printf("%s: %zu/%zu passed", what, c->passed, c->total);
    if (c->skipped) printf(" (%zu skipped, see jsonschema_skip.txt)", c->skipped);
    printf("\n");
}

int main(int argc, char **argv)
{
    if (argc != 4 || (strcmp(argv[1], "required") && strcmp(argv[1], "optional"))) {
        fprintf(stderr, "usage: %s required|optional draft7|draft2020-12|all <skip file>\n", argv[0]);
        return 2;
    }
    const char *testdata = getenv("TRIB_TESTDATA");
    if (!testdata || !*testdata) {
        fprintf(stderr, "TRIB_TESTDATA is not set (ctest sets it to <source>/tests/data)\n");
        return 2;
    }
    static char dirbuf[4096];
    snprintf(dirbuf, sizeof dirbuf, "%s/json-schema-test-suite", testdata);
    suite_dir = dirbuf;
    load_skips(argv[3]);
    bool required = strcmp(argv[1], "required") == 0;
    static const char *const drafts[] = { "draft7", "draft2020-12" };
    size_t failed = 0;
    for (size_t k = 0; k < 2; k++) {
        if (strcmp(argv[2], "all") && strcmp(argv[2], drafts[k])) continue;
        sch_json_draft_t draft = k == 0 ? SCH_JSON_DRAFT7 : SCH_JSON_DRAFT2020;
        char label[128];
        if (required) {
            counts_t c = { 0 };
            run_dir(drafts[k], draft, false, &c);
            report(drafts[k], &c);
            failed += c.total - c.passed;
        } else {
            counts_t o = { 0 }, f = { 0 };
            char rel[128];
            snprintf(rel, sizeof rel, "%s/optional", drafts[k]);
            run_dir(rel, draft, false, &o);
            snprintf(label, sizeof label, "%s optional", drafts[k]);
            report(label, &o);
            snprintf(rel, sizeof rel, "%s/optional/format", drafts[k]);
            run_dir(rel, draft, true, &f);
            snprintf(label, sizeof label, "%s optional/format", drafts[k]);
            report(label, &f);
        }
    }
    for (size_t k = 0; k < nskips; k++) {
        free(skips[k].draft_file);
        free(skips[k].cas);
        free(skips[k].test);
    }
    free(skips);
    return required && failed ? 1 : 0;
}
