package httpcore

import (
	"net/http"
	"net/url"
)

// QueryParams returns the query parameters of r that are part of a
// fingerprint, nil for none: the named ones when selected is set
// (WithQueryParams), otherwise all of them when all is set, or none.
func QueryParams(r *http.Request, names []string, selected, all bool) url.Values {
	switch {
	case r.URL.RawQuery == "":
		return nil
	case !selected && all:
		return r.URL.Query()
	case !selected:
		return nil
	}
	q := r.URL.Query()
	var sel url.Values
	for _, name := range names {
		if vs, ok := q[name]; ok {
			if sel == nil {
				sel = make(url.Values, len(names))
			}
			sel[name] = vs
		}
	}
	return sel
}
