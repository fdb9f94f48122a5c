package keying_test

import (
	"errors"
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
	// Key mode: the whole payload counts, so only spelling is ignored.
	f, err := keying.NewFingerprinter()
	if err != nil {
		panic(err)
	}
	params := url.Values{"dryRun": {"false"}}
	a := f.Sum("user-42", "POST /v1/orders", params, []byte(`{"amount": 10.0, "sku": "A-1", "sign": "+"}`))
	b := f.Sum("user-42", "POST /v1/orders", params, []byte(`{"sign":"+","sku":"A-1","amount":1e1}`))
	c := f.Sum("user-42", "POST /v1/orders", params, []byte(`{"sign":"-","sku":"A-1","amount":10}`))
	fmt.Println(len(a), a == b, a == c)
	// Output: 22 true false
}

func ExampleWithVolatile() {
	// Window mode: members that change between two submits of one form.
	f, err := keying.NewFingerprinter(keying.WithVolatile(keying.WindowVolatile()...), keying.WithVolatile("items[].requestTime"))
	if err != nil {
		panic(err)
	}
	a := f.Sum("user-42", "POST /v1/orders", nil, []byte(`{"items":[{"sku":"A-1","requestTime":1}],"traceId":"t-1"}`))
	b := f.Sum("user-42", "POST /v1/orders", nil, []byte(`{"items":[{"sku":"A-1","requestTime":2}],"traceId":"t-2"}`))
	fmt.Println(a == b)
	_, err = keying.NewFingerprinter(keying.WithVolatile("items[]"))
	fmt.Println(errors.Is(err, keying.ErrInvalidPath))
	// Output:
	// true
	// true
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
	out, err := keying.Canonicalize(body, []string{"nonce"})
	if err != nil {
		panic(err)
	}
	fmt.Println(string(out))
	// Output: {"a":"A","b":[3,1.5,200],"big":12345678901234567890123}
}

func ExampleCheckClientKey() {
	fmt.Println(keying.CheckClientKey("3f1c0a9e-77aa-4b1e-9d2c-0c5e1e2f3a4b"))
	fmt.Println(errors.Is(keying.CheckClientKey("two\nlines"), keying.ErrMalformedKey))
	// Output:
	// <nil>
	// true
}
