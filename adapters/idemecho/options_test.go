package idemecho_test

import (
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/labstack/echo/v5"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemecho"
	"github.com/idemkit/idemkit/internal/options/optionstest"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/keying"
)

// TestOptionsFollowTheOptionRule: every option is accepted when valid and
// refused, naming itself, when not, given to a constructor it does not
// apply to, or given twice where it would replace the first; a nil option
// is refused by its position; every error is reported; every error wraps
// idemkit.ErrInvalid.
func TestOptionsFollowTheOptionRule(t *testing.T) {
	byUser := idemecho.WithPrincipal(idemecho.TrustedHeaderPrincipal("X-User-Id"))
	type ctor func(*idemkit.Engine, ...idemecho.Option) error
	of := func(f func(*idemkit.Engine, ...idemecho.Option) (echo.MiddlewareFunc, error)) ctor {
		return func(e *idemkit.Engine, opts ...idemecho.Option) error { _, err := f(e, opts...); return err }
	}
	key, window, token := of(idemecho.Idempotency), of(idemecho.Window), of(idemecho.Token)
	issuer := func(e *idemkit.Engine, opts ...idemecho.Option) error {
		_, err := idemecho.TokenIssuer(e, opts...)
		return err
	}
	skip := func(*echo.Context) bool { return false }
	fp, err := keying.NewFingerprinter(keying.WithInclude("sku"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, option string // option names the exported option the case covers
		ctor         ctor
		opts         []idemecho.Option
		errs         []string // what the constructor's error says, or nil when it accepts opts
	}{
		{name: "principal", option: "WithPrincipal", ctor: key, opts: []idemecho.Option{byUser}},
		{name: "no principal", option: "WithPrincipal", ctor: window, errs: []string{"WithPrincipal is required"}},
		{name: "nil principal", option: "WithPrincipal", ctor: token, opts: []idemecho.Option{idemecho.WithPrincipal(nil)}, errs: []string{"WithPrincipal: nil"}},
		{name: "principal twice", option: "WithPrincipal", ctor: key, opts: []idemecho.Option{byUser, byUser}, errs: []string{"WithPrincipal given twice"}},
		{name: "key header", option: "WithKeyHeader", ctor: key, opts: []idemecho.Option{byUser, idemecho.WithKeyHeader("X-Key")}},
		{name: "bad key header", option: "WithKeyHeader", ctor: key, opts: []idemecho.Option{byUser, idemecho.WithKeyHeader("bad header")}, errs: []string{"WithKeyHeader: ", `"bad header"`}},
		{name: "key header in Window", option: "WithKeyHeader", ctor: window, opts: []idemecho.Option{byUser, idemecho.WithKeyHeader("X-Key")}, errs: []string{"WithKeyHeader applies to Idempotency only, not Window"}},
		{name: "key header twice", option: "WithKeyHeader", ctor: key, opts: []idemecho.Option{byUser, idemecho.WithKeyHeader("A"), idemecho.WithKeyHeader("B")}, errs: []string{"WithKeyHeader given twice"}},
		{name: "token header", option: "WithTokenHeader", ctor: token, opts: []idemecho.Option{byUser, idemecho.WithTokenHeader("X-Token")}},
		{name: "token header in Idempotency", option: "WithTokenHeader", ctor: key, opts: []idemecho.Option{byUser, idemecho.WithTokenHeader("X-Token")}, errs: []string{"WithTokenHeader applies to Token only"}},
		{name: "bad token header", option: "WithTokenHeader", ctor: token, opts: []idemecho.Option{byUser, idemecho.WithTokenHeader("")}, errs: []string{"WithTokenHeader: "}},
		{name: "methods", option: "WithMethods", ctor: window, opts: []idemecho.Option{byUser, idemecho.WithMethods(http.MethodPut)}},
		{name: "no methods", option: "WithMethods", ctor: key, opts: []idemecho.Option{byUser, idemecho.WithMethods()}, errs: []string{"WithMethods: no methods"}},
		{name: "bad method", option: "WithMethods", ctor: key, opts: []idemecho.Option{byUser, idemecho.WithMethods("PO ST")}, errs: []string{"WithMethods: ", `"PO ST"`}},
		{name: "methods in TokenIssuer", option: "WithMethods", ctor: issuer, opts: []idemecho.Option{byUser, idemecho.WithMethods("POST")}, errs: []string{"not TokenIssuer"}},
		{name: "optional key", option: "WithOptionalKey", ctor: key, opts: []idemecho.Option{byUser, idemecho.WithOptionalKey()}},
		{name: "optional key in Token", option: "WithOptionalKey", ctor: token, opts: []idemecho.Option{byUser, idemecho.WithOptionalKey()}, errs: []string{"WithOptionalKey applies to Idempotency only, not Token"}},
		{name: "replay headers", option: "WithReplayHeaders", ctor: token, opts: []idemecho.Option{byUser, idemecho.WithReplayHeaders("X-Order")}},
		{name: "bad replay header", option: "WithReplayHeaders", ctor: key, opts: []idemecho.Option{byUser, idemecho.WithReplayHeaders("a:b")}, errs: []string{"WithReplayHeaders: ", `"a:b"`}},
		{name: "cookie replayed", option: "WithReplayHeaders", ctor: key, opts: []idemecho.Option{byUser, idemecho.WithReplayHeaders("set-cookie")}, errs: []string{"WithReplayHeaders: ", "cannot be replayed"}},
		{name: "replay headers in Window", option: "WithReplayHeaders", ctor: window, opts: []idemecho.Option{byUser, idemecho.WithReplayHeaders("X-Order")}, errs: []string{"not Window"}},
		{name: "store policy", option: "WithStorePolicy", ctor: window, opts: []idemecho.Option{byUser, idemecho.WithStorePolicy(idemecho.DefaultStorePolicy)}},
		{name: "nil store policy", option: "WithStorePolicy", ctor: key, opts: []idemecho.Option{byUser, idemecho.WithStorePolicy(nil)}, errs: []string{"WithStorePolicy: "}},
		{name: "max stored", option: "WithMaxStoredResponse", ctor: key, opts: []idemecho.Option{byUser, idemecho.WithMaxStoredResponse(1)}},
		{name: "zero max stored", option: "WithMaxStoredResponse", ctor: key, opts: []idemecho.Option{byUser, idemecho.WithMaxStoredResponse(0)}, errs: []string{"WithMaxStoredResponse(0): "}},
		{name: "max body", option: "WithMaxBody", ctor: window, opts: []idemecho.Option{byUser, idemecho.WithMaxBody(1)}},
		{name: "negative max body", option: "WithMaxBody", ctor: key, opts: []idemecho.Option{byUser, idemecho.WithMaxBody(-1)}, errs: []string{"WithMaxBody(-1): "}},
		{name: "max body in Token", option: "WithMaxBody", ctor: token, opts: []idemecho.Option{byUser, idemecho.WithMaxBody(1)}, errs: []string{"not Token"}},
		{name: "volatile", option: "WithVolatile", ctor: key, opts: []idemecho.Option{byUser, idemecho.WithVolatile("ts")}},
		{name: "bad volatile", option: "WithVolatile", ctor: key, opts: []idemecho.Option{byUser, idemecho.WithVolatile("items[]")}, errs: []string{"WithVolatile: "}},
		{name: "volatile in Token", option: "WithVolatile", ctor: token, opts: []idemecho.Option{byUser, idemecho.WithVolatile("ts")}, errs: []string{"not Token"}},
		{name: "engine options", option: "WithEngineOptions", ctor: issuer, opts: []idemecho.Option{byUser, idemecho.WithEngineOptions(idemkit.WithRetryHint(time.Second))}},
		{name: "bad engine options", option: "WithEngineOptions", ctor: key, opts: []idemecho.Option{byUser, idemecho.WithEngineOptions(idemkit.WithLease(-1))}, errs: []string{"WithEngineOptions: "}},
		{name: "logger", option: "WithLogger", ctor: key, opts: []idemecho.Option{byUser, idemecho.WithLogger(slog.Default())}},
		{name: "nil logger", option: "WithLogger", ctor: key, opts: []idemecho.Option{byUser, idemecho.WithLogger(nil)}, errs: []string{"WithLogger: "}},
		{name: "logger twice", option: "WithLogger", ctor: key, opts: []idemecho.Option{byUser, idemecho.WithLogger(slog.Default()), idemecho.WithLogger(slog.Default())}, errs: []string{"WithLogger given twice"}},
		{name: "skipper", option: "WithSkipper", ctor: window, opts: []idemecho.Option{byUser, idemecho.WithSkipper(skip)}},
		{name: "nil skipper", option: "WithSkipper", ctor: key, opts: []idemecho.Option{byUser, idemecho.WithSkipper(nil)}, errs: []string{"WithSkipper: nil"}},
		{name: "skipper in TokenIssuer", option: "WithSkipper", ctor: issuer, opts: []idemecho.Option{byUser, idemecho.WithSkipper(skip)}, errs: []string{"WithSkipper applies to", "not TokenIssuer"}},
		{name: "skipper twice", option: "WithSkipper", ctor: token, opts: []idemecho.Option{byUser, idemecho.WithSkipper(skip), idemecho.WithSkipper(skip)}, errs: []string{"WithSkipper given twice"}},
		{name: "HTTP errors", option: "WithHTTPErrors", ctor: issuer, opts: []idemecho.Option{byUser, idemecho.WithHTTPErrors()}},
		{name: "HTTP errors twice", option: "WithHTTPErrors", ctor: key, opts: []idemecho.Option{byUser, idemecho.WithHTTPErrors(), idemecho.WithHTTPErrors()}, errs: []string{"WithHTTPErrors given twice"}},
		{name: "unstored", option: "WithUnstored", ctor: token, opts: []idemecho.Option{byUser, idemecho.WithUnstored(idemecho.ReleaseKey, idemecho.KeepTerminal)}},
		{name: "bad unstored", option: "WithUnstored", ctor: key, opts: []idemecho.Option{byUser, idemecho.WithUnstored(idemecho.ReleaseKey+1, idemecho.KeepTerminal)}, errs: []string{"WithUnstored(2, 0): unknown Unstored value"}},
		{name: "unstored in Window", option: "WithUnstored", ctor: window, opts: []idemecho.Option{byUser, idemecho.WithUnstored(idemecho.ReleaseKey, idemecho.ReleaseKey)}, errs: []string{"WithUnstored applies to Idempotency and Token only, not Window"}},
		{name: "unstored twice", option: "WithUnstored", ctor: key, opts: []idemecho.Option{byUser, idemecho.WithUnstored(idemecho.ReleaseKey, idemecho.ReleaseKey), idemecho.WithUnstored(idemecho.KeepTerminal, idemecho.KeepTerminal)}, errs: []string{"WithUnstored given twice"}},
		{name: "query params", option: "WithQueryParams", ctor: window, opts: []idemecho.Option{byUser, idemecho.WithQueryParams("express")}},
		{name: "no query params", option: "WithQueryParams", ctor: key, opts: []idemecho.Option{byUser, idemecho.WithQueryParams()}},
		{name: "empty query param", option: "WithQueryParams", ctor: key, opts: []idemecho.Option{byUser, idemecho.WithQueryParams("")}, errs: []string{"WithQueryParams: empty parameter name"}},
		{name: "query params in Token", option: "WithQueryParams", ctor: token, opts: []idemecho.Option{byUser, idemecho.WithQueryParams("a")}, errs: []string{"WithQueryParams applies to Idempotency and Window only, not Token"}},
		{name: "query params twice", option: "WithQueryParams", ctor: key, opts: []idemecho.Option{byUser, idemecho.WithQueryParams("a"), idemecho.WithQueryParams("b")}, errs: []string{"WithQueryParams given twice"}},
		{name: "fingerprinter", option: "WithFingerprinter", ctor: window, opts: []idemecho.Option{byUser, idemecho.WithFingerprinter(fp)}},
		{name: "nil fingerprinter", option: "WithFingerprinter", ctor: key, opts: []idemecho.Option{byUser, idemecho.WithFingerprinter(nil)}, errs: []string{"WithFingerprinter: nil fingerprinter"}},
		{name: "fingerprinter in Token", option: "WithFingerprinter", ctor: token, opts: []idemecho.Option{byUser, idemecho.WithFingerprinter(fp)}, errs: []string{"WithFingerprinter applies to Idempotency and Window only, not Token"}},
		{name: "fingerprinter twice", option: "WithFingerprinter", ctor: key, opts: []idemecho.Option{byUser, idemecho.WithFingerprinter(fp), idemecho.WithFingerprinter(fp)}, errs: []string{"WithFingerprinter given twice"}},
		{name: "fingerprinter and volatile", option: "WithFingerprinter", ctor: key, opts: []idemecho.Option{byUser, idemecho.WithFingerprinter(fp), idemecho.WithVolatile("ts")}, errs: []string{"WithVolatile and WithFingerprinter cannot be combined"}},
		{name: "replay header", option: "WithReplayHeader", ctor: token, opts: []idemecho.Option{byUser, idemecho.WithReplayHeader("X-Replay")}},
		{name: "bad replay header", option: "WithReplayHeader", ctor: key, opts: []idemecho.Option{byUser, idemecho.WithReplayHeader("x y")}, errs: []string{"WithReplayHeader: ", `"x y"`}},
		{name: "replay header in Window", option: "WithReplayHeader", ctor: window, opts: []idemecho.Option{byUser, idemecho.WithReplayHeader("X-Replay")}, errs: []string{"WithReplayHeader applies to Idempotency and Token only, not Window"}},
		{name: "replay header twice", option: "WithReplayHeader", ctor: key, opts: []idemecho.Option{byUser, idemecho.WithReplayHeader("A"), idemecho.WithReplayHeader("B")}, errs: []string{"WithReplayHeader given twice"}},
		{name: "replay header replayed", option: "WithReplayHeader", ctor: key, opts: []idemecho.Option{byUser, idemecho.WithReplayHeader("x-replay"), idemecho.WithReplayHeaders("X-Replay")}, errs: []string{"header X-Replay cannot be replayed"}},
		{name: "problem base", option: "WithProblemBase", ctor: issuer, opts: []idemecho.Option{byUser, idemecho.WithProblemBase("https://errors.example.com/")}},
		{name: "relative problem base", option: "WithProblemBase", ctor: key, opts: []idemecho.Option{byUser, idemecho.WithProblemBase("/problems/")}, errs: []string{`WithProblemBase: "/problems/" is not an absolute URI`}},
		{name: "problem base twice", option: "WithProblemBase", ctor: window, opts: []idemecho.Option{byUser, idemecho.WithProblemBase("urn:a:"), idemecho.WithProblemBase("urn:b:")}, errs: []string{"WithProblemBase given twice"}},
		{name: "wait", option: "WithWait", ctor: token, opts: []idemecho.Option{byUser, idemecho.WithWait(0)}},
		{name: "short wait", option: "WithWait", ctor: key, opts: []idemecho.Option{byUser, idemecho.WithWait(time.Microsecond)}, errs: []string{"WithWait(1µs): poll interval must be"}},
		{name: "wait in Window", option: "WithWait", ctor: window, opts: []idemecho.Option{byUser, idemecho.WithWait(time.Millisecond)}, errs: []string{"WithWait applies to Idempotency and Token only, not Window"}},
		{name: "wait twice", option: "WithWait", ctor: key, opts: []idemecho.Option{byUser, idemecho.WithWait(time.Millisecond), idemecho.WithWait(time.Second)}, errs: []string{"WithWait given twice"}},
		{name: "nil", ctor: key, opts: []idemecho.Option{byUser, nil}, errs: []string{"idemecho: store: invalid argument: option 2 is nil"}},
		{name: "every error", ctor: key, opts: []idemecho.Option{nil, byUser, idemecho.WithMaxStoredResponse(-1), idemecho.WithLogger(nil), nil},
			errs: []string{"option 1 is nil", "WithMaxStoredResponse(-1): ", "WithLogger: ", "option 5 is nil"}},
	}
	e := testkit.NewEngine(t)
	var covered []string
	for _, c := range cases {
		covered = append(covered, c.option)
		err := c.ctor(e, c.opts...)
		if c.errs == nil {
			if err != nil {
				t.Errorf("%s: %v, want it accepted", c.name, err)
			}
			continue
		}
		optionstest.Refused(t, c.name, err, c.errs...)
	}
	optionstest.Covered(t, optionstest.Exported(t, ".", "Option"), covered)
	if _, err := idemecho.Idempotency(nil, byUser); err == nil {
		t.Error("a nil engine was accepted")
	}
}
