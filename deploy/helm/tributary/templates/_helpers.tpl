{{- define "tributary.fullname" -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- define "tributary.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}
{{- define "tributary.selector" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
{{/* The scheme of the ops endpoint: HTTPS when config.http.tls is set (http.tls, docs/SECURITY.md). */}}
{{- define "tributary.httpScheme" -}}
{{- $http := .Values.config.http | default dict -}}
{{- if $http.tls -}}
{{- if $http.tls.require_client_cert -}}
{{- fail "config.http.tls.require_client_cert: the kubelet's probes present no client certificate, so /healthz and /readyz would fail" -}}
{{- end -}}
HTTPS
{{- else -}}
HTTP
{{- end -}}
{{- end -}}

{{/* This edge's name: config.edge.edge_name, else .Values.edgeName, else the release's name. */}}
{{- define "tributary.edgeName" -}}
{{- $edge := .Values.config.edge | default dict -}}
{{- $edge.edge_name | default .Values.edgeName | default .Release.Name -}}
{{- end -}}

{{/* The Secret holding the cluster token (key "token"), "" for none. */}}
{{- define "tributary.tokenSecret" -}}
{{- if .Values.auth.existingSecret -}}{{ .Values.auth.existingSecret }}
{{- else if .Values.tokenSecret -}}{{ .Values.tokenSecret }}
{{- else if .Values.auth.token -}}{{ include "tributary.fullname" . }}-token
{{- end -}}
{{- end -}}

{{/* The Secret holding the admin API's token (key "token"), "" for none. */}}
{{- define "tributary.adminSecret" -}}
{{- if .Values.admin.existingSecret -}}{{ .Values.admin.existingSecret }}
{{- else if .Values.admin.token -}}{{ include "tributary.fullname" . }}-admin
{{- end -}}
{{- end -}}

{{/* The edge.yaml the ConfigMap holds: config, with edge.edge_name
     defaulted to ${EDGE_NAME} (the container's environment) and the token
     files of the Secrets the chart mounts. */}}
{{- define "tributary.config" -}}
{{- $c := deepCopy (.Values.config | default dict) -}}
{{- $edge := get $c "edge" | default dict -}}
{{- if not $edge.edge_name -}}{{- $_ := set $edge "edge_name" "${EDGE_NAME}" -}}{{- end -}}
{{- $_ := set $c "edge" $edge -}}
{{- $http := get $c "http" | default dict -}}
{{- if include "tributary.adminSecret" . -}}{{- $_ := set $http "admin_token_file" "/etc/tributary/admin/token" -}}{{- end -}}
{{- if .Values.metricsToken.existingSecret -}}{{- $_ := set $http "auth_token_file" "/etc/tributary/metrics/token" -}}{{- end -}}
{{- $_ := set $c "http" $http -}}
{{- toYaml $c -}}
{{- end -}}

{{/* The part of the config a reload does not apply (the keys of reload
     class "restart"; `tributary config --describe --reloadable` lists the
     others): the checksum/config annotation hashes only this, so a change
     of a reloadable key reaches the running pod through the mounted
     ConfigMap and reload.watch_ms, and any other change rolls the pod.
     Removed: log, auth, http.auth_token_file, http.admin_token_file, each mapping's
     validation_policy, and the files and settings of http.tls and of each
     listener's tls, but not whether those are there (turning TLS on or off
     needs a restart) nor a listener's tls.read_coalesce_ms (restart).
     tests/integration/test_deploy.py holds this to the binary's list. */}}
{{- define "tributary.restartConfig" -}}
{{- $c := include "tributary.config" . | fromYaml -}}
{{- $_ := unset $c "log" -}}
{{- $_ := unset $c "auth" -}}
{{- if kindIs "map" $c.http -}}
{{- $_ := unset $c.http "auth_token_file" -}}
{{- $_ := unset $c.http "admin_token_file" -}}
{{- if hasKey $c.http "tls" -}}{{- $_ := set $c.http "tls" "present" -}}{{- end -}}
{{- end -}}
{{- if kindIs "map" $c.mqtt -}}
{{- if kindIs "slice" $c.mqtt.listeners -}}
{{- range $l := $c.mqtt.listeners -}}
{{- if and (kindIs "map" $l) (hasKey $l "tls") -}}
{{- $tls := dict "present" true -}}
{{- if and (kindIs "map" $l.tls) (hasKey $l.tls "read_coalesce_ms") -}}{{- $_ := set $tls "read_coalesce_ms" $l.tls.read_coalesce_ms -}}{{- end -}}
{{- $_ := set $l "tls" $tls -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $_ := unset $c.mqtt "unmatched" -}}
{{- if kindIs "slice" $c.mqtt.topic_mappings -}}
{{- /* the mappings reload live (a new generation): only priority and durability, which an existing
       topic keeps until a restart, roll the pod */ -}}
{{- $kept := list -}}
{{- range $m := $c.mqtt.topic_mappings -}}
{{- if and (kindIs "map" $m) (or (hasKey $m "priority") (hasKey $m "durability")) -}}
{{- $kept = append $kept (pick $m "priority" "durability") -}}
{{- end -}}
{{- end -}}
{{- $_ := set $c.mqtt "topic_mappings" $kept -}}
{{- end -}}
{{- end -}}
{{- /* live keys of other sections: a reload applies them */ -}}
{{- if kindIs "map" $c.replicator -}}{{- $_ := unset $c.replicator "max_attempts" -}}{{- end -}}
{{- if kindIs "map" $c.wal -}}{{- $_ := unset $c.wal "retire" -}}{{- end -}}
{{- if kindIs "slice" $c.outputs -}}
{{- /* a reload adds, removes or replaces an mqtt or sparkplug output alone, and applies any
       output's rate caps: only a danube entry's other keys roll the pod */ -}}
{{- $kept := list -}}
{{- range $o := $c.outputs -}}
{{- if not (kindIs "map" $o) -}}
{{- $kept = append $kept $o -}}
{{- else if eq (toString $o.kind) "danube" -}}
{{- $kept = append $kept (omit $o "max_bytes_per_s" "max_messages_per_s") -}}
{{- end -}}
{{- end -}}
{{- $_ := set $c "outputs" $kept -}}
{{- end -}}
{{- toYaml $c -}}
{{- end -}}

{{/* preStop (drain.timeoutSeconds, when enabled) and SIGTERM's drain
     (shutdown_timeout_ms) share terminationGracePeriodSeconds: refused
     unless it is above both plus 5 s. */}}
{{- define "tributary.grace" -}}
{{- $config := .Values.config | default dict -}}
{{- $shutdownMs := 25000 -}}
{{- if hasKey $config "shutdown_timeout_ms" -}}
{{- if kindIs "string" $config.shutdown_timeout_ms -}}
{{- fail "config.shutdown_timeout_ms: give a number of milliseconds (the chart checks terminationGracePeriodSeconds against it)" -}}
{{- end -}}
{{- $shutdownMs = $config.shutdown_timeout_ms -}}
{{- end -}}
{{- $drain := 0 -}}
{{- if .Values.drain.enabled -}}{{- $drain = .Values.drain.timeoutSeconds -}}{{- end -}}
{{- $need := add (int $drain) (div (add (int $shutdownMs) 999) 1000) 5 -}}
{{- $grace := int .Values.terminationGracePeriodSeconds -}}
{{- if le $grace $need -}}
{{- fail (printf "terminationGracePeriodSeconds %d must be above %d: drain.timeoutSeconds (%d, when drain.enabled) + config.shutdown_timeout_ms (%d ms) + 5 s, which the preStop drain and SIGTERM's drain share" $grace $need (int $drain) (int $shutdownMs)) -}}
{{- end -}}
{{- $grace -}}
{{- end -}}
