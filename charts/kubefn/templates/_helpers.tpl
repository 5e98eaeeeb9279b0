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
{{ .Values.relay.image.repository }}:{{ .Values.relay.image.tag | default .Chart.AppVersion }}
{{- end }}
