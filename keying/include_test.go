package keying_test

import (
	"errors"
	"testing"

	"github.com/idemkit/idemkit/keying"
)

func TestWithIncludeHashesOnlyTheNamedMembers(t *testing.T) {
	f, err := keying.NewFingerprinter(keying.WithInclude("amount", "order.id", "items[].sku"))
	if err != nil {
		t.Fatal(err)
	}
	sum := func(body string) string { return f.Sum("p", "op", nil, []byte(body)) }
	base := sum(`{"amount":5,"order":{"id":"o1","note":"a"},"items":[{"sku":"x","n":1}],"attempt":1}`)
	same := []string{
		`{"attempt":7,"amount":5.0,"items":[{"n":9,"sku":"x"}],"order":{"note":"b","id":"o1"}}`,
		`{"amount":5,"order":{"id":"o1"},"items":[{"sku":"x"}]}`,
	}
	for _, b := range same {
		if got := sum(b); got != base {
			t.Errorf("%s: fingerprint differs, though the included members match", b)
		}
	}
	differ := []string{
		`{"amount":6,"order":{"id":"o1"},"items":[{"sku":"x"}]}`,             // a value
		`{"order":{"id":"o1"},"items":[{"sku":"x"}]}`,                        // amount absent
		`{"amount":null,"order":{"id":"o1"},"items":[{"sku":"x"}]}`,          // null is not absent
		`{"amount":5,"order":["o1"],"items":[{"sku":"x"}]}`,                  // another shape
		`{"amount":5,"order":{"id":"o1"},"items":[{"sku":"x"},{"sku":"y"}]}`, // one more element
		`{"amount":5,"order":{"id":"o1"},"items":[{}]}`,                      // absent in an element
		`{"amount":5,"order":{"id":"o1"},"items":{"sku":"x"}}`,               // not an array
		`{"amount":"5","order":{"id":"o1"},"items":[{"sku":"x"}]}`,           // a string, not a number
	}
	seen := map[string]string{base: "base"}
	for _, b := range differ {
		got := sum(b)
		if prev, ok := seen[got]; ok {
			t.Errorf("%s: same fingerprint as %s", b, prev)
		}
		seen[got] = b
	}
	if got := f.Include(); len(got) != 3 || got[0] != "amount" {
		t.Errorf("Include() = %q", got)
	}
}

func TestWithIncludeAndVolatile(t *testing.T) {
	f, err := keying.NewFingerprinter(keying.WithInclude("order"), keying.WithVolatile("order.ts"))
	if err != nil {
		t.Fatal(err)
	}
	a := f.Sum("", "", nil, []byte(`{"order":{"id":1,"ts":1},"x":1}`))
	b := f.Sum("", "", nil, []byte(`{"order":{"id":1,"ts":2},"x":2}`))
	c := f.Sum("", "", nil, []byte(`{"order":{"id":2,"ts":1},"x":1}`))
	if a != b || a == c {
		t.Fatalf("sums %s %s %s: want the first two equal and the third apart", a, b, c)
	}
}

func TestWithIncludeHashesOtherBodiesWhole(t *testing.T) {
	f, err := keying.NewFingerprinter(keying.WithInclude("id"))
	if err != nil {
		t.Fatal(err)
	}
	plain := keying.Fingerprinter{}
	for _, body := range []string{`id=1&x=2`, `{"id":1`, ``} {
		if f.Sum("p", "o", nil, []byte(body)) != plain.Sum("p", "o", nil, []byte(body)) {
			t.Errorf("%q: a body that is not JSON must be hashed whole, as without WithInclude", body)
		}
	}
	if f.Sum("p", "o", nil, []byte(`{"id":1}`)) == plain.Sum("p", "o", nil, []byte(`{"id":1}`)) {
		t.Error("a selection and a whole body share a hash domain")
	}
}

func TestWithIncludeRefusesBadPaths(t *testing.T) {
	if _, err := keying.NewFingerprinter(keying.WithInclude("a..b")); !errors.Is(err, keying.ErrInvalidPath) {
		t.Errorf("malformed path: %v", err)
	}
	if _, err := keying.NewFingerprinter(keying.WithInclude()); err == nil {
		t.Error("WithInclude() with no paths was accepted")
	}
}

// FuzzWithInclude checks that any body gets a fingerprint without a
// panic, and that a body equal to another up to member order and the
// members outside the include list gets the same one.
func FuzzWithInclude(f *testing.F) {
	for _, s := range []string{`{"a":1,"b":{"c":[1,{"d":2}]}}`, `[{"d":1},{"d":"x"}]`, `{"b":{"c":"s"}}`, `{"a":`, `"x"`, `{"b":[{"c":{"d":[]}}]}`} {
		f.Add([]byte(s))
	}
	fp, err := keying.NewFingerprinter(keying.WithInclude("a", "b.c", "b.c[].d", "[].d"), keying.WithVolatile("b.e"))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		sum := fp.Sum("p", "o", nil, body)
		if len(sum) != keying.SumLen {
			t.Fatalf("sum %q", sum)
		}
		canon, err := keying.Canonicalize(body, nil)
		if err != nil {
			return
		}
		if again := fp.Sum("p", "o", nil, canon); again != sum {
			t.Fatalf("the canonical form of %q has another selection", body)
		}
	})
}
