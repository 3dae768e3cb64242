package retention

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sync"

	"github.com/agora-dev/agora/internal/digest"
)

// Product classes: which retention ages a product out.
const (
	ClassBlobs = "blobs"
	ClassLogs  = "logs"
)

// product is one blob a dispatch's record names.
type product struct {
	Name   string // patch, output:PATH, input, input:KEY/PATH, stdout, stderr, transcript, final
	Class  string
	Digest digest.Digest
	Size   int64
}

// resultJSON and inputJSON are the parts of a dispatch record that name its products. The
// record is agora's own (written by internal/dispatch), not untrusted input; a record that does
// not decode names no candidate, and every digest in it is kept (see digestsIn).
type artifactJSON struct {
	Digest digest.Digest `json:"digest"`
	Size   int64         `json:"size"`
}

type resultJSON struct {
	Patch   *artifactJSON `json:"patch"`
	Outputs []struct {
		Path   string        `json:"path"`
		Digest digest.Digest `json:"digest"`
		Size   int64         `json:"size"`
	} `json:"outputs"`
	Stdout     *artifactJSON `json:"stdout"`
	Stderr     *artifactJSON `json:"stderr"`
	Transcript *artifactJSON `json:"transcript"`
	Final      *artifactJSON `json:"final"`
}

type inputJSON struct {
	Key   string `json:"key"`
	Files []struct {
		Path   string        `json:"path"`
		Digest digest.Digest `json:"digest"`
		Size   int64         `json:"size"`
	} `json:"files"`
}

// products lists the blobs a dispatch record names, by class.
func products(inputDigest, result, inputs string) ([]product, error) {
	var out []product
	if inputDigest != "" {
		out = append(out, product{Name: "input", Class: ClassBlobs, Digest: digest.Digest(inputDigest)})
	}
	if result != "" {
		var r resultJSON
		if err := json.Unmarshal([]byte(result), &r); err != nil {
			return nil, fmt.Errorf("result: %w", err)
		}
		add := func(name, class string, a *artifactJSON) {
			if a != nil && a.Digest != "" {
				out = append(out, product{Name: name, Class: class, Digest: a.Digest, Size: a.Size})
			}
		}
		add("patch", ClassBlobs, r.Patch)
		for _, o := range r.Outputs {
			out = append(out, product{Name: "output:" + o.Path, Class: ClassBlobs, Digest: o.Digest, Size: o.Size})
		}
		add("stdout", ClassLogs, r.Stdout)
		add("stderr", ClassLogs, r.Stderr)
		add("transcript", ClassLogs, r.Transcript)
		add("final", ClassBlobs, r.Final)
	}
	if inputs != "" && inputs != "[]" {
		var in []inputJSON
		if err := json.Unmarshal([]byte(inputs), &in); err != nil {
			return nil, fmt.Errorf("inputs: %w", err)
		}
		for _, i := range in {
			for _, f := range i.Files {
				out = append(out, product{Name: "input:" + i.Key + "/" + f.Path, Class: ClassBlobs, Digest: f.Digest, Size: f.Size})
			}
		}
	}
	for _, p := range out {
		if _, err := digest.Parse(string(p.Digest)); err != nil {
			return nil, fmt.Errorf("%s: %w", p.Name, err)
		}
	}
	return out, nil
}

// digestRE finds every digest a text names, whatever field holds it: what is kept is found by
// this broad scan, so a field added to a record later is kept without a change here.
var digestRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`sha256:[0-9a-f]{64}`) })

// digestsIn adds to keep every digest the texts name.
func digestsIn(keep map[digest.Digest]bool, texts ...string) {
	for _, t := range texts {
		for _, m := range digestRE().FindAllString(t, -1) {
			keep[digest.Digest(m)] = true
		}
	}
}
