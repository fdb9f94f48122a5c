package netcore

import (
	"bufio"
	"net"
	"net/http"

	"github.com/idemkit/idemkit/adapters/internal/httpcore"
)

// Recorder keeps what a handler sends, as it passes to the client: the
// allow-listed headers as they were when the response began, and the body
// up to the stored-size cap. A framework's writer feeds it (Writer does
// for a plain http.ResponseWriter); the guard encodes what it kept.
type Recorder struct {
	allow    []string
	max      int        // the stored-size cap; 0 keeps nothing (Window)
	head     [][]string // per allow-listed name, its values; nil until Head
	headed   bool
	body     []byte
	over     bool // the body passed the cap and was dropped
	streamed bool // flushed or hijacked
}

// Head takes the allow-listed headers of h, once: the response begins.
// Later calls change nothing, as later header changes do not reach the
// client.
func (r *Recorder) Head(h http.Header) {
	if r.headed {
		return
	}
	r.headed = true
	if r.max == 0 {
		return
	}
	r.head = make([][]string, len(r.allow))
	for i, name := range r.allow {
		if vs := h[name]; len(vs) > 0 {
			r.head[i] = append([]string(nil), vs...)
		}
	}
}

// Body keeps b, a part of the body sent, while the body fits the cap.
func (r *Recorder) Body(b []byte) {
	if r.over || r.max == 0 {
		return
	}
	if len(r.body)+len(b) > r.max {
		r.over, r.body = true, nil
		return
	}
	r.body = append(r.body, b...)
}

// Stream marks the response streamed (flushed or hijacked): it is not
// stored.
func (r *Recorder) Stream() { r.streamed = true }

// encode returns the response as stored: status, the headers kept, body.
func (r *Recorder) encode(status int) []byte {
	n := httpcore.MaxResponseLen(len(r.body))
	for i, vs := range r.head {
		n += httpcore.MaxHeaderLen(r.allow[i], vs)
	}
	b := httpcore.StartResponse(make([]byte, 0, n), status)
	count := 0
	for i, vs := range r.head {
		if len(vs) > 0 {
			b = httpcore.AppendHeader(b, r.allow[i], vs)
			count++
		}
	}
	return httpcore.FinishResponse(b, 0, count, r.body)
}

// Writer is an http.ResponseWriter that passes everything to the writer
// it wraps and feeds a Recorder: Echo's handlers write through it. It
// keeps the first final status written, as net/http sends it.
type Writer struct {
	http.ResponseWriter
	rec    *Recorder
	status int
}

// NewWriter returns a Writer over w feeding rec.
func NewWriter(w http.ResponseWriter, rec *Recorder) *Writer {
	return &Writer{ResponseWriter: w, rec: rec}
}

// WriteHeader records the first final status and the headers with it.
func (w *Writer) WriteHeader(code int) {
	switch {
	case code == http.StatusSwitchingProtocols:
		w.rec.Stream()
	case code >= 200 && w.status == 0:
		w.status = code
		w.rec.Head(w.Header())
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write records b and sends it.
func (w *Writer) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
		w.rec.Head(w.Header())
	}
	w.rec.Body(b)
	return w.ResponseWriter.Write(b)
}

// Flush marks the response streamed and flushes it.
func (w *Writer) Flush() {
	w.rec.Stream()
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Hijack marks the response streamed and hands the connection over.
func (w *Writer) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	w.rec.Stream()
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

// Unwrap returns the writer w wraps, for http.ResponseController.
func (w *Writer) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Status returns the status sent: the first final one, 200 when none was
// written (as net/http sends).
func (w *Writer) Status() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}
