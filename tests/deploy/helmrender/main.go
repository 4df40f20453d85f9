// helmrender: renders a Helm chart the way `helm template` does, without
// Helm (Debian 12 has no helm package): Go's text/template with sprig's
// functions (Debian's golang-github-masterminds-sprig-dev, 3.2.3) plus the
// functions Helm adds itself (include, tpl, toYaml, fromYaml, toJson's
// neighbours, required), values merged as Helm merges them, and the same
// .Release/.Chart/.Capabilities objects (fixed values). Built in GOPATH
// mode on /usr/share/gocode, offline.
//
//	helmrender -chart DIR [-f values.yaml]... [-name RELEASE] [-json] [-notes]
//
// Prints every rendered manifest as a YAML stream ("# Source: ..." before
// each, as helm template does), or with -json one JSON array of the parsed
// objects (what tests/deploy/validate.mjs reads), or with -notes the
// rendered NOTES.txt. A template error (a `fail`, a `required`, a missing
// template) is printed and exits 1.
//
// What differs from Helm (none of it used by the chart): no lookup, no
// .Files, no subcharts, no schema (values.schema.json), no hooks ordering;
// toYaml is yaml.v3 with a 2-space indent (Helm's is sigs.k8s.io/yaml: the
// same keys and values, lists may be indented differently).
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/template"

	"github.com/Masterminds/sprig"
	"gopkg.in/yaml.v3"
)

type files []string

func (f *files) String() string     { return strings.Join(*f, ",") }
func (f *files) Set(v string) error { *f = append(*f, v); return nil }

// normalize turns a YAML value into what Helm's values are: JSON types
// (maps of string keys, []interface{}, float64 numbers), as sigs.k8s.io/yaml
// gives them.
func normalize(v interface{}) (interface{}, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out interface{}
	err = json.Unmarshal(b, &out)
	return out, err
}

func readYAML(path string) (map[string]interface{}, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var v interface{}
	if err := yaml.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if v == nil {
		return map[string]interface{}{}, nil
	}
	n, err := normalize(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	m, ok := n.(map[string]interface{})
	if !ok {
		return nil, fmt.Errorf("%s: not a mapping", path)
	}
	return m, nil
}

// merge is Helm's coalescing of a user's values over the chart's: maps
// merge key by key, anything else replaces, and a null deletes the key.
func merge(dst, src map[string]interface{}) {
	for k, v := range src {
		if v == nil {
			delete(dst, k)
			continue
		}
		sm, sok := v.(map[string]interface{})
		dm, dok := dst[k].(map[string]interface{})
		if sok && dok {
			merge(dm, sm)
			continue
		}
		dst[k] = v
	}
}

// wholeNumbers gives back the integers JSON's float64 hides, as
// sigs.k8s.io/yaml prints them (10000, never 1e+04).
func wholeNumbers(v interface{}) interface{} {
	switch t := v.(type) {
	case float64:
		if t == math.Trunc(t) && math.Abs(t) < 1e15 {
			return int64(t)
		}
	case map[string]interface{}:
		m := make(map[string]interface{}, len(t))
		for k, e := range t {
			m[k] = wholeNumbers(e)
		}
		return m
	case []interface{}:
		l := make([]interface{}, len(t))
		for i, e := range t {
			l[i] = wholeNumbers(e)
		}
		return l
	}
	return v
}

func toYAML(v interface{}) string {
	v = wholeNumbers(v)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return ""
	}
	enc.Close()
	return strings.TrimSuffix(buf.String(), "\n")
}

func fromYAML(s string) map[string]interface{} {
	var v interface{}
	m := map[string]interface{}{}
	if err := yaml.Unmarshal([]byte(s), &v); err != nil {
		m["Error"] = err.Error()
		return m
	}
	n, _ := normalize(v)
	if nm, ok := n.(map[string]interface{}); ok {
		return nm
	}
	return m
}

func main() {
	chart := flag.String("chart", "", "the chart's directory")
	name := flag.String("name", "edge", "the release name")
	namespace := flag.String("namespace", "default", "the release namespace")
	asJSON := flag.Bool("json", false, "print the objects as one JSON array")
	notes := flag.Bool("notes", false, "print the rendered NOTES.txt only")
	var valueFiles files
	flag.Var(&valueFiles, "f", "a values file merged over the chart's (repeatable)")
	flag.Parse()
	if *chart == "" {
		fmt.Fprintln(os.Stderr, "usage: helmrender -chart DIR [-f values.yaml]... [-name RELEASE] [-json] [-notes]")
		os.Exit(2)
	}
	if err := run(*chart, *name, *namespace, valueFiles, *asJSON, *notes, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "helmrender:", err)
		os.Exit(1)
	}
}

