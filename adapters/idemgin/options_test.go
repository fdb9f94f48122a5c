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
