package idemfiber

import (
	"errors"
	"slices"

	"github.com/idemkit/idemkit/adapters/internal/httpcore"
	"github.com/valyala/fasthttp"
)

// Responses are stored in httpcore's format; a response over the stored
// size cap keeps a terminal record (httpcore.TerminalRecord).

var errCorruptResponse = errors.New("idemfiber: corrupt stored response")

// encodeResponse returns resp's status, allowed headers and body in the
// stored form.
func encodeResponse(resp *fasthttp.Response, allow []string) []byte {
	return encodeWith(resp, allow, resp.Body())
}

// encodeBodyless encodes resp's status and the headers named in allow,
// but Content-Encoding, without its body: what a callback keeps of a 2xx
// response it cannot store whole.
func encodeBodyless(resp *fasthttp.Response, allow []string) []byte {
	return encodeWith(resp, slices.DeleteFunc(slices.Clone(allow), func(n string) bool { return n == "Content-Encoding" }), nil)
}

// encodeWith encodes resp's status, the headers named in allow and body.
func encodeWith(resp *fasthttp.Response, allow []string, body []byte) []byte {
	b := httpcore.StartResponse(make([]byte, 0, 3+1+len(body)+64*len(allow)), resp.StatusCode())
	n := 0
	for _, name := range allow {
		// PeekAll's slice is fasthttp's, reused by the next call: the
		// values are appended before it.
		if vs := resp.Header.PeekAll(name); len(vs) > 0 {
			b = httpcore.AppendHeader(b, name, vs)
			n++
		}
	}
	return httpcore.FinishResponse(b, 0, n, body)
}

// replayedName and replayedTrue are the replay header as fasthttp sets it,
// kept so that a replay neither converts nor normalizes them.
var replayedName, replayedTrue = []byte(ReplayedHeader), []byte("true")

// writeStored writes the stored response b into resp, replacing what the
// headers named in b held, and marks it replayed. httpcore.Decode checks
// b whole before resp is touched.
func writeStored(resp *fasthttp.Response, b []byte) error {
	stored, err := httpcore.Decode(b)
	if err != nil {
		return errCorruptResponse
	}
	resp.SetStatusCode(stored.Status)
	for range stored.Headers {
		name := stored.Field()
		for i := range stored.Count() {
			if i == 0 {
				// Stored names are as fasthttp held them when recording:
				// normalizing them again would change nothing.
				resp.Header.SetCanonical(name, stored.Field())
			} else {
				resp.Header.AddBytesKV(name, stored.Field())
			}
		}
	}
	resp.Header.SetCanonical(replayedName, replayedTrue)
	resp.SetBody(stored.Body)
	return nil
}
