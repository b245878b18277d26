{{/* Names are fixed, not release-prefixed: one CNI per cluster, and the admission policy, docs and
     troubleshooting commands name these objects. */}}
{{- define "zovn.controller" -}}zstack-ovnkube-controller{{- end }}
{{- define "zovn.node" -}}zstack-ovnkube-node{{- end }}

{{- define "zovn.labels" -}}
app.kubernetes.io/name: zstack-ovn-kubernetes
app.kubernetes.io/part-of: zstack-ovn-kubernetes
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{/* image: (list $ .Values.x.image) */}}
{{- define "zovn.image" -}}
{{- $root := index . 0 -}}{{- $img := index . 1 -}}
{{- printf "%s:%s" $img.repository (default $root.Chart.AppVersion $img.tag) -}}
{{- end }}

{{- define "zovn.standalone" -}}{{ eq .Values.ovn.mode "standalone" }}{{- end }}

{{/* NB and SB remotes the controller, northd and ovn-controller use. Standalone: the ClusterIPs of the chart's
     ovn-nb-db and ovn-sb-db Services, through the service variables kubelet puts in every pod of the namespace
     and expands in $(...): the pods use the host network before cluster DNS can run, so a Service name would
     not resolve. Helm creates the Services before the workloads, so the variables are there. */}}
{{- define "zovn.scheme" -}}{{ ternary "ssl" "tcp" .Values.ovn.ssl.enabled }}{{- end }}
{{- define "zovn.nbdbAddress" -}}
{{- if eq .Values.ovn.mode "external" -}}{{ .Values.ovn.nbdbAddress }}
{{- else -}}{{ include "zovn.scheme" . }}:$(OVN_NB_DB_SERVICE_HOST):$(OVN_NB_DB_SERVICE_PORT){{- end }}
{{- end }}
{{- define "zovn.sbdbAddress" -}}
{{- if eq .Values.ovn.mode "external" -}}{{ .Values.ovn.sbdbAddress }}
{{- else -}}{{ include "zovn.scheme" . }}:$(OVN_SB_DB_SERVICE_HOST):$(OVN_SB_DB_SERVICE_PORT){{- end }}
{{- end }}

{{- define "zovn.sslSecret" -}}{{ default "zstack-ovn-ssl" .Values.ovn.ssl.secretName }}{{- end }}

{{/* Environment every component shares: how to reach kube-apiserver before Service routing exists. */}}
{{- define "zovn.apiserverEnv" -}}
{{- if .Values.kubernetes.serviceHost }}
- name: KUBERNETES_SERVICE_HOST
  value: {{ .Values.kubernetes.serviceHost | quote }}
- name: KUBERNETES_SERVICE_PORT
  value: {{ default 6443 .Values.kubernetes.servicePort | quote }}
{{- end }}
{{- end }}

{{- define "zovn.sslEnv" -}}
{{- if .Values.ovn.ssl.enabled }}
- name: ZSTACK_OVN_SSL_ENABLED
  value: "true"
- name: ZSTACK_OVN_SSL_VERIFY_HOSTNAME
  value: {{ .Values.ovn.ssl.verifyHostname | quote }}
- name: ZSTACK_OVN_SSL_CA
  value: /etc/zstack-ovn/ssl/ca.crt
- name: ZSTACK_OVN_SSL_CERT
  value: /etc/zstack-ovn/ssl/tls.crt
- name: ZSTACK_OVN_SSL_KEY
  value: /etc/zstack-ovn/ssl/tls.key
{{- end }}
{{- end }}
{{/* The same three files for the zstack-ovn-central entrypoint (NB, SB, Raft and northd use tls.crt both as
     server and as client certificate). */}}
{{- define "zovn.centralSslEnv" -}}
{{- if .Values.ovn.ssl.enabled }}
- name: ZOVN_SSL_KEY
  value: /etc/zstack-ovn/ssl/tls.key
- name: ZOVN_SSL_CERT
  value: /etc/zstack-ovn/ssl/tls.crt
- name: ZOVN_SSL_CA
  value: /etc/zstack-ovn/ssl/ca.crt
{{- end }}
{{- end }}
{{- define "zovn.sslMount" -}}
{{- if .Values.ovn.ssl.enabled }}
- name: ovn-ssl
  mountPath: /etc/zstack-ovn/ssl
  readOnly: true
{{- end }}
{{- end }}
{{- define "zovn.sslVolume" -}}
{{- if .Values.ovn.ssl.enabled }}
- name: ovn-ssl
  secret:
    secretName: {{ include "zovn.sslSecret" . | quote }}
    defaultMode: 0440
{{- end }}
{{- end }}

{{/* V8 flags of the long-running programs, equal to NODE_FLAGS in src/runtime-flags.ts (a test keeps them so): a
small young generation keeps resident memory near what the caches hold. The executable's code cache stays valid
with them (a flag like --no-warnings would make V8 reject it). */}}
{{- define "zovn.nodeOptions" -}}
- name: NODE_OPTIONS
  value: "--max-semi-space-size=2"
{{- end }}
