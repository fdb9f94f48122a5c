package main

import (
	"html/template"
	"net/http"
	"strings"

	"github.com/idemkit/idemkit/adapters/idemhttp"
)

// demoProblemTypes document the demo's own problem types, as
// idemhttp.ProblemTypes documents the middleware's.
var demoProblemTypes = []idemhttp.ProblemType{
	{Name: "invalid-body", Status: http.StatusBadRequest, Title: "Invalid order",
		Description: `The body is not a single JSON object {"sku": "...", "qty": N} with a non-empty SKU and a positive integer quantity, or it has other members. Fix the request: a retry of the same body gets the same answer.`},
	{Name: "invalid-hook", Status: http.StatusBadRequest, Title: "Invalid test header",
		Description: "An X-Demo-Delay, X-Demo-Stall or X-Demo-Fail header is malformed or out of range (delays are at most 5s), or X-Demo-Pause-After names no step boundary. Fix or drop the header."},
	{Name: "key-reused", Status: http.StatusUnprocessableEntity, Title: "Order key reused for a different order",
		Description: "The order store already holds a different order under this idempotency key. A retry must repeat the first order exactly; a new order needs a new key."},
	{Name: "orders-full", Status: http.StatusInsufficientStorage, Title: "Order list full",
		Description: "The demo keeps its orders in memory with this store, and the list is full. Restart the demo, or run it with a bolt:// store, which keeps the orders on disk. Paid orders (POST /orders/paid) are at most 200 per user on every store."},
	{Name: "demo-failure", Status: http.StatusInternalServerError, Title: "Failure asked for",
		Description: "The request carried X-Demo-Fail, so the order failed on purpose and none was created. The failure is not stored: a retry with the same idempotency key and without the header creates the order (a one-time token, though, is spent)."},
	{Name: "internal", Status: http.StatusInternalServerError, Title: "Internal error",
		Description: "The order could not be stored or read because of an unexpected server error, logged by the demo. Retry later with the same idempotency key."},
	{Name: "payments-off", Status: http.StatusServiceUnavailable, Title: "No payment provider",
		Description: "POST /orders/paid needs a payment provider: run idemdemo provider and start the demo with -provider URL. Nothing was reserved or charged."},
	{Name: "payment-failed", Status: http.StatusBadGateway, Title: "Payment refused",
		Description: "The payment provider refused the charge; the stock stays reserved and nothing is recorded as paid. Retry with the same idempotency key: the order resumes at the charge, with the same derived key."},
	{Name: "crash-hooks-off", Status: http.StatusBadRequest, Title: "Crash hooks not enabled",
		Description: "X-Demo-Pause-After and X-Demo-Pause-For pause POST /orders/paid at a step boundary for crash tests, and only with the -crash-hooks flag. Drop the headers."},
	{Name: "stale-fence", Status: http.StatusConflict, Title: "Stale fencing token",
		Description: "The payment provider has seen a higher fencing token for this idempotency key: the caller's claim was taken over after its lease ended, and the new owner has been here. Do not retry this call; the new owner finishes the order."},
	{Name: "malformed-fence", Status: http.StatusBadRequest, Title: "Malformed fencing token",
		Description: "The payment provider's Idempotency-Fence header is not one decimal number of at most 64 bits, or is repeated. Send the token idemhttp.Transport forwards, once."},
	{Name: "cancelled", Status: http.StatusServiceUnavailable, Title: "Request cancelled",
		Description: "The request was cancelled (the client went away or the demo is shutting down) before the order was created. Retry with the same idempotency key."},
}

// problemPages serves GET /problems/{name} (idemhttp's types, whose URIs
// are idemhttp.DefaultProblemBase + name) and GET /problems/demo/{name}
// (the demo's own): a page per type with its title, status and what a
// client should do. Other names are 404.
type problemPages struct {
	middleware, demo map[string]idemhttp.ProblemType
}

func newProblemPages() problemPages {
	p := problemPages{middleware: map[string]idemhttp.ProblemType{}, demo: map[string]idemhttp.ProblemType{}}
	for _, pt := range idemhttp.ProblemTypes() {
		p.middleware[pt.Name] = pt
	}
	for _, pt := range demoProblemTypes {
		p.demo[pt.Name] = pt
	}
	return p
}

// register adds the pages' routes to mux, at the paths of the type URIs.
func (p problemPages) register(mux *http.ServeMux) {
	mux.HandleFunc("GET "+problemPath(idemhttp.DefaultProblemBase)+"{name}", func(w http.ResponseWriter, r *http.Request) {
		servePage(w, r, p.middleware, idemhttp.DefaultProblemBase)
	})
	mux.HandleFunc("GET "+problemPath(demoProblemBase)+"{name}", func(w http.ResponseWriter, r *http.Request) {
		servePage(w, r, p.demo, demoProblemBase)
	})
}

// problemPath is the path of a problem type base URI, such as
// "/problems/".
func problemPath(base string) string {
	_, path, _ := strings.Cut(strings.TrimPrefix(base, "https://"), "/")
	return "/" + path
}

var problemPage = template.Must(template.New("problem").Parse(`<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>{{.Title}}</title></head>
<body>
<h1>{{.Title}}</h1>
<p>HTTP status <strong>{{.Status}}</strong>. Problem type <code>{{.URI}}</code>, sent as application/problem+json.</p>
<h2>What to do</h2>
<p>{{.Description}}</p>
</body>
</html>
`))

// servePage answers r with the page of the type named by its path among
// types, whose URIs are base + name.
func servePage(w http.ResponseWriter, r *http.Request, types map[string]idemhttp.ProblemType, base string) {
	pt, ok := types[r.PathValue("name")]
	if !ok {
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", "default-src 'none'")
	_ = problemPage.Execute(w, struct {
		idemhttp.ProblemType
		URI string
	}{pt, base + pt.Name})
}
