{{/* The YAML documents of a file under files/ that declare an object (comment-only documents dropped). */}}
{{- define "kubefn.documents" -}}
{{- range $doc := regexSplit "(?m)^---[ \t]*$" . -1 }}
{{- if regexMatch "(?m)^kind:" $doc }}
---
{{ trim $doc }}
{{- end }}
{{- end }}
{{- end }}

{{/* The relay's image, pinned to the chart's appVersion unless a tag is given. */}}
{{- define "kubefn.relayImage" -}}
{{ .Values.relay.image.repository }}:{{ .Values.relay.image.tag | default .Chart.AppVersion }}{{ with .Values.relay.image.digest }}@{{ . }}{{ end }}
{{- end }}

{{/* A Pod spec's placement fields from values (nodeSelector, tolerations, affinity,
priorityClassName) and imagePullSecrets, each only when set: as YAML lines, or nothing. */}}
{{- define "kubefn.placement" -}}
{{- $p := .placement -}}
{{- with $p.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $p.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $p.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $p.priorityClassName }}
priorityClassName: {{ . | quote }}
{{- end }}
{{- with .pullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* kubefn's identities: settings.values.SELF_USERNAMES, comma-separated (shared/app/admission/identities.ts). */}}
{{- define "kubefn.identities" -}}
{{- $ids := list -}}
{{- range $u := splitList "," (.Values.settings.values.SELF_USERNAMES | default "system:serviceaccount:kubefn-system:kubefn") -}}
{{- if trim $u }}{{ $ids = append $ids (trim $u) }}{{ end -}}
{{- end -}}
{{- toJson $ids -}}
{{- end }}

{{/* The CEL list of the admission policies' kubefn-identity condition, e.g. ['a', 'b']. */}}
{{- define "kubefn.identityList" -}}
{{- $quoted := list -}}
{{- range $u := include "kubefn.identities" . | fromJsonArray -}}
{{- $quoted = append $quoted (printf "'%s'" $u) -}}
{{- end -}}
[{{ join ", " $quoted }}]
{{- end }}

{{/* The entries of ConfigMap kubefn-status-writers: kubefn, kubefn-2, … (statusWritersFor). */}}
{{- define "kubefn.statusWriters" -}}
{{- range $i, $u := include "kubefn.identities" . | fromJsonArray }}
  {{ if eq $i 0 }}kubefn{{ else }}kubefn-{{ add $i 1 }}{{ end }}: {{ $u | quote }}
{{- end }}
{{- end }}
