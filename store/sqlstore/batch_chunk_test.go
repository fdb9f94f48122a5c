package sqlstore_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/store"
)

// TestBatchChunksMaxKeys claims a batch of 1,100 items naming 1,030
// distinct keys of store.MaxKeyLen bytes (the VARBINARY(512) limit on
// MySQL, where the batch runs as statements of 512, 512 and 6 keys, the
// last padded to 8), whose duplicates fall in other statements than their
// first occurrence: every key is set by its first occurrence only, and
// every duplicate sees that occurrence's value.
func TestBatchChunksMaxKeys(t *testing.T) {
	const distinct, total = 1030, 1100
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			s := newStore(t, b)
			items := make([]store.BatchItem, total)
			for i := range items {
				k := fmt.Sprintf("%05d", i%distinct) + strings.Repeat("\xff", store.MaxKeyLen-5)
				items[i] = store.BatchItem{Key: k, Value: []byte(fmt.Sprint(i)), TTL: time.Hour}
			}
			res, err := s.SetNXBatch(t.Context(), items)
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range res {
				if r.Set != (i < distinct) {
					t.Fatalf("item %d: Set %v", i, r.Set)
				}
				if i >= distinct && string(r.Existing.Value) != fmt.Sprint(i-distinct) {
					t.Fatalf("item %d: saw %q, want %q", i, r.Existing.Value, fmt.Sprint(i-distinct))
				}
			}
			n := 0
			if err := s.Scan(t.Context(), "", func(k string, e store.Entry) bool {
				if len(k) != store.MaxKeyLen {
					t.Errorf("stored key of %d bytes", len(k))
				}
				n++
				return true
			}); err != nil {
				t.Fatal(err)
			}
			if n != distinct {
				t.Fatalf("%d keys stored, want %d", n, distinct)
			}
		})
	}
}
