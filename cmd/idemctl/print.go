package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/idemkit/idemkit"
)

// printer writes results as a table or as JSON.
type printer struct {
	w    io.Writer
	json bool
}

// keyView is what get prints of a key.
type keyView struct {
	KeyDigest         string  `json:"key_digest"`
	Mode              string  `json:"mode"`
	State             string  `json:"state"`
	TTLSeconds        float64 `json:"ttl_seconds"`
	Created           string  `json:"created,omitempty"`
	Updated           string  `json:"updated,omitempty"`
	AgeSeconds        float64 `json:"age_seconds,omitempty"`
	FingerprintDigest string  `json:"fingerprint_digest,omitempty"`
	ResultBytes       int     `json:"result_bytes"`
	Result            *string `json:"result,omitempty"`
}

func view(digest string, info idemkit.KeyInfo) keyView {
	v := keyView{KeyDigest: digest, Mode: string(info.Mode), State: string(info.State),
		TTLSeconds: info.TTL.Seconds(), FingerprintDigest: info.FingerprintDigest, ResultBytes: info.ResultSize}
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
		s := string(result)
		v.Result = &s
	}
	if p.json {
		return json.NewEncoder(p.w).Encode(v)
	}
	tw := tabwriter.NewWriter(p.w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "key digest\t%s\nmode\t%s\nstate\t%s\nttl\t%v\n", v.KeyDigest, v.Mode, v.State, info.TTL)
	if v.Created != "" {
		fmt.Fprintf(tw, "created\t%s\nupdated\t%s\nage\t%v\n", v.Created, v.Updated, time.Duration(v.AgeSeconds*float64(time.Second)))
	}
	if v.FingerprintDigest != "" {
		fmt.Fprintf(tw, "fingerprint digest\t%s\n", v.FingerprintDigest)
	}
	fmt.Fprintf(tw, "result bytes\t%d\n", v.ResultBytes)
	if v.Result != nil {
		fmt.Fprintf(tw, "result\t%s\n", *v.Result)
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
	fmt.Fprintln(tw, "STORE KEY\tSTATE\tTTL\tAGE\tRESULT BYTES")
	for _, r := range rows {
		age := "-"
		if !r.Info.Created.IsZero() {
			age = time.Since(r.Info.Created).Round(time.Second).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%v\t%s\t%d\n", r.StoreKey, r.Info.State, r.Info.TTL.Round(time.Second), age, r.Info.ResultSize)
	}
	fmt.Fprintf(tw, "(%d keys)\n", len(rows))
	return tw.Flush()
}
