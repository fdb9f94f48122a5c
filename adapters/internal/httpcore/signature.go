package httpcore

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ErrBadSignature is wrapped by every Signature.Verify error. The texts
// never hold the secret, the signature sent or the one expected.
var ErrBadSignature = errors.New("signature missing or invalid")

// MinSecretLen is the shortest shared secret a Signature accepts, in
// bytes: a shorter one could be guessed from a few signed messages.
const MinSecretLen = 16

// Signature checks the common webhook signature scheme: a header holding
// Prefix followed by the lower- or upper-case hex HMAC-SHA256 of the raw
// body (or of the timestamp header's value, '.', and the raw body, when a
// timestamp header is used) under a shared secret.
type Signature struct {
	Secret    []byte
	Prefix    string        // before the hex digest, such as "sha256="
	Tolerance time.Duration // how far the timestamp may lie from now; 0 without a timestamp
}

// Check returns an error for a Signature that cannot be used: a secret
// shorter than MinSecretLen, or a negative tolerance.
func (s Signature) Check() error {
	if len(s.Secret) < MinSecretLen {
		return fmt.Errorf("the secret is %d bytes, at least %d required", len(s.Secret), MinSecretLen)
	}
	if s.Tolerance < 0 {
		return fmt.Errorf("negative timestamp tolerance %v", s.Tolerance)
	}
	return nil
}

// Verify checks sig, the signature header's values, against body; with a
// tolerance, ts holds the timestamp header's values (Unix seconds), which
// must lie within the tolerance of now and is signed with the body. The
// digests are compared in constant time. Every error wraps
// ErrBadSignature and says which part failed, never a value.
func (s Signature) Verify(sig, ts []string, body []byte, now time.Time) error {
	if len(sig) != 1 {
		return fmt.Errorf("%w: one signature header required, got %d", ErrBadSignature, len(sig))
	}
	got, ok := strings.CutPrefix(sig[0], s.Prefix)
	if !ok || len(got) != 2*sha256.Size {
		return fmt.Errorf("%w: the signature header is not %s followed by %d hex digits", ErrBadSignature, s.Prefix, 2*sha256.Size)
	}
	sent, err := hex.DecodeString(got)
	if err != nil {
		return fmt.Errorf("%w: the signature is not hex", ErrBadSignature)
	}
	mac := hmac.New(sha256.New, s.Secret)
	if s.Tolerance > 0 {
		if len(ts) != 1 {
			return fmt.Errorf("%w: one timestamp header required, got %d", ErrBadSignature, len(ts))
		}
		sec, err := strconv.ParseInt(ts[0], 10, 64)
		if err != nil {
			return fmt.Errorf("%w: the timestamp is not Unix seconds", ErrBadSignature)
		}
		if d := now.Sub(time.Unix(sec, 0)); d > s.Tolerance || d < -s.Tolerance {
			return fmt.Errorf("%w: the timestamp is more than %v from now", ErrBadSignature, s.Tolerance)
		}
		mac.Write([]byte(ts[0]))
		mac.Write([]byte{'.'})
	}
	mac.Write(body)
	if !hmac.Equal(mac.Sum(nil), sent) {
		return fmt.Errorf("%w: the signature does not match", ErrBadSignature)
	}
	return nil
}

// Sign returns the signature header value for body (and ts, with a
// tolerance), for tests and for senders.
func (s Signature) Sign(ts string, body []byte) string {
	mac := hmac.New(sha256.New, s.Secret)
	if s.Tolerance > 0 {
		mac.Write([]byte(ts))
		mac.Write([]byte{'.'})
	}
	mac.Write(body)
	return s.Prefix + hex.EncodeToString(mac.Sum(nil))
}

// SignatureScheme is the settings of a signature check, as every adapter
// takes them; Compile applies the defaults and checks them.
type SignatureScheme struct {
	Sender          string // the principal of a request whose signature matches
	Secret          []byte
	Header          string // "" means "X-Signature"
	Prefix          string // "" means "sha256="; "-" means none
	TimestampHeader string // "" for none
	Tolerance       time.Duration
}

// Verifier checks requests' signatures as a SignatureScheme says.
type Verifier struct {
	Sender          string
	Header          string // canonical
	TimestampHeader string // canonical, or ""
	sig             Signature
}

// Compile returns the Verifier of s, or an error naming every problem,
// without the secret.
func (s SignatureScheme) Compile() (*Verifier, error) {
	if s.Header == "" {
		s.Header = "X-Signature"
	}
	switch s.Prefix {
	case "":
		s.Prefix = "sha256="
	case "-":
		s.Prefix = ""
	}
	var errs []error
	if s.Sender == "" {
		errs = append(errs, errors.New("empty Sender"))
	}
	if !ValidToken(s.Header) {
		errs = append(errs, fmt.Errorf("invalid Header %q", s.Header))
	}
	if s.TimestampHeader != "" && !ValidToken(s.TimestampHeader) {
		errs = append(errs, fmt.Errorf("invalid TimestampHeader %q", s.TimestampHeader))
	}
	if (s.TimestampHeader == "") != (s.Tolerance == 0) {
		errs = append(errs, errors.New("TimestampHeader and Tolerance go together"))
	}
	sig := Signature{Secret: append([]byte(nil), s.Secret...), Prefix: s.Prefix, Tolerance: s.Tolerance}
	if err := sig.Check(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	v := &Verifier{Sender: s.Sender, Header: http.CanonicalHeaderKey(s.Header), sig: sig}
	if s.TimestampHeader != "" {
		v.TimestampHeader = http.CanonicalHeaderKey(s.TimestampHeader)
	}
	return v, nil
}

// Verify returns the sender when sig (the signature header's values) and
// ts (the timestamp header's, if any) sign body; see Signature.Verify.
func (v *Verifier) Verify(sig, ts []string, body []byte, now time.Time) (string, error) {
	if err := v.sig.Verify(sig, ts, body, now); err != nil {
		return "", err
	}
	return v.Sender, nil
}
