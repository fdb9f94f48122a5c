package idemhttp

import (
	"net/http"
	"strconv"
)

// serverLengthMax is the largest body to which net/http's servers add a
// Content-Length themselves when the handler wrote it whole before
// returning: HTTP/1 buffers that much before it starts a chunked body
// (bufferBeforeChunkingSize in net/http), HTTP/2 twice as much.
const serverLengthMax = 2048

// setContentLength declares in h the length n of the body sent with
// status in answer to a request of method, the one Content-Length
// net/http's servers send on their own for a small body (see
// serverLengthMax): for those it leaves the header out of h, and removes
// any there, so that the server writes it itself, without parsing it back
// from the map, and the fresh response and its replay are alike on the
// wire. A status without a body leaves h as it is. plain says that h is
// known to hold no framing header (framingHeader), which then need not be
// looked up.
func setContentLength(h http.Header, method string, status, n int, plain bool) {
	if !bodyAllowed(status) {
		return
	}
	if serverSetsLength(h, method, n, plain) {
		if !plain {
			delete(h, "Content-Length")
		}
		return
	}
	h["Content-Length"] = []string{strconv.Itoa(n)}
}

// framingHeader reports whether name is a header that says how a body is
// delimited, which setContentLength looks for.
func framingHeader(name string) bool {
	switch name {
	case "Content-Length", "Transfer-Encoding", "Trailer":
		return true
	}
	return false
}

// serverSetsLength reports whether net/http's HTTP/1 and HTTP/2 servers
// both send Content-Length: n for a body of n bytes written whole before
// the handler returns, and h: the body fits their buffers, is not an empty
// answer to HEAD (which they cannot tell from one left out), and h
// declares neither a Transfer-Encoding nor trailers (with which HTTP/1
// sends no length); h is not looked at when plain is set. Trailers are
// looked for as declared in the Trailer header; names with
// http.TrailerPrefix are not looked for (a pass over the map would cost
// more than the header saves): net/http's doc gives them to trailers not
// known when the headers are written.
func serverSetsLength(h http.Header, method string, n int, plain bool) bool {
	if n > serverLengthMax || (n == 0 && method == http.MethodHead) {
		return false
	}
	if plain {
		return true
	}
	_, te := h["Transfer-Encoding"]
	_, trailer := h["Trailer"]
	return !te && !trailer
}
