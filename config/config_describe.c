/*
 * config_describe.c: the key table as text (`tributary config --describe`),
 * as Markdown (the reference section of docs/CONFIG.md), and the effective
 * configuration as YAML (`tributary check`), secrets masked.
 */
#include "config/config_int.h"
#include "base/base.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

const char *cfg_fsync_name(cfg_fsync_t f)
{
    static const char *const n[] = { "always", "interval", "never" };
    return (unsigned)f < 3 ? n[f] : "?";
}

/* sep: between an enum's names (Markdown needs its pipes escaped in a table). */
static void bounds(const cfg__key_t *k, char *out, size_t n, const char *sep)
{
    out[0] = '\0';
    switch (k->type) {
    case CFG__U32: case CFG__U64: case CFG__MS: case CFG__BYTES: case CFG__DURATION:
        snprintf(out, n, "%llu..%llu", (unsigned long long)k->min, (unsigned long long)k->max);
        break;
    case CFG__ENUM: {
        size_t off = 0;
        for (int i = 0; k->enums[i] && off < n; i++)
            off += (size_t)snprintf(out + off, n - off, "%s%s", i ? sep : "", k->enums[i]);
        break;
    }
    case CFG__MAPPINGS:
    case CFG__LISTENERS:
    case CFG__OUTPUTS:
    case CFG__STRLIST:
        snprintf(out, n, "%llu..%llu items", (unsigned long long)k->min, (unsigned long long)k->max);
        break;
    case CFG__SPACE:
        snprintf(out, n, "%llu..%llu or 0%%..%u%%", (unsigned long long)k->min, (unsigned long long)k->max,
                 CFG__SPACE_MAX_PERMILLE / 10);
        break;
    default:
        break;
    }
}

static const char *def_text(const cfg__key_t *k)
{
    if (k->def) return k->def[0] ? k->def : "\"\"";
    return (k->flags & CFG__F_REQUIRED) ? "(required)" : "(none)";
}

static void row(FILE *out, bool md, const char *prefix, const cfg__key_t *k)
{
    char b[160], path[160];
    bounds(k, b, sizeof b, md ? " \\| " : " | ");
    snprintf(path, sizeof path, "%s%s", prefix, k->path);
    const char *origin = (k->flags & CFG__F_DANUBE) ? "danube" : "tributary";
    if (md) {
        fprintf(out, "| `%s` | %s | `%s` | %s | %s | ", path, cfg__type_name(k), def_text(k), b[0] ? b : "", origin);
        for (const char *d = k->desc; *d; d++) { /* a pipe would end the cell: escaped */
            if (*d == '|')
                fputc('\\', out);
            fputc(*d, out);
        }
        fputs(" |\n", out);
    } else {
        fprintf(out, "%-40s %-12s default=%s%s%s\n    %s%s\n", path, cfg__type_name(k), def_text(k),
                b[0] ? " range=" : "", b, k->desc, (k->flags & CFG__F_SECRET) ? " (secret)" : "");
    }
}

void cfg_describe(FILE *out, bool md)
{
    if (md) {
        fprintf(out, "| key | type | default | range | from | meaning |\n");
        fprintf(out, "|---|---|---|---|---|---|\n");
    }
    for (size_t i = 0; i < cfg__nkeys; i++)
        row(out, md, "", &cfg__keys[i]);
    for (size_t i = 0; i < cfg__nlistener_keys; i++)
        row(out, md, "mqtt.listeners[].", &cfg__listener_keys[i]);
    for (size_t i = 0; i < cfg__nmapping_keys; i++)
        row(out, md, "mqtt.topic_mappings[].", &cfg__mapping_keys[i]);
    for (size_t i = 0; i < cfg__noutputs_keys; i++)
        row(out, md, "outputs[].", &cfg__output_keys[i]);
    if (!md)
        fprintf(out, "\nEvery key can be overridden from the environment as TRIBUTARY_<KEY>, with dots as\n"
                     "underscores in upper case (e.g. TRIBUTARY_WAL_FSYNC=interval).\n");
}

void cfg_describe_reloadable(FILE *out, bool md)
{
    char path[192];
    cfg_reload_class_t cls;
    for (size_t i = 0; cfg_key_path_at(i, path, sizeof path, &cls); i++)
        if (cls == CFG_RELOAD_LIVE)
            fprintf(out, md ? "- `%s`\n" : "%s\n", path);
}

