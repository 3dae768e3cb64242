package dispatch_test

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/agoratest/s3test"
	"github.com/agora-dev/agora/internal/blob"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/egress"
	"github.com/agora-dev/agora/internal/runtime/openairt/openaitest"
)

// TestDispatch_BlobsInS3: with blobs.s3, a real dispatch's patch and transcript are
// written to the bucket (content-addressed under the prefix, not in AGORA_HOME/blobs), read
// back verified, and an object altered in the bucket is refused on read with an error naming
// the bucket, never returned.
func TestDispatch_BlobsInS3(t *testing.T) {
	srv := s3test.Shared(t)
	cfg := srv.Bucket(t, false)
	t.Setenv("AWS_ACCESS_KEY_ID", srv.Creds.AccessKeyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", srv.Creds.SecretAccessKey)
	e := newEnvYAML(t, fmt.Sprintf("egress: {allow_private: [127.0.0.1/32]}\nblobs:\n  s3: {endpoint: %q, bucket: %s, prefix: %s}\n",
		cfg.Endpoint, cfg.Bucket, cfg.Prefix))
	e.d.Egress = egress.Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	e.capability("files", "tools: [write_file]\n", nil)
	e.modelSubagent("writer", "openai", "files")
	e.model(testAPIKey,
		openaitest.CallTool("write_file", `{"path":"a.txt","content":"written to s3"}`),
		openaitest.Func(func(openaitest.Request) openaitest.Reply { return openaitest.Reply{Content: "done"} }),
	)
	repo := gitRepo(t, map[string]string{"README.md": "# repo\n"})
	r := e.run(dispatch.Request{Subagent: "writer", Envs: []string{"model"}, Repo: repo})
	wantFinished(t, r)
	if r.Result.Patch == nil || r.Result.Transcript == nil {
		t.Fatalf("result %+v: want a patch and a transcript", r.Result)
	}
	if p := e.blob(r.Result.Patch); !strings.Contains(p, "written to s3") {
		t.Errorf("patch read back from the bucket: %q", p)
	}
	if tr := e.blob(r.Result.Transcript); !strings.Contains(tr, "write_file") {
		t.Errorf("transcript read back from the bucket: %q", tr)
	}
	obj := func(a *dispatch.Artifact) string {
		h := a.Digest.Hex()
		return filepath.Join(srv.Dir, cfg.Bucket, "agora", "blobs", "sha256", h[:2], h)
	}
	for _, a := range []*dispatch.Artifact{r.Result.Patch, r.Result.Transcript} {
		if _, err := os.Stat(obj(a)); err != nil {
			t.Errorf("%s is not in the bucket: %v", a.Digest, err)
		}
		h := a.Digest.Hex()
		if _, err := os.Stat(filepath.Join(e.home.Dir, "blobs", "sha256", h[:2], h)); err == nil {
			t.Errorf("%s was also written to AGORA_HOME/blobs", a.Digest)
		}
	}
	// Attack: the patch object is swapped in the bucket for a patch of the attacker's.
	if err := os.WriteFile(obj(r.Result.Patch), []byte("diff --git a/evil b/evil\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := e.home.Blobs.Get(r.Result.Patch.Digest, 0)
	var ie *blob.IntegrityError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), cfg.Bucket) {
		t.Errorf("swapped patch: got %v, want an integrity error naming the bucket", err)
	}
}
