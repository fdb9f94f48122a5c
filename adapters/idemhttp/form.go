package idemhttp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"

	"github.com/idemkit/idemkit/adapters/internal/httpcore"
)

// isForm reports whether r's body is an HTML form: URL-encoded or
// multipart.
func isForm(r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && (mt == "application/x-www-form-urlencoded" || mt == "multipart/form-data")
}

// formToken returns the single value of the form field name in body, the
// already read body of r, parsed as a key. present reports whether the
// field was sent at all. r itself is not changed: the handler parses the
// form from the restored body as usual.
func formToken(r *http.Request, body []byte, name string) (token string, present bool, err error) {
	var values []string
	mt, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt == "multipart/form-data" {
		values, err = multipartField(body, params["boundary"], name)
	} else {
		var q url.Values
		q, err = url.ParseQuery(string(body))
		values = q[name]
	}
	if err != nil {
		return "", true, fmt.Errorf("%w: the form cannot be parsed", httpcore.ErrBadKey)
	}
	return httpcore.HeaderKey(values)
}

// multipartField returns the values of the non-file field name in a
// multipart body.
func multipartField(body []byte, boundary, name string) ([]string, error) {
	if boundary == "" {
		return nil, errors.New("no boundary")
	}
	mr := multipart.NewReader(bytes.NewReader(body), boundary)
	var values []string
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			return values, nil
		}
		if err != nil {
			return nil, err
		}
		if part.FormName() != name || part.FileName() != "" {
			continue
		}
		// A token is at most MaxKeyLen characters, or 2 more quoted.
		v, err := io.ReadAll(io.LimitReader(part, MaxKeyLen+3))
		if err != nil {
			return nil, err
		}
		values = append(values, string(v))
	}
}
