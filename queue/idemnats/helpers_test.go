package idemnats_test

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// fakeMsg is a jetstream.Msg that records the acknowledgement it gets, for
// tests of the decisions without a server.
type fakeMsg struct {
	hdr  nats.Header
	data []byte

	delivered uint64 // NumDelivered; 0 reads as 1

	mu    sync.Mutex
	acks  []string
	delay time.Duration
}

func newFakeMsg(key string) *fakeMsg {
	m := &fakeMsg{hdr: nats.Header{}, data: []byte("body")}
	if key != "" {
		m.hdr.Set(jetstream.MsgIDHeader, key)
	}
	return m
}

func (m *fakeMsg) record(kind string, d time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.acks = append(m.acks, kind)
	m.delay = d
	return nil
}

func (m *fakeMsg) sent() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.acks...)
}

func (m *fakeMsg) Metadata() (*jetstream.MsgMetadata, error) {
	return &jetstream.MsgMetadata{Stream: "S", NumDelivered: max(m.delivered, 1)}, nil
}
func (m *fakeMsg) Data() []byte                       { return m.data }
func (m *fakeMsg) Headers() nats.Header               { return m.hdr }
func (m *fakeMsg) Subject() string                    { return "s" }
func (m *fakeMsg) Reply() string                      { return "" }
func (m *fakeMsg) Ack() error                         { return m.record("ack", 0) }
func (m *fakeMsg) DoubleAck(context.Context) error    { return m.record("ack", 0) }
func (m *fakeMsg) Nak() error                         { return m.record("nak", 0) }
func (m *fakeMsg) NakWithDelay(d time.Duration) error { return m.record("nak", d) }
func (m *fakeMsg) InProgress() error                  { return m.record("wpi", 0) }
func (m *fakeMsg) Term() error                        { return m.record("term", 0) }
func (m *fakeMsg) TermWithReason(reason string) error { return m.record("term", 0) }

var _ jetstream.Msg = (*fakeMsg)(nil)

var errDeclined = errors.New("card declined")
