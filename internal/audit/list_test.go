package audit_test

import (
	"database/sql"
	"fmt"
	"testing"

	"github.com/agora-dev/agora/internal/audit"
)

// TestList_Limit: with a Limit, List answers the last matching entries, oldest first, with
// kind patterns and subjects filtering as without one.
func TestList_Limit(t *testing.T) {
	db, _ := openDB(t)
	var entries []audit.Entry
	for i := range 50 {
		kind := "a.one"
		if i%2 == 1 {
			kind = "b.two"
		}
		entries = append(entries, audit.Entry{Actor: "t", Kind: kind, Subject: fmt.Sprintf("s/%d", i%5)})
	}
	if err := db.Tx(t.Context(), func(tx *sql.Tx) error {
		_, err := audit.New(nil).AppendAll(t.Context(), tx, entries)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		opts audit.ListOptions
		want []uint64
	}{
		{audit.ListOptions{Limit: 3}, []uint64{47, 48, 49}},
		{audit.ListOptions{Limit: 3, Kind: "b.*"}, []uint64{45, 47, 49}},
		{audit.ListOptions{Limit: 2, Kind: "a.one", Subject: "s/0"}, []uint64{30, 40}},
		{audit.ListOptions{Limit: 100, Subject: "s/4"}, []uint64{4, 9, 14, 19, 24, 29, 34, 39, 44, 49}},
	} {
		recs, err := audit.List(t.Context(), db.SQL(), c.opts)
		if err != nil {
			t.Fatal(err)
		}
		var got []uint64
		for _, r := range recs {
			got = append(got, r.Seq)
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("List(%+v) = seqs %v, want %v", c.opts, got, c.want)
		}
	}
}
