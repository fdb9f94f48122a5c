package httpcore

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"testing"
)

func TestQueryParamsSelects(t *testing.T) {
	r := httptest.NewRequest("POST", "/o?a=1&b=2&a=3", nil)
	bare := httptest.NewRequest("POST", "/o", nil)
	for _, tc := range []struct {
		name          string
		r             *http.Request
		names         []string
		selected, all bool
		want          url.Values
	}{
		{"all by default", r, nil, false, true, url.Values{"a": {"1", "3"}, "b": {"2"}}},
		{"none by default", r, nil, false, false, nil},
		{"selected", r, []string{"a", "c"}, true, true, url.Values{"a": {"1", "3"}}},
		{"selected none", r, nil, true, true, nil},
		{"no query", bare, []string{"a"}, true, true, nil},
	} {
		if got := QueryParams(tc.r, tc.names, tc.selected, tc.all); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
