{{/*
The surfaces of serve's pod beside the gateway (#31): the web run view (serve --http), MCP over
HTTP (agora mcp --http, a container of its own on the same home) and the metrics listener
(serve --metrics), each at a ClusterIP Service of its own, each reached only by the peers its
values name (agora.servePolicy). Tokens reach the processes as secretKeyRef environment from
Secrets the operator makes: never in the values, a manifest or argv.
*/}}

{{/*
agora.surfaceChecks: what the surfaces' values cannot say alone.
*/}}
{{- define "agora.surfaceChecks" -}}
{{- $v := .Values -}}
{{- /* Again for --skip-schema-validation: a Secret's name is printed in the manifests' header
comment too, where a line break would end the comment and write YAML. */ -}}
{{- range $k, $n := dict "web.tokenSecret" $v.web.tokenSecret "mcp.tokenSecret" $v.mcp.tokenSecret -}}
{{- if and $n (not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$" ($n | toString))) -}}
{{- fail (printf "%s %q is not a Secret's name" $k $n) -}}
{{- end -}}
{{- end -}}
{{- if not (has ($v.mcp.ceiling | toString) (list "read" "dispatch" "orchestrate")) -}}
{{- fail (printf "mcp.ceiling %q: read, dispatch or orchestrate" $v.mcp.ceiling) -}}
{{- end -}}
{{- if and $v.web.enabled (not $v.web.tokenSecret) -}}
{{- fail "web.enabled needs web.tokenSecret: a Secret with key token (openssl rand -hex 32), the web view's operator token" -}}
{{- end -}}
{{- if $v.mcp.enabled -}}
{{- if not $v.mcp.tokenSecret -}}
{{- fail "mcp.enabled needs mcp.tokenSecret: a Secret with key token (openssl rand -hex 32), MCP's own token" -}}
{{- end -}}
{{- if not $v.metrics.enabled -}}
{{- fail "mcp.enabled needs metrics.enabled: the MCP container serves only while serve's /readyz, on the metrics listener, says serve is ready (with leader.enabled: leads)" -}}
{{- end -}}
{{- if and $v.web.enabled (eq $v.mcp.tokenSecret $v.web.tokenSecret) -}}
{{- fail "mcp.tokenSecret and web.tokenSecret must differ: the web view's token is an operator's (orchestrate), MCP's has its own ceiling, and one leaked token must not open both" -}}
{{- end -}}
{{- end -}}
{{- /* Again for --skip-schema-validation: a peer the schema refuses (empty, or a selector
that names nothing, which the NetworkPolicy API reads as every pod or every namespace) would
open the port, metrics' without a token, to more than a site meant. */ -}}
{{- range $name, $s := dict "web" $v.web "mcp" $v.mcp "metrics" $v.metrics -}}
{{- if and $s.enabled $s.from -}}
{{- $ok := kindIs "slice" $s.from -}}
{{- if $ok -}}
{{- range $p := $s.from -}}
{{- if not (and (kindIs "map" $p) (gt (len $p) 0)) -}}{{- $ok = false -}}{{- else -}}
{{- range $k, $sel := $p -}}
{{- if has $k (list "podSelector" "namespaceSelector") -}}
{{- if not (and (kindIs "map" $sel) (or (and (kindIs "map" $sel.matchLabels) $sel.matchLabels) (and (kindIs "slice" $sel.matchExpressions) $sel.matchExpressions))) -}}{{- $ok = false -}}{{- end -}}
{{- else if ne $k "ipBlock" -}}{{- $ok = false -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if not $ok -}}
{{- fail (printf "%s.from %s: a list of NetworkPolicy peers, each naming its sources (podSelector or namespaceSelector with matchLabels or matchExpressions, or ipBlock); an empty peer or selector selects everything" $name (toJson $s.from)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $ports := list (int $v.gateway.port) -}}
{{- range $name, $s := dict "web" $v.web "mcp" $v.mcp "metrics" $v.metrics -}}
{{- if $s.enabled -}}
{{- if has (int $s.port) $ports -}}
{{- fail (printf "%s.port %v is another listener's port of serve's pod (gateway.port, web.port, mcp.port and metrics.port must differ)" $name $s.port) -}}
{{- end -}}
{{- $ports = append $ports (int $s.port) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
agora.serviceHosts: FLAG NAME pairs, one per name of the Service .name in the cluster's DNS that
no other namespace can answer for (NAME.NS.svc, NAME.NS.svc.DOMAIN), as args: the Host and
Origin checks accept those names (on the listener's port, which is the Service's) and no other.
Not NAME or NAME.NS: a client's resolver tries its own namespace's search domains first, where
whoever may make a Service (or a pod under a headless Service named NS) answers for them, takes
the bearer token and could rebind a browser's name (red team 40).
*/}}
{{- define "agora.serviceHosts" -}}
{{- $ns := .root.Values.namespaces.agora -}}
{{- range $i, $h := list (printf "%s.%s.svc" .name $ns) (printf "%s.%s.svc.%s" .name $ns .root.Values.gateway.clusterDomain) -}}
{{- if $i }}{{ "\n" }}{{ end -}}
- {{ $.flag }}
- {{ $h | quote }}
{{- end -}}
{{- end -}}

{{/*
agora.serveArgs: `agora orch serve`'s flags: the gateway, and the surfaces enabled. Names are
quoted and ports made integers: with --skip-schema-validation a value holding a line break
or a quote stays inside its own argument, never a flag of its own.
*/}}
{{- define "agora.serveArgs" -}}
- --gateway
- "0.0.0.0:{{ .Values.gateway.port }}"
{{- if .Values.web.enabled }}
- --http
- "0.0.0.0:{{ int .Values.web.port }}"
{{ include "agora.serviceHosts" (dict "root" . "name" "agora-web" "flag" "--allow-host") }}
{{- end }}
{{- if .Values.metrics.enabled }}
- --metrics
- "0.0.0.0:{{ int .Values.metrics.port }}"
- --metrics-allow-remote
{{ include "agora.serviceHosts" (dict "root" . "name" "agora-metrics" "flag" "--metrics-allow-host") }}
{{- range .Values.metrics.allowHosts }}
- --metrics-allow-host
- {{ . | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{/*
agora.serveSurfaceEnv: serve's environment for the web view: the operator's token by
reference (serve reads it once), and the explicit opt-in to a bind other than loopback.
*/}}
{{- define "agora.serveSurfaceEnv" -}}
- {name: AGORA_HTTP_TOKEN, valueFrom: {secretKeyRef: {name: {{ .Values.web.tokenSecret | quote }}, key: token}}}
- {name: AGORA_HTTP_ALLOW_ANY, value: yes-i-understand-the-risk}
{{- end -}}

{{/*
agora.servePorts: the agora container's ports, named as the Services and the probes use them.
*/}}
{{- define "agora.servePorts" -}}
ports:
- {name: gateway, containerPort: {{ .Values.gateway.port }}}
{{- if .Values.web.enabled }}
- {name: web, containerPort: {{ int .Values.web.port }}}
{{- end }}
{{- if .Values.metrics.enabled }}
- {name: metrics, containerPort: {{ int .Values.metrics.port }}}
{{- end }}
{{- end -}}

{{/*
agora.mcpContainer: `agora mcp --http` beside serve, on the pod's home (the same volume, user
and agora.yaml: two processes on one home, as `agora mcp` beside a serve on one host). Its
dispatches are handed to detached supervisors and recorded in agora.db, which serve's gateway
reads; its orchestrator tools reach serve's socket in the home.

It serves only while serve's /readyz answers: on a standby (leader.enabled) serve opens nothing
until it holds the Lease, so it has no metrics listener, and an agora mcp there would write
a home nobody serves (and keep the databases a takeover then replaces under it). So the shell
starts agora mcp once serve is ready, stops it when /readyz fails twice in a row (serve lost
its Lease and exited, or its databases are not writable) and waits again; agora mcp ending by
itself ends the container, so its error shows as a restart. No readiness probe: the pod's
readiness is serve's, and an MCP that is restarting must not take the gateway out of its
Service.
*/}}
{{- define "agora.mcpContainer" -}}
- name: mcp
  image: {{ include "agora.image" .Values.image }}
  command:
  - sh
  - -c
  - |
    ready() { timeout 2 wget -q -O /dev/null http://127.0.0.1:{{ int .Values.metrics.port }}/readyz 2>/dev/null; }
    pid=
    trap '[ -z "$pid" ] || { kill "$pid"; wait "$pid"; }; exit 0' TERM INT
    while :; do
      echo "agora mcp: waiting for serve's /readyz (a standby waits until it leads)" >&2
      until ready; do sleep 1; done
      agora mcp "$@" &
      pid=$!
      down=0
      while [ "$down" -lt 2 ] && kill -0 "$pid" 2>/dev/null; do
        sleep 1
        if ready; then down=0; else down=$((down + 1)); fi
      done
      if ! kill -0 "$pid" 2>/dev/null; then wait "$pid"; exit $?; fi
      echo "agora mcp stopped: serve is not ready (a standby, or stopped); waiting for it" >&2
      kill "$pid"; wait "$pid"
      pid=
    done
  - agora-mcp
  args:
  - --http
  - "0.0.0.0:{{ int .Values.mcp.port }}"
  - --ceiling
  - {{ .Values.mcp.ceiling | quote }}
  {{- include "agora.serviceHosts" (dict "root" . "name" "agora-mcp" "flag" "--allow-host") | nindent 2 }}
  env:
  - {name: AGORA_HOME, value: /var/lib/agora/home}
  - {name: HOME, value: /var/lib/agora}
  - {name: AGORA_HTTP_TOKEN, valueFrom: {secretKeyRef: {name: {{ .Values.mcp.tokenSecret | quote }}, key: token}}}
  - {name: AGORA_HTTP_ALLOW_ANY, value: yes-i-understand-the-risk}
  {{- /* The bucket for its dispatches' blobs, and without leader to replicate agora.db should
  serve stop; with leader agora mcp never replicates (only the leading serve), so no key. */}}
  {{- if or .Values.blobs.s3 (and .Values.replicate.enabled (not .Values.leader.enabled)) }}
  {{- include "agora.s3env" . | nindent 2 }}
  {{- end }}
  ports: [{name: mcp, containerPort: {{ int .Values.mcp.port }}}]
  volumeMounts:
  - {name: home, mountPath: /var/lib/agora}
  - {name: config, mountPath: /etc/agora, readOnly: true}
  - {name: tmp, mountPath: /tmp}
  {{- include "agora.containerSecurity" . | nindent 2 }}
{{- end -}}

{{/*
agora.surfaceServices: a ClusterIP Service for each surface enabled, its port the listener's
(the Host a client sends names it, and the listener accepts the Service's names on that port
alone). Its endpoints are serve's Ready pods: with leader.enabled, the leader alone.
*/}}
{{- define "agora.surfaceServices" -}}
{{- $ns := .Values.namespaces.agora -}}
{{- range $name, $s := dict "web" .Values.web "mcp" .Values.mcp "metrics" .Values.metrics }}
{{- if $s.enabled }}
---
# serve's {{ $name }} listener at a name of its own ({{ $name }}.port; its Host and Origin
# checks accept this Service's names). Endpoints: serve's Ready pods; with leader.enabled, the
# leader alone. Reached by the peers of {{ $name }}.from and by kubectl port-forward.
apiVersion: v1
kind: Service
metadata: {name: agora-{{ $name }}, namespace: {{ $ns }}}
spec:
  type: ClusterIP
  selector: {app: agora}
  ports: [{name: {{ $name }}, port: {{ int $s.port }}, targetPort: {{ $name }}}]
{{- end }}
{{- end }}
{{- end -}}

{{/*
agora.tokenSecretsHelp: the header lines that say how to make the token Secrets the pod reads.
*/}}
{{- define "agora.tokenSecretsHelp" -}}
{{- $ns := .Values.namespaces.agora -}}
{{- if or .Values.web.enabled .Values.mcp.enabled }}
# The pod reads its tokens from Secrets you make first, each a key token of at least 32
# characters, made without the token in any command line (docs/operations.md, "agora on
# Kubernetes"):
{{- if .Values.web.enabled }}
#   openssl rand -hex 32 | tr -d '\n' | kubectl -n {{ $ns }} create secret generic {{ .Values.web.tokenSecret }} --from-file=token=/dev/stdin
{{- end }}
{{- if .Values.mcp.enabled }}
#   openssl rand -hex 32 | tr -d '\n' | kubectl -n {{ $ns }} create secret generic {{ .Values.mcp.tokenSecret }} --from-file=token=/dev/stdin
{{- end }}
{{- end }}
{{- end -}}
