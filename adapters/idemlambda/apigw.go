package idemlambda

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/internal/httpcore"
)

// ReplayedHeader is set to "true" on every replayed API Gateway response,
// never on a fresh one (keying.ReplayedHeader).
const ReplayedHeader = httpcore.ReplayedHeader

// DefaultKeyHeader is the request header APIGateway and HTTPAPI read the
// key from unless WithKeyHeader or WithKeyPath says otherwise.
const DefaultKeyHeader = httpcore.DefaultKeyHeader

// shape is what differs between API Gateway's REST (v1) and HTTP API
// (v2) events: where request headers are, and how a response is read
// and written.
type shape[Req, Resp any] struct {
	kind     kind
	header   func(req *Req, name string) []string // every value, any case
	status   func(resp *Resp) int
	replayed func(resp Resp) Resp // a copy marked with ReplayedHeader
	problem  func(status int, headers map[string]string, body string) Resp
}

// notStored carries a response the store policy does not keep (5xx, 408,
// 409, 425, 429, 1xx, 3xx) out of the engine, which then releases the
// key, so a retry runs the handler again.
type notStored[Resp any] struct{ resp Resp }

func (notStored[Resp]) Error() string { return "idemlambda: response not stored" }

// APIGateway returns fn, an API Gateway REST API (proxy integration, v1
// payload) handler, guarded by e under name. The key is the request's
// Idempotency-Key header (WithKeyHeader names another; WithKeyPath or
// WithKeyFunc read it elsewhere in the event, a body field, say); the
// payload check covers the method, the path and the body
// (WithPayloadPaths sets others). Keys are scoped by the caller's
// identity, which WithPrincipalPath or WithPrincipalFunc (one of them
// required) reads from what API Gateway's authorizer wrote: a response is
// replayed only to the caller whose request stored it.
//
// fn's 2xx and 4xx responses (but 408, 409, 425 and 429) are stored and
// replayed byte for byte (status, headers, multi-value headers, body,
// base64 flag), with the header Idempotent-Replayed: true added. Other
// responses, and errors of fn, release the key, so a retry runs fn again
// (unless the engine's ErrorCodec marks the error final: it is then
// returned again on every retry). The adapter answers itself, with an RFC
// 9457 problem (application/problem+json, the types idemhttp uses): 400
// when the key is missing (the detail names the header or path) or
// malformed, 401 when the request has no principal, 409 with Retry-After while the first request runs, 422 when
// the key is reused with another payload, 503 with Retry-After when the
// store fails under idemkit.FailClosed, 500 for the replay of a response
// too large to keep. It returns an error wrapping idemkit.ErrInvalid for
// the configuration errors Wrap refuses.
func APIGateway(e *idemkit.Engine, name string, fn Handler[events.APIGatewayProxyRequest, events.APIGatewayProxyResponse], opts ...Option) (Handler[events.APIGatewayProxyRequest, events.APIGatewayProxyResponse], error) {
	return wrapHTTP(e, name, fn, opts, shape[events.APIGatewayProxyRequest, events.APIGatewayProxyResponse]{
		kind: kind{call: "APIGateway", header: true, defaultFP: []string{"httpMethod", "path", "body"}},
		header: func(req *events.APIGatewayProxyRequest, name string) []string {
			if vs := lookupMulti(req.MultiValueHeaders, name); vs != nil {
				return vs
			}
			return lookup(req.Headers, name)
		},
		status: func(resp *events.APIGatewayProxyResponse) int { return resp.StatusCode },
		replayed: func(resp events.APIGatewayProxyResponse) events.APIGatewayProxyResponse {
			resp.Headers = withReplayed(resp.Headers)
			return resp
		},
		problem: func(status int, headers map[string]string, body string) events.APIGatewayProxyResponse {
			return events.APIGatewayProxyResponse{StatusCode: status, Headers: headers, Body: body}
		},
	})
}

// HTTPAPI is APIGateway for API Gateway HTTP APIs (v2 payload). Its
// default payload check covers requestContext.http.method, rawPath and
// body; a v2 response's cookies are stored and replayed as well.
func HTTPAPI(e *idemkit.Engine, name string, fn Handler[events.APIGatewayV2HTTPRequest, events.APIGatewayV2HTTPResponse], opts ...Option) (Handler[events.APIGatewayV2HTTPRequest, events.APIGatewayV2HTTPResponse], error) {
	return wrapHTTP(e, name, fn, opts, shape[events.APIGatewayV2HTTPRequest, events.APIGatewayV2HTTPResponse]{
		kind: kind{call: "HTTPAPI", header: true, defaultFP: []string{"requestContext.http.method", "rawPath", "body"}},
		header: func(req *events.APIGatewayV2HTTPRequest, name string) []string {
			return lookup(req.Headers, name)
		},
		status: func(resp *events.APIGatewayV2HTTPResponse) int { return resp.StatusCode },
		replayed: func(resp events.APIGatewayV2HTTPResponse) events.APIGatewayV2HTTPResponse {
			resp.Headers = withReplayed(resp.Headers)
			return resp
		},
		problem: func(status int, headers map[string]string, body string) events.APIGatewayV2HTTPResponse {
			return events.APIGatewayV2HTTPResponse{StatusCode: status, Headers: headers, Body: body}
		},
	})
}

// lookup returns the value of header name in h, whatever its case.
func lookup(h map[string]string, name string) []string {
	if v, ok := h[name]; ok {
		return []string{v}
	}
	for k, v := range h {
		if strings.EqualFold(k, name) {
			return []string{v}
		}
	}
	return nil
}

// lookupMulti returns the values of header name in h, whatever its case.
func lookupMulti(h map[string][]string, name string) []string {
	for k, vs := range h {
		if strings.EqualFold(k, name) {
			return vs
		}
	}
	return nil
}

