{{/*
agora.image: an image reference pinned by digest, from {repository, digest}. values.schema.json
already refuses a tag; this refuses it again for a chart rendered with --skip-schema-validation,
so an unpinned image never reaches a pod or agora.yaml.
*/}}
{{- define "agora.image" -}}
{{- if not (regexMatch "^sha256:[0-9a-f]{64}$" (.digest | toString)) -}}
{{- fail (printf "image %s: digest %q is not sha256:<64 hex>; images are pinned by digest" .repository .digest) -}}
{{- end -}}
{{- printf "%s@%s" .repository .digest -}}
{{- end -}}

{{/*
agora.checks: what one value cannot say alone. Included by every template that needs it.
*/}}
{{- define "agora.checks" -}}
{{- include "agora.surfaceChecks" . -}}
{{- $s3 := .Values.s3 -}}
{{- if or .Values.blobs.s3 .Values.replicate.enabled -}}
{{- if not (and $s3.endpoint $s3.bucket) -}}
{{- fail "blobs.s3 and replicate.enabled need s3.endpoint and s3.bucket" -}}
{{- end -}}
{{- if not $s3.credentialsSecret -}}
{{- fail "blobs.s3 and replicate.enabled need s3.credentialsSecret (a Secret with access_key_id and secret_access_key)" -}}
{{- end -}}
{{- end -}}
{{- if and .Values.leader.enabled (not .Values.replicate.enabled) -}}
{{- fail "leader.enabled needs replicate.enabled: a standby restores the home from the replica when it takes over" -}}
{{- end -}}
{{- if eq .Values.namespaces.agora .Values.namespaces.agents -}}
{{- fail "namespaces.agora and namespaces.agents must differ: the dispatches' Jobs must not share serve's namespace" -}}
{{- end -}}
{{- /* Again for --skip-schema-validation: these two widen the install past agora's own. */ -}}
{{- range $k, $ns := dict "agora" .Values.namespaces.agora "agents" .Values.namespaces.agents -}}
{{- if or (eq ($ns | toString) "default") (hasPrefix "kube-" ($ns | toString)) -}}
{{- fail (printf "namespaces.%s %q: not default or a kube- namespace, where the Roles (Jobs, Secrets, the Lease) would reach the cluster's own workloads and the default-deny policy would cut them off" $k $ns) -}}
{{- end -}}
{{- end -}}
{{- /* A CR or U+0085, U+2028, U+2029 breaks the line for the YAML parser that reads the
ConfigMap, not for indent: agora.yaml's block would end there and the rest of the value be
the ConfigMap's own keys (its namespace, a second agora.yaml replacing the chart's). */ -}}
{{- if regexMatch "[\r\u0085\u2028\u2029]" (.Values.extraConfig | toString) -}}
{{- fail "extraConfig: a carriage return or a U+0085, U+2028 or U+2029 line break would end agora.yaml in the ConfigMap and write past it; end lines with \\n only" -}}
{{- end -}}
{{- end -}}

{{/*
agora.gatewayHost: the name the dispatches reach serve's gateway at: the serve pod's own
(HOST.agora-gateway.NS.svc.DOMAIN), which the headless Service gives it in the cluster's DNS and
the kubelet in the pod's /etc/hosts.
*/}}
{{- define "agora.gatewayHost" -}}
{{- printf "%s.agora-gateway.%s.svc.%s" .host .root.Values.namespaces.agora .root.Values.gateway.clusterDomain -}}
{{- end -}}

{{/*
agora.s3: the bucket of blobs.s3 and replicate.s3, a flow map; empty keys are left out.
*/}}
{{- define "agora.s3" -}}
{{- $s := .Values.s3 -}}
{endpoint: {{ $s.endpoint | quote }}, bucket: {{ $s.bucket }}
{{- with $s.prefix }}, prefix: {{ . }}{{ end }}
{{- with $s.region }}, region: {{ . }}{{ end }}}
{{- end -}}

{{/*
agora.podSecurity: the serve pod's pull secrets and securityContext (its comments say why).
*/}}
{{- define "agora.podSecurity" -}}
securityContext:
  runAsNonRoot: true
  runAsUser: 10001
  runAsGroup: 10001
  # The volume's root is made writable for group 10001 once; AGORA_HOME is a directory
  # below it that agora makes 0700. OnRootMismatch: the kubelet does not walk the volume
  # again at each start, which would add group bits to the home, and agora refuses a home
  # others can read.
  fsGroup: 10001
  fsGroupChangePolicy: OnRootMismatch
  seccompProfile: {type: RuntimeDefault}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
{{- range . }}
- {name: {{ . }}}
{{- end }}
{{- end }}
{{- end -}}

