// kubernetes-sigs/agent-sandbox's controller and CRDs for internal/k8stest, built by
// scripts/k8s-tools.sh in a copy of this module under .cache/k8s/src-agent-sandbox. A module
// of its own, not a tool of scripts/k8s-tools: its requires would move that module's go.sum,
// and with it the stamp of kube-apiserver and the rest, so pinning or bumping it would
// rebuild all of Kubernetes (~8.5 minutes cold) for a 1-2 minute build.
// kubernetes-sigs/agent-sandbox's controller and CRDs for internal/k8stest, built by
// scripts/k8s-tools.sh in a copy of this module under .cache/k8s/src-agent-sandbox. A module
// of its own, not a tool of scripts/k8s-tools: its requires would move that module's go.sum,
// and with it the stamp of kube-apiserver and the rest, so pinning or bumping it would
// rebuild all of Kubernetes (~8.5 minutes cold) for a 1-2 minute build.
//
// Every module it shares with scripts/k8s-tools (golang.org/x, gRPC, Prometheus,
// OpenTelemetry, go-openapi, ...) is replaced to that module's version and required at the
// same version as there (scripts/toolsalign.go), so the shared packages come from the build
// cache entries the control plane's build made first.
module agora.invalid/agent-sandbox-tools

go 1.26.0

tool sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cenkalti/backoff/v5 v5.0.3 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/davecgh/go-spew v1.1.2-0.20180830191138-d8f796af33cc // indirect
	github.com/emicklei/go-restful/v3 v3.13.0 // indirect
	github.com/evanphx/json-patch/v5 v5.9.11 // indirect
	github.com/felixge/fgprof v0.9.5 // indirect
	github.com/fsnotify/fsnotify v1.10.1 // indirect
	github.com/fxamacker/cbor/v2 v2.9.0 // indirect
	github.com/go-logr/logr v1.4.4 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/go-logr/zapr v1.3.0 // indirect
	github.com/go-openapi/jsonpointer v0.22.1 // indirect
	github.com/go-openapi/jsonreference v0.21.2 // indirect
	github.com/go-openapi/swag v0.25.1 // indirect
	github.com/google/gnostic-models v0.7.0 // indirect
	github.com/google/pprof v0.0.0-20250403155104-27863c87afa6 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/grpc-ecosystem/grpc-gateway/v2 v2.29.0 // indirect
	github.com/josharian/intern v1.0.0 // indirect
	github.com/json-iterator/go v1.1.12 // indirect
	github.com/mailru/easyjson v0.9.0 // indirect
	github.com/modern-go/concurrent v0.0.0-20180306012644-bacd9c7ef1dd // indirect
	github.com/modern-go/reflect2 v1.0.3-0.20250322232337-35a7c28c31ee // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/pmezard/go-difflib v1.0.1-0.20181226105442-5d4384ee4fb2 // indirect
	github.com/prometheus/client_golang v1.24.1 // indirect
	github.com/prometheus/client_model v0.6.2 // indirect
	github.com/prometheus/common v0.70.1 // indirect
	github.com/prometheus/procfs v0.21.1 // indirect
	github.com/spf13/pflag v1.0.10 // indirect
	github.com/x448/float16 v0.8.4 // indirect
	go.opentelemetry.io/auto/sdk v1.2.1 // indirect
	go.opentelemetry.io/otel v1.45.0 // indirect
	go.opentelemetry.io/otel/exporters/otlp/otlptrace v1.45.0 // indirect
	go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc v1.45.0 // indirect
	go.opentelemetry.io/otel/metric v1.45.0 // indirect
	go.opentelemetry.io/otel/sdk v1.45.0 // indirect
	go.opentelemetry.io/otel/trace v1.45.0 // indirect
	go.opentelemetry.io/proto/otlp v1.11.0 // indirect
	go.uber.org/multierr v1.11.0 // indirect
	go.uber.org/zap v1.27.1 // indirect
	go.yaml.in/yaml/v2 v2.4.4 // indirect
	go.yaml.in/yaml/v3 v3.0.4 // indirect
	golang.org/x/net v0.58.0 // indirect
	golang.org/x/oauth2 v0.36.0 // indirect
	golang.org/x/sync v0.22.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
	golang.org/x/term v0.45.0 // indirect
	golang.org/x/text v0.41.0 // indirect
	golang.org/x/time v0.15.0 // indirect
	gomodules.xyz/jsonpatch/v2 v2.5.0 // indirect
	google.golang.org/genproto/googleapis/api v0.0.0-20260803160001-6ac0973c030d // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260803160001-6ac0973c030d // indirect
	google.golang.org/grpc v1.83.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
	gopkg.in/evanphx/json-patch.v4 v4.13.0 // indirect
	gopkg.in/inf.v0 v0.9.1 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
	k8s.io/api v0.36.3 // indirect
	k8s.io/apiextensions-apiserver v0.36.3 // indirect
	k8s.io/apimachinery v0.36.3 // indirect
	k8s.io/client-go v0.36.3 // indirect
	k8s.io/klog/v2 v2.140.0 // indirect
	k8s.io/kube-openapi v0.0.0-20260317180543-43fb72c5454a // indirect
	k8s.io/utils v0.0.0-20260210185600-b8788abfbbc2 // indirect
	sigs.k8s.io/agent-sandbox v0.5.6 // indirect
	sigs.k8s.io/controller-runtime v0.24.1 // indirect
	sigs.k8s.io/json v0.0.0-20250730193827-2d320260d730 // indirect
	sigs.k8s.io/randfill v1.0.0 // indirect
	sigs.k8s.io/structured-merge-diff/v6 v6.3.3 // indirect
	sigs.k8s.io/yaml v1.6.0 // indirect
)

