package idemhttp

import (
	"errors"
	"net/http"

	"github.com/idemkit/idemkit/adapters/internal/httpcore"
)

// ErrNotStoredResponse is returned by DecodeStoredResponse for a value
// that is not a response stored by this package's middlewares.
var ErrNotStoredResponse = errors.New("idemhttp: not a stored response")

// StoredResponse is a response a middleware stored for replay, decoded by
// DecodeStoredResponse. Its fields are copies of the stored value.
type StoredResponse struct {
	// Status is the response status, zero when NotStored is set.
	Status int
	// Header holds the stored headers: those of the replay allow-list.
	Header http.Header
	// Body is the response body.
	Body []byte
	// NotStored, when not empty, says why the record holds no response
	// (too large, streamed, or of unknown outcome): the problem's detail a
	// retry with the key gets.
	NotStored string
}

// DecodeStoredResponse decodes the stored value of a key the middlewares
// completed (what idemkit.Engine.StoredResult returns for it), for tools
// such as idemctl. It returns an error wrapping ErrNotStoredResponse when
// b is not a well-formed stored response or terminal record.
func DecodeStoredResponse(b []byte) (StoredResponse, error) {
	if _, detail, ok := httpcore.Terminal(b); ok {
		return StoredResponse{NotStored: detail}, nil
	}
	resp, err := httpcore.Decode(b)
	if err != nil {
		return StoredResponse{}, ErrNotStoredResponse
	}
	out := StoredResponse{Status: resp.Status, Header: make(http.Header, resp.Headers), Body: append([]byte{}, resp.Body...)}
	for range resp.Headers {
		name := string(resp.Field())
		vs := make([]string, resp.Count())
		for i := range vs {
			vs[i] = string(resp.Field())
		}
		out.Header[name] = vs
	}
	return out, nil
}
