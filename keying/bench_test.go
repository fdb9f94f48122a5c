package keying

import (
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// benchBody returns a JSON order of about 1 KiB.
func benchBody() []byte {
	var b strings.Builder
	b.WriteString(`{"traceId":"4bf92f3577b34da6a3ce929d0e0e4736","timestamp":1700000000123,"customer":{"id":"c-1029","email":"a@example.com"},"items":[`)
	for i := range 8 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"sku":"SKU-%04d","qty":%d,"price":%d.99,"nonce":"n%d","note":"gift wrap, please"}`, i, i+1, 10+i, i)
	}
	b.WriteString(`],"currency":"EUR","total":123.45,"shipping":{"method":"express","address":{"line1":"1 Main St","city":"Springfield","zip":"12345"}}}`)
	return []byte(b.String())
}

func TestBenchBodyIsAboutOneKiB(t *testing.T) {
	body := benchBody()
	require.InDelta(t, 1024, len(body), 200)
	_, err := Canonicalize(body, nil)
	require.NoError(t, err)
}

// BenchmarkSumJSON1KiB drops the members of benchBody that the
// Fingerprinter of idemkit 0.x dropped by default, so that figures compare.
func BenchmarkSumJSON1KiB(b *testing.B) {
	f := newFingerprinter(b, WithVolatile("traceId", "timestamp", "items[].nonce"))
	body := benchBody()
	params := url.Values{"dryRun": {"false"}}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		f.Sum("user-42", "POST /v1/orders", params, body)
	}
}

// smallBody is a typical small order, the size most idempotent requests
// carry.
var smallBody = []byte(`{"sku":"A-1","qty":1,"amount":1000,"currency":"EUR"}`)

func BenchmarkSumJSONSmall(b *testing.B) {
	f := newFingerprinter(b)
	b.SetBytes(int64(len(smallBody)))
	b.ReportAllocs()
	for b.Loop() {
		f.Sum("user-42", "POST /v1/orders", nil, smallBody)
	}
}

// orderBody is the body an HTTP replay through the middleware hashes in
// its benchmark: two members, not in sorted order.
var orderBody = []byte(`{"sku":"book-42","qty":1}`)

// BenchmarkAppendSumOrder is the fingerprint the middleware computes per
// request: no principal, no parameters, a small unsorted object.
func BenchmarkAppendSumOrder(b *testing.B) {
	f := newFingerprinter(b)
	var dst [SumLen]byte
	b.SetBytes(int64(len(orderBody)))
	b.ReportAllocs()
	for b.Loop() {
		f.AppendSum(dst[:0], "", "POST /orders", nil, orderBody)
	}
}

func BenchmarkSumRaw1KiB(b *testing.B) {
	f := newFingerprinter(b)
	body := benchBody()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		f.SumRaw("user-42", "POST /v1/orders", nil, body)
	}
}

func BenchmarkKey4Short(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		Key("idem", "tenant-7", "POST /v1/orders", "3f1c0a9e-77aa-4b1e-9d2c-0c5e1e2f3a4b")
	}
}

func BenchmarkKeyDigestPart(b *testing.B) {
	long := strings.Repeat("k", 200)
	b.ReportAllocs()
	for b.Loop() {
		Key("idem", "tenant-7", "POST /v1/orders", long)
	}
}

func TestKeyShortPartsAllocateOnce(t *testing.T) {
	allocs := testing.AllocsPerRun(100, func() {
		Key("idem", "tenant-7", "POST /v1/orders", "3f1c0a9e-77aa-4b1e-9d2c-0c5e1e2f3a4b")
	})
	require.LessOrEqual(t, allocs, 2.0)
}

func TestKeyDigestPartAllocatesOnce(t *testing.T) {
	long := strings.Repeat("k", 200)
	allocs := testing.AllocsPerRun(100, func() {
		Key("idem", "tenant-7", "POST /v1/orders", long)
	})
	require.LessOrEqual(t, allocs, 1.0, "only the key itself")
}

// benchKey is an Idempotency-Key in UUID layout, as the HTTP benchmarks
// send it.
const benchKey = "0a1b2c3d-0000-4000-8000-00000000002a"

// BenchmarkParseKeyHeaderUUID parses the header value the middleware reads
// per request: a bare key in UUID layout.
func BenchmarkParseKeyHeaderUUID(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseKeyHeader(benchKey); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendKeyHTTP is the engine key the middleware builds per
// request, after the fingerprint: the transport name and the client's key.
func BenchmarkAppendKeyHTTP(b *testing.B) {
	var dst [128]byte
	b.ReportAllocs()
	for b.Loop() {
		AppendKey(dst[:0], "http", benchKey)
	}
}
