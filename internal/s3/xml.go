package s3

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// The server's replies are untrusted input: each parser reads one element of a known name,
// refuses a DOCTYPE (no entity games) and anything after the root, and caps what it keeps.

// maxKeysPerPage caps the keys one list page may carry (S3 sends at most 1,000).
const maxKeysPerPage = 1000

type xmlError struct {
	XMLName xml.Name `xml:"Error"`
	Code    string   `xml:"Code"`
	Message string   `xml:"Message"`
}

// parseError reads an S3 error reply's code and message; both empty when it is not one.
func parseError(body []byte) (code, msg string) {
	var e xmlError
	if decodeOne(body, &e) != nil {
		return "", ""
	}
	return truncate(clean(e.Code), 64), truncate(clean(e.Message), 200)
}

// xmlRetention is AWS's <Retention>; versitygw answers <ObjectLockRetention>.
type xmlRetention struct {
	XMLName         xml.Name
	Mode            string `xml:"Mode"`
	RetainUntilDate string `xml:"RetainUntilDate"`
}

// ParseRetention reads a GetObjectRetention reply. The mode must be GOVERNANCE or COMPLIANCE
// and the date RFC 3339.
func ParseRetention(body []byte) (Lock, error) {
	var r xmlRetention
	if err := decodeOne(body, &r); err != nil {
		return Lock{}, fmt.Errorf("retention reply: %w", err)
	}
	if r.XMLName.Local != "Retention" && r.XMLName.Local != "ObjectLockRetention" {
		return Lock{}, fmt.Errorf("retention reply: root element %q, want Retention", truncate(clean(r.XMLName.Local), 40))
	}
	if r.Mode != "COMPLIANCE" && r.Mode != "GOVERNANCE" {
		return Lock{}, fmt.Errorf("retention reply: mode %q, want COMPLIANCE or GOVERNANCE", truncate(clean(r.Mode), 40))
	}
	t, err := time.Parse(time.RFC3339, strings.TrimSpace(r.RetainUntilDate))
	if err != nil {
		return Lock{}, fmt.Errorf("retention reply: retain-until date %q is not RFC 3339", truncate(clean(r.RetainUntilDate), 40))
	}
	return Lock{Mode: r.Mode, RetainUntil: t.UTC()}, nil
}

type xmlList struct {
	XMLName               xml.Name `xml:"ListBucketResult"`
	IsTruncated           bool     `xml:"IsTruncated"`
	NextContinuationToken string   `xml:"NextContinuationToken"`
	Contents              []struct {
		Key string `xml:"Key"`
	} `xml:"Contents"`
}

// ListPage is one page of ListObjectsV2.
type ListPage struct {
	Keys      []string
	Truncated bool
	Next      string
}

// ParseList reads a ListObjectsV2 reply.
func ParseList(body []byte) (ListPage, error) {
	var l xmlList
	if err := decodeOne(body, &l); err != nil {
		return ListPage{}, fmt.Errorf("list reply: %w", err)
	}
	if len(l.Contents) > maxKeysPerPage {
		return ListPage{}, fmt.Errorf("list reply: %d keys in one page, more than %d", len(l.Contents), maxKeysPerPage)
	}
	p := ListPage{Truncated: l.IsTruncated, Next: l.NextContinuationToken}
	for _, c := range l.Contents {
		p.Keys = append(p.Keys, c.Key)
	}
	return p, nil
}

// decodeOne decodes exactly one root element into v: no DOCTYPE, nothing but space after it.
func decodeOne(body []byte, v any) error {
	if bytes.Contains(body, []byte("<!")) {
		return errors.New("a DOCTYPE or CDATA section is not accepted")
	}
	dec := xml.NewDecoder(bytes.NewReader(body))
	dec.Strict = true
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("not the expected XML: %v", err)
	}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("not the expected XML: %v", err)
		}
		switch t := tok.(type) {
		case xml.CharData:
			if len(bytes.TrimSpace(t)) > 0 {
				return errors.New("text after the root element")
			}
		case xml.Comment, xml.ProcInst:
		default:
			return errors.New("a second root element")
		}
	}
}

// clean keeps printable ASCII of a server-sent string, so it cannot forge lines in a report.
func clean(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return -1
		}
		return r
	}, s)
}
