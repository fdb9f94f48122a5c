package idemfiber

import (
	"fmt"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

func TestStoredResponseRoundTrip(t *testing.T) {
	var resp fasthttp.Response
	resp.SetStatusCode(201)
	resp.Header.SetContentType("application/json")
	resp.Header.Add("Link", "</a>; rel=a")
	resp.Header.Add("Link", "</b>; rel=b")
	resp.Header.Set("X-Secret", "not allowed")
	resp.SetBodyString(`{"id":1}`)
	b := encodeResponse(&resp, []string{"Content-Type", "Link", "Location"})

	var out fasthttp.Response
	if err := writeStored(&out, b); err != nil {
		t.Fatal(err)
	}
	if out.StatusCode() != 201 || string(out.Body()) != `{"id":1}` {
		t.Fatalf("status %d body %q", out.StatusCode(), out.Body())
	}
	if ct := string(out.Header.ContentType()); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	if links := out.Header.PeekAll("Link"); len(links) != 2 || string(links[1]) != "</b>; rel=b" {
		t.Errorf("Link values %q", links)
	}
	if len(out.Header.Peek("X-Secret")) != 0 {
		t.Error("a header off the allow-list was stored")
	}
	if string(out.Header.Peek(ReplayedHeader)) != "true" {
		t.Error("no replayed marker")
	}
}

func TestCorruptStoredResponse(t *testing.T) {
	var resp fasthttp.Response
	resp.SetStatusCode(200)
	resp.Header.Set("Location", "/x")
	resp.SetBodyString("body")
	good := encodeResponse(&resp, []string{"Location"})
	bad := [][]byte{
		nil,
		{2, 0, 200, 0},                 // unknown version
		{1, 0, 42, 0},                  // status below 100
		{1, 0, 200, 1, 50, 'a'},        // name length past the end
		good[:6],                       // cut inside a header
		{1, 0, 200, 1, 1, 'a', 200, 1}, // value count past the end
	}
	for i, b := range bad {
		var out fasthttp.Response
		out.SetStatusCode(299)
		if err := writeStored(&out, b); err == nil {
			t.Errorf("case %d: %v accepted", i, b)
		} else if out.StatusCode() != 299 {
			t.Errorf("case %d: response touched before the check", i)
		}
	}
}

// TestStoredResponseLongValues replays header values whose lengths take two
// bytes in the stored form: from 128 to 255 the first byte alone reads as
// the length, so a reader that took it for a one-byte length would be off.
func TestStoredResponseLongValues(t *testing.T) {
	location, tag := "/orders/"+strings.Repeat("a", 142), strings.Repeat("t", 300)
	var resp fasthttp.Response
	resp.SetStatusCode(201)
	resp.Header.Set("Location", location)
	resp.Header.Set("X-Tag", tag)
	resp.SetBodyString(`{"id":2}`)
	var out fasthttp.Response
	if err := writeStored(&out, encodeResponse(&resp, []string{"Location", "X-Tag"})); err != nil {
		t.Fatal(err)
	}
	if got := string(out.Header.Peek("Location")); got != location {
		t.Errorf("Location %q, want %q", got, location)
	}
	if got := string(out.Header.Peek("X-Tag")); got != tag {
		t.Errorf("X-Tag of %d bytes, want %d", len(got), len(tag))
	}
	if string(out.Body()) != `{"id":2}` {
		t.Errorf("body %q", out.Body())
	}
}

// TestReplayReplacesEarlierHeaders: a replay replaces what middleware
// before the guard set under an allow-listed name, also for names that
// Go and fasthttp write in different cases (a hyphen first or doubled):
// a replay sets the stored names as they are, so they must be the names
// fasthttp gives the headers, or the replay adds a second header.
func TestReplayReplacesEarlierHeaders(t *testing.T) {
	c := &config{}
	if err := WithReplayHeaders("x-trace", "x--trace", "-x-lead")(c); err != nil {
		t.Fatal(err)
	}
	var resp fasthttp.Response
	resp.SetStatusCode(201)
	for _, name := range c.replayHeaders {
		resp.Header.Set(name, "handler")
	}
	b := encodeResponse(&resp, c.replayHeaders)
	var out fasthttp.Response
	for _, name := range c.replayHeaders {
		out.Header.Set(strings.ToLower(name), "earlier middleware")
	}
	if err := writeStored(&out, b); err != nil {
		t.Fatal(err)
	}
	for _, name := range c.replayHeaders {
		if vs := out.Header.PeekAll(name); len(vs) != 1 || string(vs[0]) != "handler" {
			t.Errorf("replayed %s: %q, want only the stored value", name, vs)
		}
	}
}

// TestStoredResponseUvarintBoundaries: value lengths and value counts on
// either side of each uvarint width (127/128, 16383/16384), and a body
// after them, come back exactly.
func TestStoredResponseUvarintBoundaries(t *testing.T) {
	lengths := []int{0, 1, 126, 127, 128, 129, 255, 256, 16383, 16384}
	for _, count := range []int{1, 127, 128, 200} {
		var resp fasthttp.Response
		resp.SetStatusCode(200)
		var want []string
		for i := range count {
			v := strings.Repeat(string(rune('a'+i%26)), lengths[i%len(lengths)])
			want = append(want, v)
			resp.Header.Add("X-Tag", v)
		}
		resp.Header.Set("Location", strings.Repeat("/", 128))
		resp.SetBodyString(strings.Repeat("b", 130))
		var out fasthttp.Response
		if err := writeStored(&out, encodeResponse(&resp, []string{"X-Tag", "Location"})); err != nil {
			t.Fatalf("%d values: %v", count, err)
		}
		got := out.Header.PeekAll("X-Tag")
		if len(got) != count {
			t.Fatalf("%d values: %d replayed", count, len(got))
		}
		for i := range got {
			if string(got[i]) != want[i] {
				t.Fatalf("%d values: value %d of %d bytes, want %d", count, i, len(got[i]), len(want[i]))
			}
		}
		if string(out.Header.Peek("Location")) != strings.Repeat("/", 128) || string(out.Body()) != strings.Repeat("b", 130) {
			t.Fatalf("%d values: Location %q, body %q", count, out.Header.Peek("Location"), out.Body())
		}
	}
}

// TestStoredResponseManyValues replays responses with no, one and many
// values of a repeated header around the one-value names: each value must
// come back, in order, and the headers around them intact.
func TestStoredResponseManyValues(t *testing.T) {
	for _, links := range []int{0, 1, 6, 7, 8, 9, 30} {
		var resp fasthttp.Response
		resp.SetStatusCode(201)
		resp.Header.SetContentType("application/json")
		for i := range links {
			resp.Header.Add("Link", fmt.Sprintf("</%d>; rel=r%d", i, i))
		}
		resp.Header.Set("Location", "/orders/7")
		resp.SetBodyString(`{"id":7}`)
		b := encodeResponse(&resp, []string{"Content-Type", "Link", "Location"})

		var out fasthttp.Response
		out.Header.Set("Location", "/earlier")
		out.Header.Add("Link", "</earlier>")
		if err := writeStored(&out, b); err != nil {
			t.Fatalf("%d links: %v", links, err)
		}
		got := out.Header.PeekAll("Link")
		if links == 0 {
			// Not stored: the earlier value is left as it was.
			if len(got) != 1 || string(got[0]) != "</earlier>" {
				t.Errorf("no links stored: Link values %q", got)
			}
			got = nil
		} else if len(got) != links {
			t.Fatalf("%d links: replayed %d: %q", links, len(got), got)
		}
		for i, v := range got {
			if want := fmt.Sprintf("</%d>; rel=r%d", i, i); string(v) != want {
				t.Errorf("%d links: value %d is %q, want %q", links, i, v, want)
			}
		}
		if loc := string(out.Header.Peek("Location")); loc != "/orders/7" {
			t.Errorf("%d links: Location %q", links, loc)
		}
		if ct := string(out.Header.ContentType()); ct != "application/json" {
			t.Errorf("%d links: Content-Type %q", links, ct)
		}
		if out.StatusCode() != 201 || string(out.Body()) != `{"id":7}` || string(out.Header.Peek(ReplayedHeader)) != "true" {
			t.Errorf("%d links: status %d body %q replayed %q", links, out.StatusCode(), out.Body(), out.Header.Peek(ReplayedHeader))
		}
	}
}

// TestReplayPathAllocations checks that writing a stored response
// allocates nothing once the response's buffers exist (keying's
// TestParseKeyHeaderBytesAllocateNothing covers reading the key).
func TestReplayPathAllocations(t *testing.T) {
	var resp fasthttp.Response
	resp.SetStatusCode(201)
	resp.Header.SetContentType("application/json")
	resp.Header.Set("Location", "/orders/1")
	resp.SetBodyString(`{"id":1}`)
	b := encodeResponse(&resp, []string{"Content-Type", "Location"})
	var out fasthttp.Response
	if err := writeStored(&out, b); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() {
		if err := writeStored(&out, b); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("writeStored: %v allocations", n)
	}
}