{{/*
agora.containerSecurity: every container of the serve pod (Pod Security "restricted" and a
read-only root: /tmp is an emptyDir).
*/}}
{{- define "agora.containerSecurity" -}}
securityContext:
  readOnlyRootFilesystem: true
  allowPrivilegeEscalation: false
  capabilities: {drop: [ALL]}
{{- end -}}

{{/*
agora.s3env: the bucket's credentials, from the Secret s3.credentialsSecret, as the
environment agora reads them from (never agora.yaml, never argv).
*/}}
{{- define "agora.s3env" -}}
- {name: AWS_ACCESS_KEY_ID, valueFrom: {secretKeyRef: {name: {{ .Values.s3.credentialsSecret }}, key: access_key_id}}}
- {name: AWS_SECRET_ACCESS_KEY, valueFrom: {secretKeyRef: {name: {{ .Values.s3.credentialsSecret }}, key: secret_access_key}}}
{{- end -}}

{{/*
agora.target: agora.yaml's targets, the one kubernetes target in namespaces.agents.
*/}}
{{- define "agora.target" -}}
targets:
  {{ .Values.target.name }}:
    provider: kubernetes
    namespace: {{ .Values.namespaces.agents }}                  # kubeconfig: empty, agora uses its service account
    image: {{ include "agora.image" .Values.target.image }}
    worker_image: {{ include "agora.image" .Values.target.workerImage }}
    {{- with .Values.target.imagePullSecrets }}
    image_pull_secrets: [{{ join ", " . }}]
    {{- end }}
    {{- with .Values.target.imagePullPolicy }}
    image_pull_policy: {{ . }}
    {{- end }}
    {{- if gt (int .Values.target.warmPool) 0 }}
    backend: agent-sandbox
    warm: {{ int .Values.target.warmPool }}
    warm_pool: true
    {{- end }}
{{- end -}}

{{/*
agora.noModeSwitch: refuses an upgrade that turns leader.enabled on or off in place. Helm
would make the new workload before it deletes the old one, and the old pod keeps serving
through its grace period: a Deployment's serve (no Lease, no fence) committing and uploading
to the bucket while the StatefulSet's first leader restores from it and serves, or a
StatefulSet's leader still leading while the Deployment's serve starts from its own, older
home. Stop the old mode first (`helm uninstall` keeps the homes), then install the new one.
lookup reads the cluster only at install and upgrade: `helm template` sees nothing.
*/}}
{{- define "agora.noModeSwitch" -}}
{{- $ns := .Values.namespaces.agora -}}
{{- $old := "" -}}
{{- if and .Values.leader.enabled (lookup "apps/v1" "Deployment" $ns "agora") -}}
{{- $old = "the Deployment (one replica)" -}}
{{- else if and (not .Values.leader.enabled) (lookup "apps/v1" "StatefulSet" $ns "agora") -}}
{{- $old = "the StatefulSet (replicas on a Lease)" -}}
{{- end -}}
{{- with $old -}}
{{- fail (printf "leader.enabled=%v: %s agora still runs in namespace %s; switching in place would run both serves on the bucket at once: helm uninstall first (the homes are kept), then install" $.Values.leader.enabled . $ns) -}}
{{- end -}}
{{- end -}}

