package idemhttp_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemhttp"
	"github.com/idemkit/idemkit/store/memstore"
)

// A payment provider retries its notification until it gets a 2xx. The
// route is keyed by the provider's transaction number in the body and
// scoped to the provider by its signature: the retry gets the first
// answer, and a forged notification is refused before it can claim the
// transaction number.
func ExampleCallback() {
	mem, _ := memstore.New()
	engine, _ := idemkit.New(mem, idemkit.WithObserver(nil))
	secret := []byte("whsec_shared-with-the-provider")
	provider, err := idemhttp.SignedPrincipal(idemhttp.Signature{Sender: "payments", Secret: secret})
	if err != nil {
		panic(err)
	}
	guard, err := idemhttp.Idempotency(engine, idemhttp.WithPrincipal(provider),
		idemhttp.Callback(0), idemhttp.WithKeyFrom(idemhttp.KeyFromJSON("out_trade_no")))
	if err != nil {
		panic(err)
	}
	paid := 0
	h := guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paid++
		fmt.Fprintf(w, "paid %d", paid)
	}))

	// The provider signs the raw body with the shared secret.
	signed := func(body string) map[string]string {
		m := hmac.New(sha256.New, secret)
		m.Write([]byte(body))
		return map[string]string{"X-Signature": "sha256=" + hex.EncodeToString(m.Sum(nil))}
	}
	body := `{"out_trade_no":"T-1001","status":"SUCCESS"}`

	show(post(h, "/pay/notify", "", map[string]string{"X-Signature": "sha256=00"}, body)) // forged
	show(post(h, "/pay/notify", "", signed(body), body))
	show(post(h, "/pay/notify", "", signed(body), body)) // the provider's retry
	show(post(h, "/pay/notify", "", signed(`{"status":"SUCCESS"}`), `{"status":"SUCCESS"}`))
	// Output:
	// 401 https://idemkit.dev/problems/unauthenticated
	// 200  replayed: false paid 1
	// 200  replayed: true paid 1
	// 400 https://idemkit.dev/problems/key-missing
}
