package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemhttp"
)

// printer writes results as a table or as JSON.
type printer struct {
	w    io.Writer
	json bool
}

// keyView is what get prints of a key.
type keyView struct {
	KeyDigest  string  `json:"key_digest"`
	Mode       string  `json:"mode"`
	State      string  `json:"state"`
	TTLSeconds float64 `json:"ttl_seconds"`
	// LeaseSeconds is what is left of an in-progress claim's lease (0:
	// ended, the next request takes the key over).
	LeaseSeconds      *float64 `json:"lease_seconds,omitempty"`
	Fence             uint64   `json:"fence,omitempty"`
	Created           string   `json:"created,omitempty"`
	Updated           string   `json:"updated,omitempty"`
	AgeSeconds        float64  `json:"age_seconds,omitempty"`
	FingerprintDigest string   `json:"fingerprint_digest,omitempty"`
	ResultBytes       int      `json:"result_bytes"`
	// Result is the stored result when it is UTF-8 and not an HTTP
	// response; ResultBase64 when it is neither.
	Result       *string       `json:"result,omitempty"`
	ResultBase64 *string       `json:"result_base64,omitempty"`
	Response     *responseView `json:"response,omitempty"`
}

// responseView is a stored HTTP response (idemhttp and idemproxy store
// them), decoded: its body as text when it is UTF-8, base64 otherwise.
type responseView struct {
	Status     int                 `json:"status,omitempty"`
	Header     map[string][]string `json:"header,omitempty"`
	Body       *string             `json:"body,omitempty"`
	BodyBase64 *string             `json:"body_base64,omitempty"`
	NotStored  string              `json:"not_stored,omitempty"`
}

// textOrBase64 returns b as text when it is UTF-8, as base64 otherwise.
func textOrBase64(b []byte) (text, b64 *string) {
	if utf8.Valid(b) {
		s := string(b)
		return &s, nil
	}
	s := base64.StdEncoding.EncodeToString(b)
	return nil, &s
}

// setResult puts result in v: decoded when it is a stored HTTP response.
func (v *keyView) setResult(result []byte) {
	if r, err := idemhttp.DecodeStoredResponse(result); err == nil {
		rv := &responseView{Status: r.Status, NotStored: r.NotStored}
		if r.NotStored == "" {
			rv.Header = r.Header
			rv.Body, rv.BodyBase64 = textOrBase64(r.Body)
		}
		v.Response = rv
		return
	}
	v.Result, v.ResultBase64 = textOrBase64(result)
}

func view(digest string, info idemkit.KeyInfo) keyView {
	v := keyView{KeyDigest: digest, Mode: string(info.Mode), State: string(info.State),
		TTLSeconds: info.TTL.Seconds(), FingerprintDigest: info.FingerprintDigest, ResultBytes: info.ResultSize, Fence: info.Fence}
	if info.State == idemkit.StateInProgress {
		lease := info.Lease.Seconds()
		v.LeaseSeconds = &lease
	}
	if !info.Created.IsZero() {
		v.Created = info.Created.UTC().Format(time.RFC3339Nano)
		v.Updated = info.Updated.UTC().Format(time.RFC3339Nano)
		v.AgeSeconds = time.Since(info.Created).Round(time.Millisecond).Seconds()
	}
	return v
}

func (p *printer) info(digest string, info idemkit.KeyInfo, result []byte, withResult bool) error {
	v := view(digest, info)
	if withResult && result != nil {
		v.setResult(result)
	}
	if p.json {
		return json.NewEncoder(p.w).Encode(v)
	}
	tw := tabwriter.NewWriter(p.w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "key digest\t%s\nmode\t%s\nstate\t%s\nttl\t%v\n", v.KeyDigest, v.Mode, v.State, info.TTL)
	if v.LeaseSeconds != nil {
		fmt.Fprintf(tw, "lease left\t%s\n", leaseText(info.Lease))
	}
	if v.Fence != 0 {
		fmt.Fprintf(tw, "fencing token\t%d\n", v.Fence)
	}
	if v.Created != "" {
		fmt.Fprintf(tw, "created\t%s\nupdated\t%s\nage\t%v\n", v.Created, v.Updated, time.Duration(v.AgeSeconds*float64(time.Second)).Round(time.Millisecond))
	}
	if v.FingerprintDigest != "" {
		fmt.Fprintf(tw, "fingerprint digest\t%s\n", v.FingerprintDigest)
	}
	fmt.Fprintf(tw, "result bytes\t%d\n", v.ResultBytes)
	switch {
	case v.Result != nil:
		fmt.Fprintf(tw, "result\t%s\n", *v.Result)
	case v.ResultBase64 != nil:
		fmt.Fprintf(tw, "result (base64)\t%s\n", *v.ResultBase64)
	case v.Response != nil && v.Response.NotStored != "":
		fmt.Fprintf(tw, "result\tno response stored: %s\n", v.Response.NotStored)
	case v.Response != nil:
		r := v.Response
		fmt.Fprintf(tw, "result status\t%d %s\n", r.Status, http.StatusText(r.Status))
		names := slices.Sorted(maps.Keys(r.Header))
		for _, name := range names {
			for _, val := range r.Header[name] {
				fmt.Fprintf(tw, "result header\t%s: %s\n", name, val)
			}
		}
		if r.Body != nil {
			fmt.Fprintf(tw, "result body\t%s\n", *r.Body)
		} else {
			fmt.Fprintf(tw, "result body (base64)\t%s\n", *r.BodyBase64)
		}
	}
	return tw.Flush()
}

func (p *printer) notFound(digest string) {
	if p.json {
		_ = json.NewEncoder(p.w).Encode(map[string]any{"key_digest": digest, "found": false})
		return
	}
	fmt.Fprintf(p.w, "key digest %s: not found\n", digest)
}

func (p *printer) forgotten(digest string) error {
	if p.json {
		return json.NewEncoder(p.w).Encode(map[string]any{"key_digest": digest, "forgotten": true})
	}
	_, err := fmt.Fprintf(p.w, "key digest %s: forgotten; its next request runs again\n", digest)
	return err
}

// scanRow is one key of a scan.
type scanRow struct {
	StoreKey string
	Scope    string
	Info     idemkit.KeyInfo
}

func (p *printer) scan(rows []scanRow) error {
	if p.json {
		out := make([]map[string]any, 0, len(rows))
		for _, r := range rows {
			out = append(out, map[string]any{"store_key": r.StoreKey, "scope_digest": r.Scope, "key": view("", r.Info)})
		}
		return json.NewEncoder(p.w).Encode(out)
	}
	tw := tabwriter.NewWriter(p.w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STORE KEY\tSTATE\tLEASE LEFT\tTTL\tAGE\tRESULT BYTES")
	for _, r := range rows {
		age, lease := "-", "-"
		if !r.Info.Created.IsZero() {
			age = time.Since(r.Info.Created).Round(time.Second).String()
		}
		if r.Info.State == idemkit.StateInProgress {
			lease = leaseText(r.Info.Lease.Round(time.Second))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%s\t%d\n", r.StoreKey, r.Info.State, lease, r.Info.TTL.Round(time.Second), age, r.Info.ResultSize)
	}
	fmt.Fprintf(tw, "(%d keys)\n", len(rows))
	return tw.Flush()
}

// leaseText prints what is left of a claim's lease, or that it ended.
func leaseText(d time.Duration) string {
	if d <= 0 {
		return "ended"
	}
	return d.String()
}