{{/*
agora.namespacesRestricted: with namespaces.create false the chart makes neither namespace,
and says they enforce Pod Security "restricted". The Role lets agora's token make Jobs in
agents: in a namespace without that label, a token taken from serve makes a privileged pod
(the node's root) where the label would have refused it. So a namespace that exists without
the label is refused. lookup reads the cluster only at install and upgrade.
*/}}
{{- define "agora.namespacesRestricted" -}}
{{- if not .Values.namespaces.create -}}
{{- range $k, $name := dict "agora" .Values.namespaces.agora "agents" .Values.namespaces.agents -}}
{{- with lookup "v1" "Namespace" "" $name -}}
{{- $enforce := "" -}}
{{- with .metadata.labels -}}{{- $enforce = index . "pod-security.kubernetes.io/enforce" | default "" -}}{{- end -}}
{{- if ne $enforce "restricted" -}}
{{- fail (printf "namespaces.create=false: namespace %s (namespaces.%s) enforces Pod Security %q, not \"restricted\": label it pod-security.kubernetes.io/enforce=restricted, or let the chart make it (namespaces.create=true)" $name $k $enforce) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
agora.noNamespaceMove: refuses an upgrade that moves serve to another namespaces.agora. The
new workload starts before the old one is deleted, and the Lease is namespaced: two leaders,
each holding its own namespace's Lease, fences open, both writing the one bucket (or, with one
replica, a serve on an empty home beside the old one). It looks in the release's namespace,
where the docs install serve (`--namespace agora`), so the installing user needs no more than
get there: a release whose namespaces.agora was never its own namespace is not checked.
*/}}
{{- define "agora.noNamespaceMove" -}}
{{- $ns := .Values.namespaces.agora -}}
{{- if ne .Release.Namespace $ns -}}
{{- range $kind := list "Deployment" "StatefulSet" -}}
{{- with lookup "apps/v1" $kind $.Release.Namespace "agora" -}}
{{- $a := default (dict) .metadata.annotations -}}
{{- if eq (index $a "meta.helm.sh/release-name" | default "") $.Release.Name -}}
{{- fail (printf "namespaces.agora=%s: this release's serve runs in namespace %s; moving it in place would run two serves (two Leases) on one bucket: helm uninstall first (the home is kept in %s), then install" $ns .metadata.namespace .metadata.namespace) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
agora.noLeaseRename: refuses an upgrade that renames leader.lease while the replicas run. The
StatefulSet rolls one pod at a time: the first rolled, a standby, would elect on the new Lease,
which nobody holds, and lead at once while the not yet rolled leader still holds the old one,
fences open on both, both writing the bucket. The running name is the Role's resourceNames.
*/}}
{{- define "agora.noLeaseRename" -}}
{{- if .Values.leader.enabled -}}
{{- with lookup "rbac.authorization.k8s.io/v1" "Role" .Values.namespaces.agora "agora-leader" -}}
{{- range .rules -}}
{{- range (default (list) .resourceNames) -}}
{{- if ne . $.Values.leader.lease -}}
{{- fail (printf "leader.lease=%s: the replicas lead on Lease %s; renaming it while they run would let the first pod rolled lead on the new one beside the old leader: helm uninstall first (the homes are kept), then install" $.Values.leader.lease .) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
agora.servePolicy: who may reach serve's pods (the Deployment's, or every replica of the
StatefulSet: leader and standbys), a NetworkPolicy selecting them that denies all other
ingress. The gateway is reached by agora's own pods in namespaces.agents (a dispatch's and a
warm slot's: labelled managed-by agora with a dispatch id, as internal/compute/kubernetes
labels them), on its port. The web view, MCP and the metrics listener are reached by the
peers web.from, mcp.from and metrics.from name, on their ports, and by nobody when those are
empty (the default). Anything else a site opens is a rule of networkPolicy.ingress, which
must name its sources and its ports. kubectl port-forward and kubectl exec enter the pod
through the kubelet, which no policy stops.
*/}}
{{- define "agora.servePolicy" -}}
# Who may reach serve's pods: agora's own dispatch and warm-slot pods, in namespace
# {{ .Values.namespaces.agents }}, on the gateway's port; the peers of web.from, mcp.from and
# metrics.from (none by default) on those ports. Everything else is denied;
# networkPolicy.ingress adds a site's own rules. Enforced by the cluster's network plugin
# (Calico, Cilium, ...): a cluster without one enforces no NetworkPolicy at all.
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: agora-serve, namespace: {{ .Values.namespaces.agora }}}
spec:
  podSelector: {matchLabels: {app: agora}}
  policyTypes: [Ingress]
  ingress:
  - from:
    - namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: {{ .Values.namespaces.agents }}}}
      podSelector:
        matchLabels: {app.kubernetes.io/managed-by: agora}
        matchExpressions: [{key: agora.dispatch, operator: Exists}]
    ports: [{protocol: TCP, port: {{ .Values.gateway.port }}}]
  {{- range $name, $s := dict "web" .Values.web "mcp" .Values.mcp "metrics" .Values.metrics }}
  {{- if and $s.enabled $s.from }}
  - from: {{ toJson $s.from }}
    ports: [{protocol: TCP, port: {{ int $s.port }}}]
  {{- end }}
  {{- end }}
  {{- range .Values.networkPolicy.ingress }}
  - {{ toJson . }}
  {{- end }}
{{- end -}}
