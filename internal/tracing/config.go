package tracing

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/agora-dev/agora/internal/secret/redact"
)

// DefaultService is service.name when OTEL_SERVICE_NAME is unset.
const DefaultService = "agora"

// samplers are the OTEL_TRACES_SAMPLER values the SDK implements itself; anything else
// (jaeger_remote, xray) is refused rather than silently replaced by the default.
var samplers = sync.OnceValue(func() map[string]bool {
	return map[string]bool{
		"": true, "always_on": true, "always_off": true, "traceidratio": true,
		"parentbased_always_on": true, "parentbased_always_off": true, "parentbased_traceidratio": true,
	}
})

// ErrConfig marks an OTEL_* setting agora cannot honour; the process refuses to start.
var ErrConfig = errors.New("tracing configuration")

// Enabled reports whether the environment asks for traces: an OTLP endpoint is set, the SDK
// is not disabled and the exporter is not "none". getenv is os.Getenv or a test's map.
func Enabled(getenv func(string) string) bool {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	if strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")) == "none" {
		return false
	}
	return strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_ENDPOINT")) != "" ||
		strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")) != ""
}

// Protocols of OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL agora exports with. http/protobuf is the
// specification's default. grpc costs one exporter package: the OTLP collector's generated
// code the HTTP exporter links already brings gRPC itself. http/json is not implemented by
// the Go exporters, so it is refused.
const (
	ProtocolHTTP = "http/protobuf"
	ProtocolGRPC = "grpc"
)

// protocol is the exporter protocol the environment names, the traces-specific variable
// first.
func protocol(getenv func(string) string) (string, error) {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		switch v := strings.TrimSpace(getenv(k)); v {
		case "":
			continue
		case ProtocolHTTP, ProtocolGRPC:
			return v, nil
		default:
			return "", fmt.Errorf("%w: %s=%q: agora exports traces over OTLP with http/protobuf or grpc", ErrConfig, k, v)
		}
	}
	return ProtocolHTTP, nil
}

// Check refuses what agora does not support: a protocol other than http/protobuf or grpc,
// an exporter other than otlp, and a sampler the SDK does not know. It reads the variables
// only when tracing is enabled, so unset variables never fail a command.
func Check(getenv func(string) string) error {
	if !Enabled(getenv) {
		return nil
	}
	if _, err := protocol(getenv); err != nil {
		return err
	}
	if v := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); v != "" && v != "otlp" {
		return fmt.Errorf("%w: OTEL_TRACES_EXPORTER=%q: agora exports traces with otlp only (or none)", ErrConfig, v)
	}
	if v := strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER")); !samplers()[v] {
		return fmt.Errorf("%w: OTEL_TRACES_SAMPLER=%q: want always_on, always_off, traceidratio or a parentbased_ one", ErrConfig, v)
	}
	return nil
}

// FromEnv returns the process's tracer: off (a no-op) when [Enabled] is false, otherwise
// exporting batches over OTLP/HTTP as the OTEL_* variables say. Export failures are logged
// to log with the exporter's header values masked (they may hold credentials). The caller
// must [Tracer.Shutdown] it, which flushes what is buffered.
func FromEnv(ctx context.Context, getenv func(string) string, log *slog.Logger) (*Tracer, error) {
	err := Check(getenv)
	if err != nil {
		return nil, err
	}
	if !Enabled(getenv) {
		return Off(), nil
	}
	// The exporter reads the endpoint, headers, timeout, compression and certificates from
	// the same variables itself.
	var exp sdktrace.SpanExporter
	if proto, _ := protocol(getenv); proto == ProtocolGRPC {
		exp, err = otlptracegrpc.New(ctx)
	} else {
		exp, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: OTLP exporter: %w", ErrConfig, err)
	}
	service := cmp.Or(strings.TrimSpace(getenv("OTEL_SERVICE_NAME")), DefaultService)
	// Only the service name and the SDK's identity, plus OTEL_RESOURCE_ATTRIBUTES which the
	// operator wrote: never the process's command line or environment.
	res, err := resource.Merge(resource.NewSchemaless(attribute.String("service.name", service)),
		resource.NewSchemaless(attribute.String("telemetry.sdk.language", "go"), attribute.String("telemetry.sdk.name", "opentelemetry")))
	if err != nil {
		return nil, fmt.Errorf("%w: resource: %w", ErrConfig, err)
	}
	if fromEnv, err := resource.New(ctx, resource.WithFromEnv()); err == nil {
		if merged, err := resource.Merge(res, fromEnv); err == nil {
			res = merged
		}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	otel.SetErrorHandler(exportErrors{log: log, red: headerRedactor(getenv)})
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithIDGenerator(idGenerator{}),
	)
	return &Tracer{tp: tp, t: tp.Tracer("github.com/agora-dev/agora")}, nil
}

// Off is a tracer that records nothing.
func Off() *Tracer { return &Tracer{t: noop.NewTracerProvider().Tracer("")} }

// exportErrors logs the SDK's errors (an unreachable collector, a refused export) once per
// error, masked: an error may quote the endpoint, and a header value must never be logged.
type exportErrors struct {
	log *slog.Logger
	red *redact.Redactor
}

func (h exportErrors) Handle(err error) {
	h.log.Warn("trace export", "err", h.red.String(err.Error()))
}

// headerRedactor masks the values of OTEL_EXPORTER_OTLP_HEADERS and
// OTEL_EXPORTER_OTLP_TRACES_HEADERS (key=value,key=value), whole and each value alone.
func headerRedactor(getenv func(string) string) *redact.Redactor {
	var values [][]byte
	for _, k := range []string{"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"} {
		v := getenv(k)
		if v == "" {
			continue
		}
		values = append(values, []byte(v))
		for _, kv := range strings.Split(v, ",") {
			if _, val, ok := strings.Cut(kv, "="); ok {
				values = append(values, []byte(strings.TrimSpace(val)))
			}
		}
	}
	return redact.New(values)
}
