package netcore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/internal/httpcore"
	"github.com/idemkit/idemkit/internal/options"
)

// Build is the common part of an adapter's constructors: given the errors
// of its options (options.Collect) and whether they set a principal
// function, it checks c as a whole and returns the guard over e, or an
// error wrapping idemkit.ErrInvalid prefixed with the adapter's package
// name ("idem" + c.Namespace).
func Build(e *idemkit.Engine, c *Config, principal bool, errs []error) (*Guard, error) {
	pkg := "idem" + c.Namespace
	if e == nil {
		return nil, fmt.Errorf("%s: %w: nil engine", pkg, idemkit.ErrInvalid)
	}
	if !principal {
		errs = append(errs, errors.New("WithPrincipal is required: keys and tokens are scoped by principal"))
	}
	errs = append(errs, c.Check()...)
	if err := options.Invalid(errs...); err != nil {
		return nil, fmt.Errorf("%s: %w", pkg, err)
	}
	g, err := New(e, c)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", pkg, err)
	}
	return g, nil
}

// Unauthenticated is the answer to a request whose principal function
// failed or returned "".
func Unauthenticated() Answer {
	return Answer{Kind: httpcore.KindUnauthenticated, Detail: httpcore.DetailUnauthenticated}
}

// IssuedToken is the JSON body a TokenIssuer answers with.
type IssuedToken struct {
	// Token is the one-time token, to send back in the token header.
	Token string `json:"token"`
	// ExpiresIn is the token's lifetime in whole seconds.
	ExpiresIn int64 `json:"expires_in"`
}

// Issue issues a token bound to principal and returns the IssuedToken
// body to answer 201 with (and Cache-Control: no-store), or false and the
// answer of the engine's error.
func (g *Guard) Issue(ctx context.Context, principal string) ([]byte, Answer, bool) {
	tok, err := g.e.IssueToken(ctx, principal)
	if err != nil {
		return nil, g.IssueProblem(ctx, err), false
	}
	body, _ := json.Marshal(IssuedToken{Token: tok.Value, ExpiresIn: int64((tok.ExpiresIn + time.Second - 1) / time.Second)})
	return body, Answer{}, true
}

// TrustedHeader returns the one non-empty value of header name in h:
// what TrustedHeaderPrincipal reads. Absent, empty or repeated is false.
func TrustedHeader(h http.Header, name string) (string, bool) {
	vs := h.Values(name)
	if len(vs) != 1 || vs[0] == "" {
		return "", false
	}
	return vs[0], true
}