replace cel.dev/expr => cel.dev/expr v0.25.1

replace github.com/GoogleCloudPlatform/opentelemetry-operations-go/detectors/gcp => github.com/GoogleCloudPlatform/opentelemetry-operations-go/detectors/gcp v1.31.0

replace github.com/fsnotify/fsnotify => github.com/fsnotify/fsnotify v1.9.0

replace github.com/go-logr/logr => github.com/go-logr/logr v1.4.3

replace github.com/go-openapi/jsonpointer => github.com/go-openapi/jsonpointer v0.21.0

replace github.com/go-openapi/jsonreference => github.com/go-openapi/jsonreference v0.21.0

replace github.com/go-openapi/swag => github.com/go-openapi/swag v0.23.0

replace github.com/golang-jwt/jwt/v5 => github.com/golang-jwt/jwt/v5 v5.3.0

replace github.com/google/gofuzz => github.com/google/gofuzz v1.0.0

replace github.com/google/pprof => github.com/google/pprof v0.0.0-20260115054156-294ebfa9ad83

replace github.com/grpc-ecosystem/grpc-gateway/v2 => github.com/grpc-ecosystem/grpc-gateway/v2 v2.27.7

replace github.com/klauspost/compress => github.com/klauspost/compress v1.18.1

replace github.com/onsi/ginkgo/v2 => github.com/onsi/ginkgo/v2 v2.28.1

replace github.com/onsi/gomega => github.com/onsi/gomega v1.39.1

replace github.com/prometheus/client_golang => github.com/prometheus/client_golang v1.23.2

replace github.com/prometheus/common => github.com/prometheus/common v0.67.5

replace github.com/prometheus/procfs => github.com/prometheus/procfs v0.19.2

replace github.com/spiffe/go-spiffe/v2 => github.com/spiffe/go-spiffe/v2 v2.6.0

replace github.com/stretchr/testify => github.com/stretchr/testify v1.11.1

replace go.opentelemetry.io/contrib/detectors/gcp => go.opentelemetry.io/contrib/detectors/gcp v1.42.0

replace go.opentelemetry.io/otel => go.opentelemetry.io/otel v1.44.0

replace go.opentelemetry.io/otel/exporters/otlp/otlptrace => go.opentelemetry.io/otel/exporters/otlp/otlptrace v1.40.0

replace go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc => go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc v1.40.0

replace go.opentelemetry.io/otel/metric => go.opentelemetry.io/otel/metric v1.44.0

replace go.opentelemetry.io/otel/sdk => go.opentelemetry.io/otel/sdk v1.44.0

replace go.opentelemetry.io/otel/sdk/metric => go.opentelemetry.io/otel/sdk/metric v1.44.0

replace go.opentelemetry.io/otel/trace => go.opentelemetry.io/otel/trace v1.44.0

replace go.opentelemetry.io/proto/otlp => go.opentelemetry.io/proto/otlp v1.9.0

replace go.yaml.in/yaml/v2 => go.yaml.in/yaml/v2 v2.4.3

replace golang.org/x/crypto => golang.org/x/crypto v0.48.0

replace golang.org/x/mod => golang.org/x/mod v0.32.0

replace golang.org/x/net => golang.org/x/net v0.51.0

replace golang.org/x/sync => golang.org/x/sync v0.21.0

replace golang.org/x/sys => golang.org/x/sys v0.46.0

replace golang.org/x/term => golang.org/x/term v0.44.0

replace golang.org/x/text => golang.org/x/text v0.34.0

replace golang.org/x/tools => golang.org/x/tools v0.41.0

replace golang.org/x/tools/go/expect => golang.org/x/tools/go/expect v0.1.1-deprecated

replace google.golang.org/genproto/googleapis/api => google.golang.org/genproto/googleapis/api v0.0.0-20260226221140-a57be14db171

replace google.golang.org/genproto/googleapis/rpc => google.golang.org/genproto/googleapis/rpc v0.0.0-20260226221140-a57be14db171

replace google.golang.org/grpc => google.golang.org/grpc v1.81.1

replace google.golang.org/protobuf => google.golang.org/protobuf v1.36.12-0.20260120151049-f2248ac996af

replace github.com/mailru/easyjson => github.com/mailru/easyjson v0.7.7

replace golang.org/x/time => golang.org/x/time v0.14.0
