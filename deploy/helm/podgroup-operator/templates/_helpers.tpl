{{/*
The namespace every namespaced object goes to: the release's, which must be podgroup-operator
(the operator's webhook Service, Lease and certificate Secret are looked up there).
*/}}
{{- define "podgroup-operator.namespace" -}}
{{- if ne .Release.Namespace "podgroup-operator" -}}
{{- fail (printf "namespace %q: install into the namespace podgroup-operator (helm install podgroup-operator deploy/helm/podgroup-operator -n podgroup-operator --create-namespace)" .Release.Namespace) -}}
{{- end -}}
{{- .Release.Namespace -}}
{{- end -}}

{{/* Labels of every object: the kustomize base's, Helm's, then the user's `labels`. */}}
{{- define "podgroup-operator.labels" -}}
{{- $labels := dict
  "app.kubernetes.io/part-of" "podgroup-operator"
  "app.kubernetes.io/instance" .Release.Name
  "app.kubernetes.io/version" .Chart.AppVersion
  "helm.sh/chart" (printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_")
-}}
{{- toYaml (merge $labels .Values.labels) -}}
{{- end -}}

{{/*
metadata.labels and, when there are any, metadata.annotations of an object: (list $ extra), where
`extra` may add "labels" and "annotations" of its own (they win over the user's).
*/}}
{{- define "podgroup-operator.metadata" -}}
{{- $root := index . 0 -}}
{{- $extra := index . 1 -}}
labels:
  {{- $labels := fromYaml (include "podgroup-operator.labels" $root) }}
  {{- toYaml (merge (dict) ($extra.labels | default dict) $labels) | nindent 2 }}
{{- with merge (dict) ($extra.annotations | default dict) $root.Values.annotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* The operator's pods: what the Deployment selects, and the Service and PDB with it. */}}
{{- define "podgroup-operator.selectorLabels" -}}
app.kubernetes.io/name: podgroup-operator
app.kubernetes.io/component: operator
{{- end -}}

{{- define "podgroup-operator.image" -}}
{{- $tag := .Values.image.tag | default .Chart.AppVersion -}}
{{- printf "%s:%s" .Values.image.repository $tag -}}
{{- with .Values.image.digest }}@{{ . }}{{ end -}}
{{- end -}}

{{/*
API versions by cluster, as the kustomize components choose them (deploy/components): the
newest the cluster serves. On a live cluster its served versions decide; `helm template
--kube-version` decides by the version alone.
*/}}
{{- define "podgroup-operator.pdbApiVersion" -}}
{{- if and (.Capabilities.APIVersions.Has "policy/v1") (semverCompare ">=1.21-0" .Capabilities.KubeVersion.Version) -}}
policy/v1
{{- else -}}
policy/v1beta1
{{- end -}}
{{- end -}}

{{- define "podgroup-operator.flowcontrolApiVersion" -}}
{{- if and (.Capabilities.APIVersions.Has "flowcontrol.apiserver.k8s.io/v1") (semverCompare ">=1.29-0" .Capabilities.KubeVersion.Version) -}}
flowcontrol.apiserver.k8s.io/v1
{{- else if and (.Capabilities.APIVersions.Has "flowcontrol.apiserver.k8s.io/v1beta2") (semverCompare ">=1.23-0" .Capabilities.KubeVersion.Version) -}}
flowcontrol.apiserver.k8s.io/v1beta2
{{- else -}}
flowcontrol.apiserver.k8s.io/v1beta1
{{- end -}}
{{- end -}}
