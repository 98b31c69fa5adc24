{{/* Names, labels and small computed values shared by the templates. */}}

{{- define "trainscaler.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's objects are named after it; a release called "trainscaler" is not doubled. */}}
{{- define "trainscaler.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "trainscaler.selectorLabels" -}}
app.kubernetes.io/name: {{ include "trainscaler.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "trainscaler.labels" -}}
{{ include "trainscaler.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: trainscaler
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "trainscaler.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{- define "trainscaler.kubectlImage" -}}
{{- $i := .Values.adminKey.job.kubectlImage -}}
{{- if $i.digest -}}
{{- printf "%s@%s" $i.repository $i.digest -}}
{{- else -}}
{{- printf "%s:%s" $i.repository $i.tag -}}
{{- end -}}
{{- end -}}

{{- define "trainscaler.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "trainscaler.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The Secret holding DATABASE_URL: the user's, or the chart's for a URL given in values. */}}
{{- define "trainscaler.databaseSecret" -}}
{{- if .Values.database.existingSecret -}}
{{- .Values.database.existingSecret -}}
{{- else if .Values.database.url -}}
{{- printf "%s-database" (include "trainscaler.fullname" .) -}}
{{- else -}}
{{- fail "set database.existingSecret (a Secret with the PostgreSQL URL) or, for a trial, database.url" -}}
{{- end -}}
{{- end -}}

{{- define "trainscaler.adminKeySecret" -}}
{{- default (printf "%s-admin-key" (include "trainscaler.fullname" .)) .Values.adminKey.job.secretName -}}
{{- end -}}

{{/* The environment every container that opens the database needs. */}}
{{- define "trainscaler.databaseEnv" -}}
- name: DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "trainscaler.databaseSecret" . }}
      key: {{ .Values.database.secretKey }}
{{- end -}}

{{/* The container's security context, as deploy/k8s has it. */}}
{{- define "trainscaler.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end -}}

{{- define "trainscaler.podSecurityContext" -}}
runAsNonRoot: true
# The Dockerfile's numeric user and group.
runAsUser: 10001
runAsGroup: 10001
fsGroup: 10001
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* The PromQL selector for this release's series (ServiceMonitor's job label is the Service name). */}}
{{- define "trainscaler.metricsSelector" -}}
job="{{ include "trainscaler.fullname" . }}",namespace="{{ .Release.Namespace }}"
{{- end -}}
