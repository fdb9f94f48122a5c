package keying_test

import (
	"fmt"
	"net/url"
	"regexp"

	"github.com/idemkit/idemkit/keying"
)

func ExampleKey() {
	fmt.Println(keying.Key("idem", "tenant-7", "POST /v1/orders/{id}", "3f1c0a"))
	fmt.Println(keying.Key("idem", "a:b"))
	fmt.Println(keying.Key("idem", "a", "b"))
	fmt.Println(keying.Key("idem", ""))
	fmt.Println(keying.Key("idem", keying.Hidden("alice@example.com"))[:6] + "...")
	// Output:
	// idem:tenant-7:POST%20/v1/orders/%7Bid%7D:3f1c0a
	// idem:a%3Ab
	// idem:a:b
	// idem:%
	// idem:#...
}

func ExampleFingerprinter_Sum() {
	f := keying.NewFingerprinter(keying.WithExtraVolatile("requestTime"))
	params := url.Values{"dryRun": {"false"}}
	a := f.Sum("user-42", "POST /v1/orders", params,
		[]byte(`{"amount": 10.0, "sku": "A-1", "traceId": "t-1"}`))
	b := f.Sum("user-42", "POST /v1/orders", params,
		[]byte(`{"sku":"A-1","amount":1e1,"traceId":"t-2","requestTime":1700000000}`))
	c := f.Sum("user-42", "POST /v1/orders", params,
		[]byte(`{"sku":"A-1","amount":11}`))
	fmt.Println(len(a), a == b, a == c)
	// Output: 64 true false
}

func ExampleNewToken() {
	tok, err := keying.NewToken()
	if err != nil {
		panic(err)
	}
	fmt.Println(len(tok), regexp.MustCompile(`^[A-Za-z0-9_-]+$`).MatchString(tok))
	// Output: 43 true
}

func ExampleCanonicalize() {
	body := []byte(`{ "b": [3, 1.50, 2e2], "a": "\u0041", "nonce": "x", "big": 12345678901234567890123 }`)
	out, err := keying.Canonicalize(body, keying.DefaultVolatile())
	if err != nil {
		panic(err)
	}
	fmt.Println(string(out))
	// Output: {"a":"A","b":[3,1.5,200],"big":12345678901234567890123}
}
