package s3

import (
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"

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

// VersionsPage is one ListObjectVersions reply.
type VersionsPage struct {
	Truncated bool
	Versions  []ListedVersion
}

// ListedVersion is one entry of a VersionsPage.
type ListedVersion struct {
	Key          string
	VersionID    string
	DeleteMarker bool
}

type xmlVersions struct {
	XMLName     xml.Name `xml:"ListVersionsResult"`
	IsTruncated bool     `xml:"IsTruncated"`
	Entries     []struct {
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
	p := VersionsPage{Truncated: l.IsTruncated}
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