static void yaml_str(FILE *out, const char *s)
{
    fputc('"', out);
    for (const char *p = s; *p; p++) {
        if (*p == '"' || *p == '\\') fputc('\\', out);
        fputc(*p, out);
    }
    fputc('"', out);
}

static void print_value(FILE *out, const cfg__key_t *k, const void *base)
{
    const char *field = (const char *)base + k->off;
    switch (k->type) {
    case CFG__STR: case CFG__ADDR: case CFG__URL: {
        const char *s = *(char *const *)field;
        if (!s) fputs("~", out);
        else if ((k->flags & CFG__F_SECRET) && *s) fputs("\"***\"", out);
        else yaml_str(out, s);
        break;
    }
    case CFG__BOOL: fputs(*(const bool *)field ? "true" : "false", out); break;
    case CFG__U32: case CFG__MS: fprintf(out, "%" PRIu32, *(const uint32_t *)field); break;
    case CFG__U64: case CFG__BYTES: case CFG__DURATION: fprintf(out, "%" PRIu64, *(const uint64_t *)field); break;
    case CFG__ENUM: fputs(k->enums[*(const int *)field], out); break;
    case CFG__SPACE: {
        const cfg_space_t *v = (const cfg_space_t *)field;
        if (v->permille % 10)
            fprintf(out, "\"%" PRIu32 ".%" PRIu32 "%%\"", v->permille / 10, v->permille % 10);
        else if (v->permille)
            fprintf(out, "\"%" PRIu32 "%%\"", v->permille / 10);
        else
            fprintf(out, "%" PRIu64, v->bytes);
        break;
    }
    default: break;
    }
}

static void print_mapping(FILE *out, const cfg_mapping_t *m)
{
    bool first = true;
    for (size_t i = 0; i < cfg__nmapping_keys; i++) {
        const cfg__key_t *k = &cfg__mapping_keys[i];
        const char *lead = first ? "    - " : "      ";
        if (k->type == CFG__ATTRS) {
            if (!m->nattrs) continue;
            fprintf(out, "%s%s:\n", lead, k->path);
            for (size_t j = 0; j < m->nattrs; j++) {
                fprintf(out, "          %s: ", m->attrs[j].name);
                yaml_str(out, m->attrs[j].ref);
                fputc('\n', out);
            }
        } else if (k->type == CFG__CAPVALS) {
            if (!m->ncapvals) continue;
            fprintf(out, "%s%s:\n", lead, k->path);
            for (size_t j = 0; j < m->ncapvals; j++) {
                fprintf(out, "          \"%s\": [", m->capvals[j].ref);
                for (size_t v = 0; v < m->capvals[j].nvalues; v++) {
                    if (v) fputs(", ", out);
                    yaml_str(out, m->capvals[j].values[v]);
                }
                fputs("]\n", out);
            }
        } else {
            if (k->type == CFG__STR && !*(char *const *)((const char *)m + k->off)) continue;
            fprintf(out, "%s%s: ", lead, k->path);
            print_value(out, k, m);
            fputc('\n', out);
        }
        first = false;
    }
}

static void print_listener(FILE *out, const cfg_listener_t *l)
{
    fputs("    - address: ", out);
    yaml_str(out, l->address);
    fputc('\n', out);
    if (!l->has_tls)
        return;
    fputs("      tls:\n", out);
    for (size_t i = 0; i < cfg__nlistener_keys; i++) {
        const cfg__key_t *k = &cfg__listener_keys[i];
        if (strncmp(k->path, "tls.", 4) != 0)
            continue;
        fprintf(out, "        %s: ", k->path + 4);
        print_value(out, k, l);
        fputc('\n', out);
    }
}

static void print_output(FILE *out, const cfg_output_t *o)
{
    unsigned kbit = o->kind == CFG_OUTPUT_DANUBE ? CFG__F_K_DANUBE
                  : o->kind == CFG_OUTPUT_MQTT   ? CFG__F_K_MQTT
                                                 : CFG__F_K_SPB;
    bool first = true, tls_open = false;
    for (size_t i = 0; i < cfg__noutputs_keys; i++) {
        const cfg__key_t *k = &cfg__output_keys[i];
        if (!(k->flags & kbit))
            continue; /* not a key of its kind: read back, it would be refused */
        bool in_tls = strncmp(k->path, "tls.", 4) == 0;
        if (in_tls && !o->has_tls)
            continue;
        if (k->type == CFG__STR && !*(char *const *)((const char *)o + k->off))
            continue; /* absent (device) */
        if (in_tls && !tls_open) {
            fputs("    tls:\n", out);
            tls_open = true;
        }
        fprintf(out, "%s%s: ", in_tls ? "      " : first ? "  - " : "    ", in_tls ? k->path + 4 : k->path);
        if (k->type == CFG__STRLIST) {
            fputc('[', out);
            for (size_t j = 0; j < o->ntopics; j++) {
                if (j) fputs(", ", out);
                yaml_str(out, o->topics[j]);
            }
            fputc(']', out);
        } else {
            print_value(out, k, o);
        }
        fputc('\n', out);
        first = false;
    }
}

