/*
 * config_outputs.c: what `outputs` needs beside its parser (config_parse.c):
 * the implied danube output, freeing, and the syntax checks of templates
 * and topic filters.
 *
 * The template check here is the configuration's view, so a typo is an
 * error naming file, line and key even in `tributary check` without the
 * router; the router (gateway/router/router_out.c) compiles each template
 * again against the mappings whose topics the output carries, which only
 * it can judge (a ${2} of a rule with one '+', an attribute a rule does
 * not extract). The two agree on the syntax: the unit tests load the same
 * templates through both.
 */
#include "config/config_int.h"
#include "base/base.h"

#include <stdlib.h>
#include <string.h>

const char *cfg_output_kind_name(cfg_output_kind_t k)
{
    return (unsigned)k <= CFG_OUTPUT_SPARKPLUG ? cfg__output_kinds[k] : "?";
}

void cfg__implied_output(cfg_t *cfg)
{
    cfg__free_outputs(cfg);
    cfg_output_t *o = tb_calloc(1, sizeof *o);
    for (size_t i = 0; i < cfg__noutputs_keys; i++) {
        const cfg__key_t *k = &cfg__output_keys[i];
        char msg[128];
        if (k->def && cfg__set_scalar(k, o, k->def, msg, sizeof msg) < 0)
            abort(); /* a bad default in the table: the unit tests catch it */
    }
    o->name = tb_strdup("danube");
    o->kind = CFG_OUTPUT_DANUBE;
    o->topics = tb_calloc(1, sizeof *o->topics);
    o->topics[0] = tb_strdup("#");
    o->ntopics = 1;
    o->implied = true;
    cfg->outputs = o;
    cfg->noutputs = 1;
}

void cfg__free_outputs(cfg_t *cfg)
{
    for (size_t n = 0; n < cfg->noutputs; n++) {
        cfg_output_t *o = &cfg->outputs[n];
        for (size_t i = 0; i < cfg__noutputs_keys; i++) {
            const cfg__key_t *k = &cfg__output_keys[i];
            if (k->type == CFG__STR || k->type == CFG__ADDR)
                free(*(char **)((char *)o + k->off));
        }
        for (size_t i = 0; i < o->ntopics; i++)
            free(o->topics[i]);
        free(o->topics);
    }
    free(cfg->outputs);
    cfg->outputs = NULL;
    cfg->noutputs = 0;
}

const char *cfg__filter_check(const char *f)
{
    size_t len = strlen(f);
    if (len == 0)
        return "a topic filter cannot be empty";
    if (!tb_utf8_valid((const uint8_t *)f, len))
        return "not valid UTF-8";
    for (size_t i = 0; i < len; i++) {
        if (f[i] != '+' && f[i] != '#')
            continue;
        bool alone = (i == 0 || f[i - 1] == '/') && (i + 1 == len || f[i + 1] == '/');
        if (!alone)
            return f[i] == '+' ? "'+' must fill a whole level (like a/+/b)" : "'#' must fill a whole level (like a/#)";
        if (f[i] == '#' && i + 1 != len)
            return "'#' must be the last level";
    }
    return NULL;
}

const char *cfg__template_check(const char *t, bool level)
{
    bool never_empty = false;
    for (const char *p = t; *p;) {
        if (p[0] == '$' && p[1] == '{') {
            const char *close = strchr(p + 2, '}');
            if (!close)
                return "'${' without a closing '}'";
            const char *name = p + 2;
            size_t n = (size_t)(close - name);
            if (memchr(name, '{', n))
                return "'${' inside a placeholder";
            bool topic = (n == 5 && memcmp(name, "topic", 5) == 0) || (n == 8 && memcmp(name, "upstream", 8) == 0);
            bool rest = n == 1 && name[0] == '#';
            bool attr = n > 5 && memcmp(name, "attr.", 5) == 0;
            bool cap = n >= 1 && n <= 2 && name[0] >= '1' && name[0] <= '9' &&
                       (n == 1 || (name[1] >= '0' && name[1] <= '9'));
            if (cap && atoi(name) > 32)
                return "a capture is ${1}..${32}";
            if (!topic && !rest && !attr && !cap)
                return "unknown placeholder: use ${topic}, ${upstream}, ${1}.., ${#} or ${attr.NAME} "
                       "(or set the environment variable it names)";
            if (level && !cap)
                return "a one-level value takes only ${1}.. captures and literal text";
            never_empty |= topic;
            p = close + 1;
            continue;
        }
        if (*p == '+' || *p == '#')
            return "'+' and '#' cannot be in a topic name";
        if (level && *p == '/')
            return "'/' cannot be in one topic level";
        never_empty = true;
        p++;
    }
    if (!tb_utf8_valid((const uint8_t *)t, strlen(t)))
        return "not valid UTF-8";
    if (!never_empty && !level) /* one level: "${1}" is fine, an empty capture is refused per message */
        return "every piece can be empty (a capture, ${#} or an attribute), and a topic cannot be: add literal "
               "text, ${topic} or ${upstream}";
    return NULL;
}
