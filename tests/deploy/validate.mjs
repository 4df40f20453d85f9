// validate.mjs: every object of a rendered chart (helmrender -json) checked
// against the Kubernetes JSON schemas of npm kubernetes-models (ajv, through
// @kubernetes-models/validate), the ServiceMonitor against
// @kubernetes-models/prometheus-operator's.
//
//   node validate.mjs NODE_MODULES_DIR RENDERED.json...
//
// Prints one line per object ("ok Kind/name" or "INVALID Kind/name: why")
// and exits 1 when any is invalid or of a kind it has no model for. The
// packages live in a directory of the build (tests/integration/test_deploy.py
// runs `npm ci` there from tests/deploy/package-lock.json), so they are
// imported by file URL, not by bare name.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [nodeModules, ...files] = process.argv.slice(2);
if (!nodeModules || files.length === 0) {
  console.error("usage: node validate.mjs NODE_MODULES_DIR RENDERED.json...");
  process.exit(2);
}

// apiVersion -> the file of its model
function modelPath(apiVersion, kind) {
  if (apiVersion === "monitoring.coreos.com/v1")
    return join(nodeModules, "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1", kind + ".js");
  return join(nodeModules, "kubernetes-models", apiVersion, kind + ".js"); // "v1" or "apps/v1", "policy/v1"
}

let bad = 0;
for (const file of files) {
  const objects = JSON.parse(readFileSync(file, "utf8"));
  for (const obj of objects) {
    const what = `${obj.kind}/${obj.metadata?.name ?? "?"}`;
    let Model;
    try {
      Model = (await import(pathToFileURL(modelPath(obj.apiVersion, obj.kind)).href))[obj.kind];
    } catch (e) {
      console.log(`INVALID ${what}: no model for ${obj.apiVersion} ${obj.kind} (${e.code ?? e.message})`);
      bad++;
      continue;
    }
    try {
      new Model(obj).validate();
      console.log(`ok ${what} (${file})`);
    } catch (e) {
      console.log(`INVALID ${what} (${file}): ${e.message}`);
      bad++;
    }
  }
}
process.exit(bad ? 1 : 0);