void cfg_print(const cfg_t *cfg, FILE *out)
{
    fprintf(out, "# effective configuration from %s (secrets masked)\n", cfg->source);
    const char *open[4] = { NULL };
    int depth = 0;
    for (size_t i = 0; i < cfg__nkeys; i++) {
        const cfg__key_t *k = &cfg__keys[i];
        if (strcmp(k->path, "mqtt.listener") == 0 && cfg->mqtt.nlisteners)
            continue; /* mqtt.listeners replaces it (and giving both is an error) */
        if (strncmp(k->path, "http.tls.", 9) == 0 && !cfg->http.has_tls)
            continue; /* plain HTTP: an http.tls mapping read back would ask for a certificate */
        /* open the sections this key lives in */
        char path[128];
        snprintf(path, sizeof path, "%s", k->path);
        char *parts[4];
        int n = 0;
        for (char *save = NULL, *t = strtok_r(path, ".", &save); t && n < 4; t = strtok_r(NULL, ".", &save))
            parts[n++] = t;
        int common = 0;
        while (common < depth && common < n - 1 && open[common] && strcmp(open[common], parts[common]) == 0)
            common++;
        static char names[4][64];
        for (int d = common; d < n - 1; d++) {
            fprintf(out, "%*s%s:\n", d * 2, "", parts[d]);
            snprintf(names[d], sizeof names[d], "%s", parts[d]);
            open[d] = names[d];
        }
        depth = n - 1;
        fprintf(out, "%*s%s:", depth * 2, "", parts[n - 1]);
        if (k->type == CFG__MAPPINGS) {
            fputc('\n', out);
            for (size_t m = 0; m < cfg->mqtt.nmappings; m++)
                print_mapping(out, &cfg->mqtt.mappings[m]);
        } else if (k->type == CFG__OUTPUTS) {
            fputs(cfg->noutputs == 1 && cfg->outputs[0].implied ? "  # implied: the file has no outputs section\n"
                                                                : "\n", out);
            for (size_t o = 0; o < cfg->noutputs; o++)
                print_output(out, &cfg->outputs[o]);
        } else if (k->type == CFG__LISTENERS) {
            fputc('\n', out); /* none: a null value, read back as absent */
            for (size_t l = 0; l < cfg->mqtt.nlisteners; l++)
                print_listener(out, &cfg->mqtt.listeners[l]);
        } else {
            fputc(' ', out);
            print_value(out, k, cfg);
            fputc('\n', out);
        }
    }
}

const char *cfg_embedded_default(void)
{
    return
        "# Tributary's embedded default: loopback only, data under ./tributary-data.\n"
        "edge:\n"
        "  edge_name: edge1\n"
        "  cluster_url: http://127.0.0.1:6650\n"
        "  heartbeat_interval_ms: 5000\n"
        "mqtt:\n"
        "  listener: 127.0.0.1:1883\n"
        "  ingestion:\n"
        "    batch_timeout_ms: 5\n"
        "  topic_mappings:\n"
        "    - mqtt_pattern: devices/+/telemetry\n"
        "      danube_topic: /edge1/telemetry\n"
        "      extract_attributes:\n"
        "        device_id: \"$1\"\n"
        "    - mqtt_pattern: sensors/#\n"
        "      danube_topic: /edge1/sensors\n"
        "      extract_attributes:\n"
        "        path: \"$#\"\n"
        "replicator:\n"
        "  batch_timeout_ms: 10\n"
        "wal:\n"
        "  dir: ./tributary-data/wal\n"
        "  segment_bytes: 4MiB\n"
        "  max_topic_bytes: 256MiB\n"
        "  max_total_bytes: 512MiB\n"
        "http:\n"
        "  listener: 127.0.0.1:9090\n";
}
