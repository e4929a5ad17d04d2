{{- define "holdfast.name" -}}holdfast{{- end }}

{{- define "holdfast.fullname" -}}
{{- if contains "holdfast" .Release.Name }}{{ .Release.Name | trunc 63 | trimSuffix "-" }}{{ else }}{{ printf "%s-holdfast" .Release.Name | trunc 63 | trimSuffix "-" }}{{ end }}
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
{{- define "holdfast.certSecret" -}}{{ include "holdfast.fullname" . }}-webhook-cert{{- end }}

{{/* holdfast must not run where the agents it guards live: its namespace is exempt from its webhooks. */}}
{{- define "holdfast.namespace" -}}
{{- if has .Release.Namespace (list "kube-system" "kube-public" "default") -}}
{{- fail (printf "holdfast must not be installed in %q: its own namespace is exempt from its webhooks, and the agents it guards live there. Use a dedicated namespace (helm install --namespace holdfast-system --create-namespace)." .Release.Namespace) -}}
{{- end -}}
{{ .Release.Namespace }}
{{- end }}
