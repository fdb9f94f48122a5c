package idemhttp

import (
	"errors"
	"net/http"
	"unsafe"

	"github.com/idemkit/idemkit/adapters/internal/httpcore"
)

// Responses are stored in httpcore's format; what cannot be stored keeps
// a terminal record (httpcore.TerminalRecord, WithUnstored).

var errCorruptResponse = errors.New("idemhttp: corrupt stored response")

// encodeResponse encodes status, the headers of h named in allow, and
// body as a stored response. Each name is looked up in h once: the values
// found are kept, on the stack for an allow-list of up to eight names,
// between sizing the encoding and writing it.
func encodeResponse(status int, h http.Header, allow []string, body []byte) []byte {
	type found struct {
		name string
		vs   []string
	}
	var stack [8]found
	kept := stack[:0]
	size := httpcore.MaxResponseLen(len(body))
	for _, name := range allow {
		if vs, ok := h[name]; ok {
			kept = append(kept, found{name, vs})
			size += httpcore.MaxHeaderLen(name, vs)
		}
	}
	b := httpcore.StartResponse(make([]byte, 0, size), status)
	for _, f := range kept {
		b = httpcore.AppendHeader(b, f.name, f.vs)
	}
	return httpcore.FinishResponse(b, 0, len(kept), body)
}

// sendResponse checks that b is a well-formed stored response and sends
// it to w, in answer to a request of method: its headers, which replace
// any of the same name in w's header map, the replay header ("true") when
// replayed is set (it is removed otherwise), Content-Length where net/http
// does not add it itself (setContentLength), the status and the body. It
// returns errCorruptResponse, having written nothing, when b is not well
// formed: httpcore.Decode checks every field before the first is sent.
//
// Header names and values are substrings of b, not copies: b is the
// caller's own (the engine's Result.Value, or what CompleteIn recorded)
// and nothing writes to it once it is stored, so the strings stay as they
// are for as long as the header map holds them. The values are in one
// slice: one allocation, whatever the headers. The stored names are
// already canonical: the route stored only names of its allow-list.
func sendResponse(w http.ResponseWriter, b []byte, method, replayHeader string, replayed bool) error {
	resp, err := httpcore.Decode(b)
	if err != nil {
		return errCorruptResponse
	}
	// One more slot holds the replay header's value.
	vals := make([]string, resp.Values+1)
	h := w.Header()
	// A map empty before the headers are set holds only the names set
	// here: whether one is a framing header is then known without looking
	// h up.
	plain := len(h) == 0
	framing := false
	for range resp.Headers {
		name := text(resp.Field())
		framing = framing || framingHeader(name)
		k := resp.Count()
		for j := range k {
			vals[j] = text(resp.Field())
		}
		h[name], vals = vals[:k:k], vals[k:]
	}
	if replayed {
		vals[0] = "true"
		h[replayHeader] = vals[0:1:1]
	} else {
		delete(h, replayHeader)
	}
	setContentLength(h, method, resp.Status, len(resp.Body), plain && !framing)
	w.WriteHeader(resp.Status)
	if len(resp.Body) > 0 {
		_, _ = w.Write(resp.Body)
	}
	return nil
}

// text returns a part of a stored value as a string, without a copy:
// nothing writes to a stored value. An empty part's pointer lies within
// the value, as Go's slicing keeps it, never past its end.
func text(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