// withReplayed returns a copy of h with ReplayedHeader set.
func withReplayed(h map[string]string) map[string]string {
	out := make(map[string]string, len(h)+1)
	maps.Copy(out, h)
	out[ReplayedHeader] = "true"
	return out
}

// wrapHTTP is APIGateway and HTTPAPI over their shape s.
func wrapHTTP[Req, Resp any](e *idemkit.Engine, name string, fn Handler[Req, Resp], opts []Option, s shape[Req, Resp]) (Handler[Req, Resp], error) {
	g, err := newGuard[Req](e, name, s.kind, nil, opts)
	if err == nil && fn == nil {
		err = fmt.Errorf("idemlambda: %s: %w: nil handler", s.kind.call, idemkit.ErrInvalid)
	}
	if err != nil {
		return nil, err
	}
	if g.off {
		return fn, nil
	}
	header := g.cfg.keyHeader
	if header == "" {
		header = DefaultKeyHeader
	}
	byHeader := g.cfg.keyPath == nil && g.keyFunc == nil
	return func(ctx context.Context, req Req) (Resp, error) {
		ev := &event[Req]{in: req}
		var k string
		if byHeader {
			key, present, err := httpcore.HeaderKey(s.header(&req, header))
			switch {
			case !present:
				return s.problemFor(httpcore.KindKeyMissing, httpcore.DetailKeyMissing(header), "", 0), nil
			case err != nil:
				return s.problemFor(httpcore.KindKeyInvalid, err.Error(), "", 0), nil
			}
			k = key
		} else {
			key, err := g.rawKey(ev)
			if err != nil {
				detail := strings.TrimPrefix(err.Error(), ErrNoKey.Error()+": ")
				return s.problemFor(httpcore.KindKeyMissing, "this request has no usable idempotency key: "+detail, "", 0), nil
			}
			k = key
		}
		principal, err := g.principal(ev)
		if err != nil {
			return s.problemFor(httpcore.KindUnauthenticated, httpcore.DetailUnauthenticated, "", 0), nil
		}
		fp, err := g.fingerprint(ev)
		if err != nil {
			return s.problemFor(httpcore.KindInternal, httpcore.DetailInternal, k, 0), nil
		}
		callOpts, err := callOptions(ctx)
		if err != nil {
			var zero Resp
			return zero, err
		}
		callOpts = append(callOpts, idemkit.WithScope(principal))
		run := func(ctx context.Context) (Resp, error) {
			resp, err := fn(ctx, req)
			if err == nil && !httpcore.DefaultStorePolicy(s.status(&resp)) {
				return resp, notStored[Resp]{resp}
			}
			return resp, err
		}
		resp, res, err := idemkit.Do(ctx, g.view, g.storeKey(k), fp, run, callOpts...)
		return s.outcome(k, resp, res, err)
	}, nil
}

// outcome turns what Do returned into the response and error the
// function returns.
func (s *shape[Req, Resp]) outcome(key string, resp Resp, res idemkit.Result, err error) (Resp, error) {
	var ns notStored[Resp]
	switch {
	case err == nil && res.Replayed:
		return s.replayed(resp), nil
	case err == nil:
		return resp, nil
	case errors.As(err, &ns):
		return ns.resp, nil
	case !res.Replayed && res.Value != nil:
		// fn ran and answered, but its response was not recorded (too
		// large, lease lost, store failed): the client gets it all the
		// same; the key's record says what a retry gets.
		return resp, nil
	case errors.Is(err, idemkit.ErrInProgress):
		retry, _ := idemkit.RetryAfter(err)
		return s.problemFor(httpcore.KindInProgress, httpcore.DetailInProgress, key, retry), nil
	case errors.Is(err, idemkit.ErrMismatch):
		return s.problemFor(httpcore.KindKeyMismatch, httpcore.DetailKeyMismatch, key, 0), nil
	case errors.Is(err, idemkit.ErrResultTooLarge):
		return s.problemFor(httpcore.KindResponseNotStored, httpcore.DetailTooLarge, key, 0), nil
	case errors.Is(err, idemkit.ErrUnavailable):
		return s.problemFor(httpcore.KindUnavailable, httpcore.DetailUnavailable, key, httpcore.UnavailableRetry), nil
	}
	var zero Resp
	return zero, err // fn's own error, a replayed final error, or the context's
}

// problemFor returns the problem response of kind k; retry > 0 adds
// Retry-After.
func (s *shape[Req, Resp]) problemFor(k httpcore.Kind, detail, key string, retry time.Duration) Resp {
	t := k.Type()
	p := httpcore.Problem{
		Type:           httpcore.DefaultProblemBase + t.Name,
		Title:          t.Title,
		Status:         t.Status,
		Detail:         detail,
		Instance:       httpcore.UUIDInstance((*http.Request)(nil)),
		IdempotencyKey: key,
	}
	retryable := retry > 0
	p.Retryable = &retryable
	headers := map[string]string{"Content-Type": httpcore.ProblemContentType}
	if retryable {
		headers["Retry-After"] = httpcore.RetrySeconds(retry)
	}
	return s.problem(t.Status, headers, string(p.JSON()))
}

// principal returns the caller's identity by WithPrincipalPath or
// WithPrincipalFunc; an error or "" means none.
func (g *guard[In]) principal(ev *event[In]) (string, error) {
	var p string
	var err error
	if f, ok := g.cfg.principalF.(func(In) (string, error)); ok {
		p, err = f(ev.in)
	} else {
		var doc *document
		if doc, err = ev.json(); err == nil {
			p, err = g.cfg.principal.keyAt(doc)
		}
	}
	if err == nil && p == "" {
		err = errors.New("empty principal")
	}
	return p, err
}