func run(chart, name, namespace string, valueFiles []string, asJSON, notes bool, out io.Writer) error {
	meta, err := readYAML(filepath.Join(chart, "Chart.yaml"))
	if err != nil {
		return err
	}
	values, err := readYAML(filepath.Join(chart, "values.yaml"))
	if err != nil {
		return err
	}
	for _, f := range valueFiles {
		v, err := readYAML(f)
		if err != nil {
			return err
		}
		merge(values, v)
	}
	chartName, _ := meta["name"].(string)
	top := map[string]interface{}{
		"Values": values,
		"Release": map[string]interface{}{
			"Name": name, "Namespace": namespace, "Service": "Helm",
			"IsInstall": true, "IsUpgrade": false, "Revision": 1,
		},
		"Chart": map[string]interface{}{
			"Name": meta["name"], "Version": meta["version"], "AppVersion": meta["appVersion"],
			"Description": meta["description"], "Type": meta["type"],
		},
		"Capabilities": map[string]interface{}{
			"KubeVersion": map[string]interface{}{"Version": "v1.28.0", "Major": "1", "Minor": "28"},
			"APIVersions": []interface{}{"v1", "apps/v1", "policy/v1", "monitoring.coreos.com/v1"},
		},
	}

	paths, err := filepath.Glob(filepath.Join(chart, "templates", "*"))
	if err != nil {
		return err
	}
	sort.Strings(paths)

	root := template.New("root").Option("missingkey=zero")
	funcs := sprig.TxtFuncMap()
	delete(funcs, "env") // Helm removes these two: a chart must not read the
	delete(funcs, "expandenv") // environment of whoever renders it
	includeDepth := 0
	funcs["include"] = func(tname string, data interface{}) (string, error) {
		includeDepth++
		defer func() { includeDepth-- }()
		if includeDepth > 1000 {
			return "", fmt.Errorf("include %q: too deep (recursion?)", tname)
		}
		var buf strings.Builder
		if err := root.ExecuteTemplate(&buf, tname, data); err != nil {
			return "", err
		}
		return buf.String(), nil
	}
	funcs["tpl"] = func(text string, data interface{}) (string, error) {
		t, err := root.Clone()
		if err != nil {
			return "", err
		}
		t, err = t.New("tpl").Parse(text)
		if err != nil {
			return "", err
		}
		var buf strings.Builder
		if err := t.Execute(&buf, data); err != nil {
			return "", err
		}
		return strings.ReplaceAll(buf.String(), "<no value>", ""), nil
	}
	funcs["toYaml"] = toYAML
	funcs["fromYaml"] = fromYAML
	funcs["required"] = func(msg string, v interface{}) (interface{}, error) {
		if v == nil {
			return nil, errors.New(msg)
		}
		if s, ok := v.(string); ok && s == "" {
			return nil, errors.New(msg)
		}
		return v, nil
	}
	funcs["lookup"] = func(string, string, string, string) (map[string]interface{}, error) {
		return map[string]interface{}{}, nil
	}
	root.Funcs(funcs)

	var manifests, notesFiles []string
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		tname := chartName + "/templates/" + filepath.Base(p)
		if _, err := root.New(tname).Parse(string(b)); err != nil {
			return err
		}
		base := filepath.Base(p)
		switch {
		case base == "NOTES.txt":
			notesFiles = append(notesFiles, tname)
		case strings.HasPrefix(base, "_"):
		case strings.HasSuffix(base, ".yaml") || strings.HasSuffix(base, ".yml") || strings.HasSuffix(base, ".tpl"):
			manifests = append(manifests, tname)
		}
	}

	render := func(tname string) (string, error) {
		var buf strings.Builder
		if err := root.ExecuteTemplate(&buf, tname, top); err != nil {
			return "", err
		}
		return strings.ReplaceAll(buf.String(), "<no value>", ""), nil
	}

	if notes {
		for _, n := range notesFiles {
			s, err := render(n)
			if err != nil {
				return err
			}
			fmt.Fprint(out, s)
		}
		return nil
	}

	var objects []interface{}
	var stream strings.Builder
	for _, m := range manifests {
		s, err := render(m)
		if err != nil {
			return err
		}
		for _, doc := range strings.Split("\n"+s, "\n---") {
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			var v interface{}
			if err := yaml.Unmarshal([]byte(doc), &v); err != nil {
				return fmt.Errorf("%s renders invalid YAML: %v\n%s", m, err, doc)
			}
			n, err := normalize(v)
			if err != nil {
				return fmt.Errorf("%s: %v", m, err)
			}
			objects = append(objects, n)
			fmt.Fprintf(&stream, "---\n# Source: %s\n%s\n", m, strings.Trim(doc, "\n"))
		}
	}
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", " ")
		return enc.Encode(objects)
	}
	_, err = io.WriteString(out, stream.String())
	return err
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, ln := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(ln), "#") {
			b.WriteString(ln)
			b.WriteString("\n")
		}
	}
	return b.String()
}
