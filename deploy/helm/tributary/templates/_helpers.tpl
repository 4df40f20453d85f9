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
