package netcore

import (
	"bytes"
	"io"
	"net/http"
	"sync"

	"github.com/idemkit/idemkit/adapters/internal/httpcore"
)

// reqBody is a request body read for the fingerprint.
type reqBody struct {
	b      []byte
	pooled *[pooledBodyLen]byte // the pooled array read into, or nil
	sent   bool                 // the request had a body to restore
}

// pooledBodyLen is the size of the pooled buffers small bodies are read
// into, so that a replay, which never hands the body to the handler,
// allocates none for it.
const pooledBodyLen = 4 << 10

var bodyPool = sync.Pool{New: func() any { return new([pooledBodyLen]byte) }}

// readBody reads r's body, at most limit bytes, and closes it. It answers
// 413 for a larger body, 400 for one that cannot be read.
func readBody(r *http.Request, limit int64) (reqBody, Answer, bool) {
	if r.Body == nil || r.Body == http.NoBody {
		return reqBody{}, Answer{}, true
	}
	if r.ContentLength > limit {
		return reqBody{}, tooLarge(limit), false
	}
	rb := reqBody{sent: true}
	var buf []byte
	if r.ContentLength < pooledBodyLen { // unknown (-1) or small
		rb.pooled = bodyPool.Get().(*[pooledBodyLen]byte)
		buf = rb.pooled[:0]
	} else {
		buf = make([]byte, 0, r.ContentLength+1) // +1: room to read the end
	}
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)] // past the pooled array: on the heap
		}
		n, err := r.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			rb.release()
			return reqBody{}, tooLarge(limit), false
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			rb.release()
			return reqBody{}, Answer{Kind: httpcore.KindBodyUnreadable, Detail: "the request body could not be read"}, false
		}
	}
	_ = r.Body.Close()
	rb.b = buf
	return rb, Answer{}, true
}

// restore gives the body back to r for the handler. A body in a pooled
// buffer is copied out first and the buffer released: pooled memory never
// reaches the handler.
func (rb *reqBody) restore(r *http.Request) {
	if rb.pooled != nil {
		b := bytes.Clone(rb.b)
		rb.release()
		rb.b = b
	}
	if rb.sent {
		r.Body = &bodyReader{Reader: *bytes.NewReader(rb.b)}
	}
}

// release returns a pooled buffer to the pool; rb.b must not be used
// afterwards. It is a no-op once restored.
func (rb *reqBody) release() {
	if rb.pooled != nil {
		bodyPool.Put(rb.pooled)
	}
	rb.pooled, rb.b = nil, nil
}

// bodyReader is the restored request body.
type bodyReader struct{ bytes.Reader }

// Close closes nothing: the body was read whole.
func (*bodyReader) Close() error { return nil }
