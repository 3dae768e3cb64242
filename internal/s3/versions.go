package s3

import (
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/agora-dev/agora/internal/egress"
)

// Version is one version (or delete marker) of an object, as ListObjectVersions names it.
type Version struct {
	VersionID    string
	DeleteMarker bool
}

// Versions lists every version and delete marker of exactly name, in the server's order
// (newest first). Object Lock keeps a locked VERSION from being deleted or shortened, not the
// name: a plain PUT to the same key makes a new current version (S3 and versitygw accept it),
// so whoever relies on a locked object being the only word on its name checks this list. A
// listing the server cuts short (more than one page) is refused: an anchor has one version.
func (c *Client) Versions(ctx context.Context, name string) ([]Version, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	key := c.prefix + name
	q := url.Values{"versions": {""}, "prefix": {key}}
	resp, err := c.do(ctx, request{method: http.MethodGet, query: q, bucket: true})
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxListBody))
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("s3 versions of %s in %s: %w", key, c.Where(), egress.RedactError(err))
	}
	page, err := ParseVersions(body)
	if err != nil {
		return nil, fmt.Errorf("s3 versions of %s in %s: %w", key, c.Where(), err)
	}
	if page.Truncated {
		return nil, fmt.Errorf("s3 versions of %s in %s: more than one page of versions", key, c.Where())
	}
	var out []Version
	for _, v := range page.Versions {
		if v.Key == key { // the prefix also matches longer keys
			out = append(out, Version{VersionID: v.VersionID, DeleteMarker: v.DeleteMarker})
		}
	}
	return out, nil
}

// VersionsUnder lists every version and delete marker of every key under dir ("anchors/agora/"),
// names with the prefix removed, all pages (at most maxListPages). A key the server names
// outside the prefix is refused.
func (c *Client) VersionsUnder(ctx context.Context, dir string) ([]ListedVersion, error) {
	if err := checkName(dir + "x"); err != nil {
		return nil, err
	}
	var out []ListedVersion
	keyMarker, versionMarker := "", ""
	for page := 0; ; page++ {
		if page == maxListPages {
			return nil, fmt.Errorf("s3 versions under %s in %s: more than %d pages", dir, c.Where(), maxListPages)
		}
		q := url.Values{"versions": {""}, "prefix": {c.prefix + dir}}
		if keyMarker != "" {
			q.Set("key-marker", keyMarker)
			q.Set("version-id-marker", versionMarker)
		}
		resp, err := c.do(ctx, request{method: http.MethodGet, query: q, bucket: true})
		if err != nil {
			return nil, err
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxListBody))
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("s3 versions under %s in %s: %w", dir, c.Where(), egress.RedactError(err))
		}
		p, err := ParseVersions(body)
		if err != nil {
			return nil, fmt.Errorf("s3 versions under %s in %s: %w", dir, c.Where(), err)
		}
		for _, v := range p.Versions {
			name, ok := strings.CutPrefix(v.Key, c.prefix)
			if !ok || checkName(name) != nil {
				return nil, fmt.Errorf("s3 versions under %s in %s: the server returned key %q outside the prefix", dir, c.Where(), truncate(clean(v.Key), 80))
			}
			v.Key = name
			out = append(out, v)
		}
		if !p.Truncated {
			return out, nil
		}
		if p.NextKeyMarker == "" || (p.NextKeyMarker == keyMarker && p.NextVersionMarker == versionMarker) {
			return nil, fmt.Errorf("s3 versions under %s in %s: a truncated page without a new marker", dir, c.Where())
		}
		keyMarker, versionMarker = p.NextKeyMarker, p.NextVersionMarker
	}
}

// VersionsPage is one ListObjectVersions reply.
type VersionsPage struct {
	Truncated         bool
	NextKeyMarker     string
	NextVersionMarker string
	Versions          []ListedVersion
}

// ListedVersion is one entry of a VersionsPage.
type ListedVersion struct {
	Key          string
	VersionID    string
	DeleteMarker bool
}

type xmlVersions struct {
	XMLName             xml.Name `xml:"ListVersionsResult"`
	IsTruncated         bool     `xml:"IsTruncated"`
	NextKeyMarker       string   `xml:"NextKeyMarker"`
	NextVersionIDMarker string   `xml:"NextVersionIdMarker"`
	Entries             []struct {
		XMLName   xml.Name
		Key       string `xml:"Key"`
		VersionID string `xml:"VersionId"`
	} `xml:",any"`
}

// ParseVersions reads a ListObjectVersions reply: its Version and DeleteMarker entries, at
// most 1,000 of them.
func ParseVersions(body []byte) (VersionsPage, error) {
	var l xmlVersions
	if err := decodeOne(body, &l); err != nil {
		return VersionsPage{}, fmt.Errorf("versions reply: %w", err)
	}
	p := VersionsPage{Truncated: l.IsTruncated, NextKeyMarker: l.NextKeyMarker, NextVersionMarker: l.NextVersionIDMarker}
	for _, e := range l.Entries {
		switch e.XMLName.Local {
		case "Version", "DeleteMarker":
		default:
			continue // Name, Prefix, KeyMarker, MaxKeys... of the listing itself
		}
		if len(p.Versions) == maxKeysPerPage {
			return VersionsPage{}, fmt.Errorf("versions reply: more than %d entries in one page", maxKeysPerPage)
		}
		p.Versions = append(p.Versions, ListedVersion{Key: e.Key, VersionID: e.VersionID, DeleteMarker: e.XMLName.Local == "DeleteMarker"})
	}
	return p, nil
}
