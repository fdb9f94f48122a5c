package netcore

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/adapters/internal/httpcore"
)

// TestRecorderCap: a body of exactly the cap is kept whole, across
// writes; one byte more drops it and marks it over; the headers kept are
// those of the allow-list as they were when the response began.
func TestRecorderCap(t *testing.T) {
	for _, tc := range []struct {
		size int
		over bool
	}{{0, false}, {10, false}, {11, true}} {
		rec := &Recorder{allow: []string{"Content-Type", "Location"}, max: 10}
		w := NewWriter(httptest.NewRecorder(), rec)
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("X-Other", "no")
		w.WriteHeader(http.StatusCreated)
		w.Header().Set("Location", "/late") // after the response began: not sent, not kept
		body := strings.Repeat("b", tc.size)
		_, _ = w.Write([]byte(body[:tc.size/2]))
		_, _ = w.Write([]byte(body[tc.size/2:]))
		if rec.over != tc.over || w.Status() != http.StatusCreated {
			t.Fatalf("%d bytes: over %v status %d, want over %v status 201", tc.size, rec.over, w.Status(), tc.over)
		}
		if tc.over {
			continue
		}
		stored, err := httpcore.Decode(rec.encode(w.Status()))
		if err != nil {
			t.Fatal(err)
		}
		if stored.Status != http.StatusCreated || string(stored.Body) != body || stored.Headers != 1 {
			t.Fatalf("%d bytes: stored %d %q with %d headers", tc.size, stored.Status, stored.Body, stored.Headers)
		}
		if name, n := string(stored.Field()), stored.Count(); name != "Content-Type" || n != 1 || string(stored.Field()) != "text/plain" {
			t.Fatalf("stored header %s (%d values)", name, n)
		}
	}
}

// TestWriterStreams: a flush or a 101 marks the response streamed; a
// write without WriteHeader is a 200.
func TestWriterStreams(t *testing.T) {
	rec := &Recorder{max: 10}
	w := NewWriter(httptest.NewRecorder(), rec)
	_, _ = w.Write([]byte("x"))
	if rec.streamed || w.Status() != http.StatusOK {
		t.Fatalf("streamed %v, status %d before a flush", rec.streamed, w.Status())
	}
	http.NewResponseController(w).Flush()
	if !rec.streamed {
		t.Fatal("a flush through http.ResponseController did not mark the response streamed")
	}
	rec = &Recorder{max: 10}
	NewWriter(httptest.NewRecorder(), rec).WriteHeader(http.StatusSwitchingProtocols)
	if !rec.streamed {
		t.Fatal("101 did not mark the response streamed")
	}
}
