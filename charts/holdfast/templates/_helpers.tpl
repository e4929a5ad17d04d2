{{- define "holdfast.name" -}}holdfast{{- end }}

{{/* At most 55 characters, so that <fullname>-webhook and <fullname>-metrics are valid Service names. */}}
{{- define "holdfast.fullname" -}}
{{- if .Values.fullnameOverride }}{{ .Values.fullnameOverride | trunc 55 | trimSuffix "-" }}
{{- else if contains "holdfast" .Release.Name }}{{ .Release.Name | trunc 55 | trimSuffix "-" }}
{{- else }}{{ printf "%s-holdfast" .Release.Name | trunc 55 | trimSuffix "-" }}{{ end }}
{{- end }}

{{- define "holdfast.labels" -}}
app.kubernetes.io/name: holdfast
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{- define "holdfast.selectorLabels" -}}
app.kubernetes.io/name: holdfast
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "holdfast.webhookService" -}}{{ include "holdfast.fullname" . }}-webhook{{- end }}
{{- define "holdfast.metricsService" -}}{{ include "holdfast.fullname" . }}-metrics{{- end }}
{{- define "holdfast.certSecret" -}}{{ include "holdfast.fullname" . }}-webhook-cert{{- end }}

{{/*
holdfast must not run where the agents it guards live: its namespace is exempt from its
webhooks. Install, upgrade and `helm template` refuse such a namespace; `helm lint` (which
neither installs nor upgrades, in namespace "default" unless --namespace says otherwise, and
turns `fail` into an INFO line) renders every template in it instead, so that it checks them.
*/}}
{{- define "holdfast.namespace" -}}
{{- if and (or .Release.IsInstall .Release.IsUpgrade) (has .Release.Namespace (list "kube-system" "kube-public" "default")) -}}
{{- fail (printf "holdfast must not be installed in %q: its own namespace is exempt from its webhooks, and the agents it guards live there. Use a dedicated namespace (helm install --namespace holdfast-system --create-namespace)." .Release.Namespace) -}}
{{- end -}}
{{ .Release.Namespace }}
{{- end }}

{{/* The self-test's objects (`helm test`): not the Services' or the PDB's pods. */}}
{{- define "holdfast.selftestLabels" -}}
app.kubernetes.io/name: holdfast-selftest
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: selftest
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{/* A duration of the form the values schema allows (a count and s, m or h) in seconds. */}}
{{- define "holdfast.seconds" -}}
{{- $n := . | trimSuffix "s" | trimSuffix "m" | trimSuffix "h" | atoi -}}
{{- if hasSuffix "h" . }}{{ mul $n 3600 }}{{ else if hasSuffix "m" . }}{{ mul $n 60 }}{{ else }}{{ $n }}{{ end -}}
{{- end }}
