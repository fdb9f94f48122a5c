package layout

import "testing"

func TestScopeOf(t *testing.T) {
	for key, want := range map[string]string{
		"idem:1:c2NvcGUtZGln:a2V5": "c2NvcGUtZGln",
		"idem:0:-:a2V5":            "-",
		"ns:with:colons:1:s:k":     "",
		"idem:12:s:k":              "",
		"idem:1::k":                "",
		"idem:1:s":                 "",
		"plain":                    "",
	} {
		if got := ScopeOf(key); got != want {
			t.Errorf("ScopeOf(%q) = %q, want %q", key, got, want)
		}
	}
}

func TestInProgress(t *testing.T) {
	claim := append([]byte{RecordVersion, StateInProgress}, make([]byte, RecordHeaderLen-1)...)
	if !InProgress(claim) {
		t.Errorf("a claim of %d bytes is not in progress", len(claim))
	}
	for name, v := range map[string][]byte{
		"truncated":       claim[:RecordHeaderLen],
		"issued token":    {1, 1},
		"done":            append([]byte{RecordVersion, 3}, claim[2:]...),
		"unknown version": append([]byte{RecordVersion + 1, StateInProgress}, claim[2:]...),
		"empty":           {},
	} {
		if InProgress(v) {
			t.Errorf("%s (%d bytes) counted as a claim in progress", name, len(v))
		}
	}
}
