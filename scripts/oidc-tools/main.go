// Command agora-oidc-op is the OpenID Connect provider agora's tests sign in against: the
// OpenID-certified provider of github.com/zitadel/oidc (its op package, with the in-memory
// storage and login page of its example server), wrapped so a test can script it:
//
//   - service clients (client credentials grant) whose access tokens are JWTs with a groups
//     claim and the audience the test names; a lifetime below zero issues an expired token;
//   - the example's users (test-user@127.0.0.1 / verysecure) with groups (in their ID tokens
//     too), and a web client for the authorization code flow with PKCE;
//   - POST /admin/rotate makes a new signing key current (the old one stays in the JWKS until
//     POST /admin/rotate?drop=1), so a test can see rotation happen.
//
// It prints "ISSUER <url>" on stdout once it listens. It is a test tool: it binds loopback only.
//
// Why not Dex: the module proxy this project builds from serves only Dex v2.13.0 (2018, the
// last version before its go.mod lost the /v2 suffix), which no longer compiles against its
// own dependencies (coreos/etcd 3.3 against a current grpc).
package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/google/uuid"
	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// serviceClient is one client credentials client: its secret, groups, audience and lifetime.
type serviceClient struct {
	ID       string        `json:"id"`
	Secret   string        `json:"secret"`
	Groups   []string      `json:"groups"`
	Audience []string      `json:"audience"`
	TTL      time.Duration `json:"ttl"`
}

// config is the provider's JSON config (-config).
type config struct {
	Services    []serviceClient     `json:"services"`
	UserGroups  map[string][]string `json:"user_groups"` // example user id -> groups
	WebClientID string              `json:"web_client_id"`
	WebSecret   string              `json:"web_secret"`
	RedirectURI []string            `json:"redirect_uris"`
}

type key struct {
	id  string
	key *rsa.PrivateKey
}

func (k *key) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k *key) Key() any                                    { return k.key }
func (k *key) ID() string                                  { return k.id }

type pubKey struct{ k *key }

func (p pubKey) ID() string                         { return p.k.id }
func (p pubKey) Algorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (p pubKey) Use() string                        { return "sig" }
func (p pubKey) Key() any                           { return &p.k.key.PublicKey }

// store is the example storage with scriptable keys, service clients and groups.
type store struct {
	*storage.Storage
	cfg config

	mu   sync.Mutex
	keys []*key // keys[0] signs; the rest are still published
}

func newKey() *key {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return &key{id: uuid.NewString(), key: k}
}

func (s *store) SigningKey(context.Context) (op.SigningKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keys[0], nil
}

func (s *store) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256}, nil
}

func (s *store) KeySet(context.Context) ([]op.Key, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]op.Key, len(s.keys))
	for i, k := range s.keys {
		out[i] = pubKey{k}
	}
	return out, nil
}

func (s *store) rotate(drop bool) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := newKey()
	if drop {
		s.keys = []*key{k}
	} else {
		s.keys = append([]*key{k}, s.keys...)
	}
	return k.id
}

func (s *store) service(id string) (serviceClient, bool) {
	for _, c := range s.cfg.Services {
		if c.ID == id {
			return c, true
		}
	}
	return serviceClient{}, false
}

// jwtClient is a service client whose access tokens are JWTs.
type jwtClient struct {
	*storage.Client
	id string
}

func (c jwtClient) GetID() string                       { return c.id }
func (c jwtClient) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeJWT }
func (c jwtClient) GrantTypes() []oidc.GrantType {
	return []oidc.GrantType{oidc.GrantTypeClientCredentials}
}
func (c jwtClient) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}

func (s *store) ClientCredentials(_ context.Context, id, secret string) (op.Client, error) {
	c, ok := s.service(id)
	if !ok || c.Secret != secret {
		return nil, errors.New("wrong client id or secret")
	}
	return jwtClient{Client: storage.WebClient(id, secret), id: id}, nil
}

func (s *store) ClientCredentialsTokenRequest(_ context.Context, id string, scopes []string) (op.TokenRequest, error) {
	c, ok := s.service(id)
	if !ok {
		return nil, errors.New("wrong client id")
	}
	return &oidc.JWTTokenRequest{Subject: c.ID, Audience: c.Audience, Scopes: scopes}, nil
}

func (s *store) CreateAccessToken(ctx context.Context, req op.TokenRequest) (string, time.Time, error) {
	id, exp, err := s.Storage.CreateAccessToken(ctx, req)
	if c, ok := s.service(req.GetSubject()); ok && c.TTL != 0 {
		exp = time.Now().Add(c.TTL)
	}
	return id, exp, err
}

func (s *store) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	if c, ok := s.service(id); ok {
		return jwtClient{Client: storage.WebClient(id, c.Secret), id: id}, nil
	}
	return s.Storage.GetClientByClientID(ctx, id)
}

func (s *store) groups(subject string) []string {
	if c, ok := s.service(subject); ok {
		return c.Groups
	}
	return s.cfg.UserGroups[subject]
}

func (s *store) GetPrivateClaimsFromScopes(ctx context.Context, userID, clientID string, scopes []string) (map[string]any, error) {
	claims, err := s.Storage.GetPrivateClaimsFromScopes(ctx, userID, clientID, scopes)
	if err != nil {
		return nil, err
	}
	if claims == nil {
		claims = map[string]any{}
	}
	if g := s.groups(userID); g != nil {
		claims["groups"] = g
	}
	return claims, nil
}

// SetUserinfoFromRequest puts the user's groups into its ID token too (the example storage
// puts only the standard claims there): the web view's sign-in maps them to a role.
func (s *store) SetUserinfoFromRequest(ctx context.Context, userinfo *oidc.UserInfo, req op.IDTokenRequest, scopes []string) error {
	if err := s.Storage.SetUserinfoFromRequest(ctx, userinfo, req, scopes); err != nil {
		return err
	}
	if g := s.groups(req.GetSubject()); g != nil {
		userinfo.AppendClaims("groups", g)
	}
	return nil
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "loopback HOST:PORT to listen on")
	cfgPath := flag.String("config", "", "JSON config: services, user_groups, web_client_id, web_secret, redirect_uris")
	flag.Parse()
	var cfg config
	if *cfgPath != "" {
		b, err := os.ReadFile(*cfgPath)
		if err == nil {
			err = json.Unmarshal(b, &cfg)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "agora-oidc-op: config:", err)
			os.Exit(2)
		}
	}
	host, _, err := net.SplitHostPort(*addr)
	if err != nil || !net.ParseIP(host).IsLoopback() {
		fmt.Fprintln(os.Stderr, "agora-oidc-op: -addr must be a loopback HOST:PORT")
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "agora-oidc-op:", err)
		os.Exit(1)
	}
	issuer := "http://" + ln.Addr().String()
	if cfg.WebClientID != "" {
		storage.RegisterClients(storage.WebClient(cfg.WebClientID, cfg.WebSecret, cfg.RedirectURI...))
	}
	users := storage.NewUserStore(issuer + "/")
	st := &store{Storage: storage.NewStorage(users), cfg: cfg, keys: []*key{newKey()}}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	router := exampleop.SetupServer(issuer, st, logger, false, op.WithAllowInsecure())
	mux := http.NewServeMux()
	mux.HandleFunc("POST /admin/rotate", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, st.rotate(r.URL.Query().Get("drop") == "1"))
	})
	mux.Handle("/", router)
	fmt.Println("ISSUER " + strings.TrimSuffix(issuer, "/"))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	if err := srv.Serve(ln); err != nil {
		fmt.Fprintln(os.Stderr, "agora-oidc-op:", err)
		os.Exit(1)
	}
}
