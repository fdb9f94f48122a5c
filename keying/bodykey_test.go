package keying_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/keying"
	"github.com/idemkit/idemkit/store"
)

func TestKeyPathExtractsScalars(t *testing.T) {
	cases := []struct {
		path, body, want string
	}{
		{"id", `{"id":"evt_1"}`, "evt_1"},
		{"id", ` { "other": [1,{"id":"no"}], "id" : "evt_2" } `, "evt_2"},
		{"data.object.id", `{"data":{"object":{"id":"pi_3","amount":5}},"id":"evt"}`, "pi_3"},
		{"out_trade_no", `{"out_trade_no":20240101123}`, "20240101123"},
		{"n", `{"n":1.0}`, "1"},   // numbers are keys by value
		{"n", `{"n":10E-1}`, "1"}, // the same value
		{"s", `{"s":"\u0041B"}`, "AB"},
		{`a\.b`, `{"a.b":"dotted","a":{"b":"nested"}}`, "dotted"},
		{"q", `{"q\"":"x","q":"quoted name sorted after"}`, "quoted name sorted after"},
		{"esc", `{"esc":"a\"b\\c"}`, `a"b\c`},
	}
	for _, c := range cases {
		k, err := keying.NewKeyPath(c.path)
		if err != nil {
			t.Fatalf("NewKeyPath(%q): %v", c.path, err)
		}
		got, err := k.Extract([]byte(c.body))
		if err != nil || got != c.want {
			t.Errorf("%q in %s = %q, %v; want %q", c.path, c.body, got, err, c.want)
		}
	}
}

func TestKeyPathRefusesBadBodies(t *testing.T) {
	long := `{"id":"` + strings.Repeat("a", keying.MaxKeyLen+1) + `"}`
	cases := []struct {
		name, path, body string
		want             error
	}{
		{"absent", "id", `{"ID":"x"}`, keying.ErrKeyAbsent},
		{"absent below", "data.id", `{"data":{}}`, keying.ErrKeyAbsent},
		{"not an object on the way", "data.id", `{"data":[{"id":"x"}]}`, keying.ErrKeyAbsent},
		{"top-level array", "id", `[{"id":"x"}]`, keying.ErrKeyAbsent},
		{"object", "id", `{"id":{"v":1}}`, keying.ErrKeyNotScalar},
		{"array", "id", `{"id":["x"]}`, keying.ErrKeyNotScalar},
		{"null", "id", `{"id":null}`, keying.ErrKeyNotScalar},
		{"bool", "id", `{"id":true}`, keying.ErrKeyNotScalar},
		{"empty", "id", `{"id":""}`, keying.ErrMalformedKey},
		{"too long", "id", long, keying.ErrMalformedKey},
		{"not printable", "id", `{"id":"caf\u00e9"}`, keying.ErrMalformedKey},
		{"control", "id", `{"id":"a\nb"}`, keying.ErrMalformedKey},
		{"malformed JSON", "id", `{"id":"x"`, keying.ErrNotJSON},
		{"trailing data", "id", `{"id":"x"} {"id":"y"}`, keying.ErrNotJSON},
		{"empty body", "id", ``, keying.ErrNotJSON},
		{"form body", "id", `id=x`, keying.ErrNotJSON},
		{"duplicate name", "id", `{"id":"a","id":"b"}`, keying.ErrDuplicateName},
		{"too deep", "id", strings.Repeat("[", 2000) + strings.Repeat("]", 2000), keying.ErrNotJSON},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k, err := keying.NewKeyPath(c.path)
			if err != nil {
				t.Fatal(err)
			}
			got, err := k.Extract([]byte(c.body))
			if !errors.Is(err, c.want) || got != "" {
				t.Fatalf("Extract = %q, %v; want an error wrapping %v", got, err, c.want)
			}
			if strings.Contains(err.Error(), "aaaa") {
				t.Fatalf("the error holds the value: %v", err)
			}
		})
	}
}

func TestNewKeyPathRefusesBadPaths(t *testing.T) {
	for _, path := range []string{"", "items[].id", "a..b", "[].id", "a]", `a\x`} {
		if _, err := keying.NewKeyPath(path); !errors.Is(err, keying.ErrInvalidPath) || !errors.Is(err, store.ErrInvalid) {
			t.Errorf("NewKeyPath(%q) = %v; want ErrInvalidPath and store.ErrInvalid", path, err)
		}
	}
}

// FuzzKeyPathExtract checks that any body gives a key or an error, never a
// panic, and that a key it gives obeys the key rules.
func FuzzKeyPathExtract(f *testing.F) {
	for _, s := range []string{`{"id":"x"}`, `{"a":{"id":1}}`, `{"id":"\ud800"}`, `{"id`, `{"a":[{"b":"c"}],"id":"z"}`, `"id"`, `{"i\"d":1,"id":2}`} {
		f.Add([]byte(s))
	}
	id, _ := keying.NewKeyPath("id")
	nested, _ := keying.NewKeyPath("a.id")
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, k := range []*keying.KeyPath{id, nested} {
			key, err := k.Extract(body)
			if err != nil {
				continue
			}
			if key == "" || len(key) > keying.MaxKeyLen {
				t.Fatalf("key %q breaks the key rules", key)
			}
			if _, err := keying.ParseKeyHeader(`"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(key) + `"`); err != nil {
				t.Fatalf("key %q is not a valid header key: %v", key, err)
			}
		}
	})
}
