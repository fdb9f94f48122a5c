package idemgin_test

import (
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemgin"
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
	byUser := idemgin.WithPrincipal(idemgin.TrustedHeaderPrincipal("X-User-Id"))
	type ctor func(*idemkit.Engine, ...idemgin.Option) (gin.HandlerFunc, error)
	key, window, token, issuer := ctor(idemgin.Idempotency), ctor(idemgin.Window), ctor(idemgin.Token), ctor(idemgin.TokenIssuer)
	fp, err := keying.NewFingerprinter(keying.WithInclude("sku"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, option string // option names the exported option the case covers
		ctor         ctor
		opts         []idemgin.Option
		errs         []string // what the constructor's error says, or nil when it accepts opts
	}{
		{name: "principal", option: "WithPrincipal", ctor: key, opts: []idemgin.Option{byUser}},
		{name: "no principal", option: "WithPrincipal", ctor: window, errs: []string{"WithPrincipal is required"}},
		{name: "nil principal", option: "WithPrincipal", ctor: token, opts: []idemgin.Option{idemgin.WithPrincipal(nil)}, errs: []string{"WithPrincipal: nil"}},
		{name: "principal twice", option: "WithPrincipal", ctor: key, opts: []idemgin.Option{byUser, byUser}, errs: []string{"WithPrincipal given twice"}},
		{name: "key header", option: "WithKeyHeader", ctor: key, opts: []idemgin.Option{byUser, idemgin.WithKeyHeader("X-Key")}},
		{name: "bad key header", option: "WithKeyHeader", ctor: key, opts: []idemgin.Option{byUser, idemgin.WithKeyHeader("bad header")}, errs: []string{"WithKeyHeader: ", `"bad header"`}},
		{name: "key header in Window", option: "WithKeyHeader", ctor: window, opts: []idemgin.Option{byUser, idemgin.WithKeyHeader("X-Key")}, errs: []string{"WithKeyHeader applies to Idempotency only, not Window"}},
		{name: "key header twice", option: "WithKeyHeader", ctor: key, opts: []idemgin.Option{byUser, idemgin.WithKeyHeader("A"), idemgin.WithKeyHeader("B")}, errs: []string{"WithKeyHeader given twice"}},
		{name: "token header", option: "WithTokenHeader", ctor: token, opts: []idemgin.Option{byUser, idemgin.WithTokenHeader("X-Token")}},
		{name: "token header in Idempotency", option: "WithTokenHeader", ctor: key, opts: []idemgin.Option{byUser, idemgin.WithTokenHeader("X-Token")}, errs: []string{"WithTokenHeader applies to Token only"}},
		{name: "bad token header", option: "WithTokenHeader", ctor: token, opts: []idemgin.Option{byUser, idemgin.WithTokenHeader("")}, errs: []string{"WithTokenHeader: "}},
		{name: "methods", option: "WithMethods", ctor: window, opts: []idemgin.Option{byUser, idemgin.WithMethods(http.MethodPut)}},
		{name: "no methods", option: "WithMethods", ctor: key, opts: []idemgin.Option{byUser, idemgin.WithMethods()}, errs: []string{"WithMethods: no methods"}},
		{name: "bad method", option: "WithMethods", ctor: key, opts: []idemgin.Option{byUser, idemgin.WithMethods("PO ST")}, errs: []string{"WithMethods: ", `"PO ST"`}},
		{name: "methods in TokenIssuer", option: "WithMethods", ctor: issuer, opts: []idemgin.Option{byUser, idemgin.WithMethods("POST")}, errs: []string{"not TokenIssuer"}},
		{name: "optional key", option: "WithOptionalKey", ctor: key, opts: []idemgin.Option{byUser, idemgin.WithOptionalKey()}},
		{name: "optional key in Token", option: "WithOptionalKey", ctor: token, opts: []idemgin.Option{byUser, idemgin.WithOptionalKey()}, errs: []string{"WithOptionalKey applies to Idempotency only, not Token"}},
		{name: "replay headers", option: "WithReplayHeaders", ctor: token, opts: []idemgin.Option{byUser, idemgin.WithReplayHeaders("X-Order")}},
		{name: "bad replay header", option: "WithReplayHeaders", ctor: key, opts: []idemgin.Option{byUser, idemgin.WithReplayHeaders("a:b")}, errs: []string{"WithReplayHeaders: ", `"a:b"`}},
		{name: "cookie replayed", option: "WithReplayHeaders", ctor: key, opts: []idemgin.Option{byUser, idemgin.WithReplayHeaders("set-cookie")}, errs: []string{"WithReplayHeaders: ", "cannot be replayed"}},
		{name: "replay headers in Window", option: "WithReplayHeaders", ctor: window, opts: []idemgin.Option{byUser, idemgin.WithReplayHeaders("X-Order")}, errs: []string{"not Window"}},
		{name: "store policy", option: "WithStorePolicy", ctor: window, opts: []idemgin.Option{byUser, idemgin.WithStorePolicy(idemgin.DefaultStorePolicy)}},
		{name: "nil store policy", option: "WithStorePolicy", ctor: key, opts: []idemgin.Option{byUser, idemgin.WithStorePolicy(nil)}, errs: []string{"WithStorePolicy: "}},
		{name: "max stored", option: "WithMaxStoredResponse", ctor: key, opts: []idemgin.Option{byUser, idemgin.WithMaxStoredResponse(1)}},
		{name: "zero max stored", option: "WithMaxStoredResponse", ctor: key, opts: []idemgin.Option{byUser, idemgin.WithMaxStoredResponse(0)}, errs: []string{"WithMaxStoredResponse(0): "}},
		{name: "max body", option: "WithMaxBody", ctor: window, opts: []idemgin.Option{byUser, idemgin.WithMaxBody(1)}},
		{name: "negative max body", option: "WithMaxBody", ctor: key, opts: []idemgin.Option{byUser, idemgin.WithMaxBody(-1)}, errs: []string{"WithMaxBody(-1): "}},
		{name: "max body in Token", option: "WithMaxBody", ctor: token, opts: []idemgin.Option{byUser, idemgin.WithMaxBody(1)}, errs: []string{"not Token"}},
		{name: "volatile", option: "WithVolatile", ctor: key, opts: []idemgin.Option{byUser, idemgin.WithVolatile("ts")}},
		{name: "bad volatile", option: "WithVolatile", ctor: key, opts: []idemgin.Option{byUser, idemgin.WithVolatile("items[]")}, errs: []string{"WithVolatile: "}},
		{name: "volatile in Token", option: "WithVolatile", ctor: token, opts: []idemgin.Option{byUser, idemgin.WithVolatile("ts")}, errs: []string{"not Token"}},
		{name: "engine options", option: "WithEngineOptions", ctor: issuer, opts: []idemgin.Option{byUser, idemgin.WithEngineOptions(idemkit.WithRetryHint(time.Second))}},
		{name: "bad engine options", option: "WithEngineOptions", ctor: key, opts: []idemgin.Option{byUser, idemgin.WithEngineOptions(idemkit.WithLease(-1))}, errs: []string{"WithEngineOptions: "}},
		{name: "logger", option: "WithLogger", ctor: key, opts: []idemgin.Option{byUser, idemgin.WithLogger(slog.Default())}},
		{name: "nil logger", option: "WithLogger", ctor: key, opts: []idemgin.Option{byUser, idemgin.WithLogger(nil)}, errs: []string{"WithLogger: "}},
		{name: "logger twice", option: "WithLogger", ctor: key, opts: []idemgin.Option{byUser, idemgin.WithLogger(slog.Default()), idemgin.WithLogger(slog.Default())}, errs: []string{"WithLogger given twice"}},
		{name: "unstored", option: "WithUnstored", ctor: token, opts: []idemgin.Option{byUser, idemgin.WithUnstored(idemgin.ReleaseKey, idemgin.KeepTerminal)}},
		{name: "bad unstored", option: "WithUnstored", ctor: key, opts: []idemgin.Option{byUser, idemgin.WithUnstored(idemgin.ReleaseKey+1, idemgin.KeepTerminal)}, errs: []string{"WithUnstored(2, 0): unknown Unstored value"}},
		{name: "unstored in Window", option: "WithUnstored", ctor: window, opts: []idemgin.Option{byUser, idemgin.WithUnstored(idemgin.ReleaseKey, idemgin.ReleaseKey)}, errs: []string{"WithUnstored applies to Idempotency and Token only, not Window"}},
		{name: "unstored twice", option: "WithUnstored", ctor: key, opts: []idemgin.Option{byUser, idemgin.WithUnstored(idemgin.ReleaseKey, idemgin.ReleaseKey), idemgin.WithUnstored(idemgin.KeepTerminal, idemgin.KeepTerminal)}, errs: []string{"WithUnstored given twice"}},
		{name: "query params", option: "WithQueryParams", ctor: window, opts: []idemgin.Option{byUser, idemgin.WithQueryParams("express")}},
		{name: "no query params", option: "WithQueryParams", ctor: key, opts: []idemgin.Option{byUser, idemgin.WithQueryParams()}},
		{name: "empty query param", option: "WithQueryParams", ctor: key, opts: []idemgin.Option{byUser, idemgin.WithQueryParams("")}, errs: []string{"WithQueryParams: empty parameter name"}},
		{name: "query params in Token", option: "WithQueryParams", ctor: token, opts: []idemgin.Option{byUser, idemgin.WithQueryParams("a")}, errs: []string{"WithQueryParams applies to Idempotency and Window only, not Token"}},
		{name: "query params twice", option: "WithQueryParams", ctor: key, opts: []idemgin.Option{byUser, idemgin.WithQueryParams("a"), idemgin.WithQueryParams("b")}, errs: []string{"WithQueryParams given twice"}},
		{name: "fingerprinter", option: "WithFingerprinter", ctor: window, opts: []idemgin.Option{byUser, idemgin.WithFingerprinter(fp)}},
		{name: "nil fingerprinter", option: "WithFingerprinter", ctor: key, opts: []idemgin.Option{byUser, idemgin.WithFingerprinter(nil)}, errs: []string{"WithFingerprinter: nil fingerprinter"}},
		{name: "fingerprinter in Token", option: "WithFingerprinter", ctor: token, opts: []idemgin.Option{byUser, idemgin.WithFingerprinter(fp)}, errs: []string{"WithFingerprinter applies to Idempotency and Window only, not Token"}},
		{name: "fingerprinter twice", option: "WithFingerprinter", ctor: key, opts: []idemgin.Option{byUser, idemgin.WithFingerprinter(fp), idemgin.WithFingerprinter(fp)}, errs: []string{"WithFingerprinter given twice"}},
		{name: "fingerprinter and volatile", option: "WithFingerprinter", ctor: key, opts: []idemgin.Option{byUser, idemgin.WithFingerprinter(fp), idemgin.WithVolatile("ts")}, errs: []string{"WithVolatile and WithFingerprinter cannot be combined"}},
		{name: "replay header", option: "WithReplayHeader", ctor: token, opts: []idemgin.Option{byUser, idemgin.WithReplayHeader("X-Replay")}},
		{name: "bad replay header", option: "WithReplayHeader", ctor: key, opts: []idemgin.Option{byUser, idemgin.WithReplayHeader("x y")}, errs: []string{"WithReplayHeader: ", `"x y"`}},
		{name: "replay header in Window", option: "WithReplayHeader", ctor: window, opts: []idemgin.Option{byUser, idemgin.WithReplayHeader("X-Replay")}, errs: []string{"WithReplayHeader applies to Idempotency and Token only, not Window"}},
		{name: "replay header twice", option: "WithReplayHeader", ctor: key, opts: []idemgin.Option{byUser, idemgin.WithReplayHeader("A"), idemgin.WithReplayHeader("B")}, errs: []string{"WithReplayHeader given twice"}},
		{name: "replay header replayed", option: "WithReplayHeader", ctor: key, opts: []idemgin.Option{byUser, idemgin.WithReplayHeader("x-replay"), idemgin.WithReplayHeaders("X-Replay")}, errs: []string{"header X-Replay cannot be replayed"}},
		{name: "problem base", option: "WithProblemBase", ctor: issuer, opts: []idemgin.Option{byUser, idemgin.WithProblemBase("https://errors.example.com/")}},
		{name: "relative problem base", option: "WithProblemBase", ctor: key, opts: []idemgin.Option{byUser, idemgin.WithProblemBase("/problems/")}, errs: []string{`WithProblemBase: "/problems/" is not an absolute URI`}},
		{name: "problem base twice", option: "WithProblemBase", ctor: window, opts: []idemgin.Option{byUser, idemgin.WithProblemBase("urn:a:"), idemgin.WithProblemBase("urn:b:")}, errs: []string{"WithProblemBase given twice"}},
		{name: "wait", option: "WithWait", ctor: token, opts: []idemgin.Option{byUser, idemgin.WithWait(0)}},
		{name: "short wait", option: "WithWait", ctor: key, opts: []idemgin.Option{byUser, idemgin.WithWait(time.Microsecond)}, errs: []string{"WithWait(1µs): poll interval must be"}},
		{name: "wait in Window", option: "WithWait", ctor: window, opts: []idemgin.Option{byUser, idemgin.WithWait(time.Millisecond)}, errs: []string{"WithWait applies to Idempotency and Token only, not Window"}},
		{name: "wait twice", option: "WithWait", ctor: key, opts: []idemgin.Option{byUser, idemgin.WithWait(time.Millisecond), idemgin.WithWait(time.Second)}, errs: []string{"WithWait given twice"}},
		{name: "nil", ctor: key, opts: []idemgin.Option{byUser, nil}, errs: []string{"idemgin: store: invalid argument: option 2 is nil"}},
		{name: "every error", ctor: key, opts: []idemgin.Option{nil, byUser, idemgin.WithMaxStoredResponse(-1), idemgin.WithLogger(nil), nil},
			errs: []string{"option 1 is nil", "WithMaxStoredResponse(-1): ", "WithLogger: ", "option 5 is nil"}},
	}
	e := testkit.NewEngine(t)
	var covered []string
	for _, c := range cases {
		covered = append(covered, c.option)
		_, err := c.ctor(e, c.opts...)
		if c.errs == nil {
			if err != nil {
				t.Errorf("%s: %v, want it accepted", c.name, err)
			}
			continue
		}
		optionstest.Refused(t, c.name, err, c.errs...)
	}
	optionstest.Covered(t, optionstest.Exported(t, ".", "Option"), covered)
	if _, err := idemgin.Idempotency(nil, byUser); err == nil {
		t.Error("a nil engine was accepted")
	}
}
