package event_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/event"
)

func TestVerifyCallback(t *testing.T) {
	current, previous := []byte("current-secret-of-at-least-32-bytes!"), []byte("previous-secret-of-at-least-32-bytes")
	body := []byte(`{"callbackId":"CB-1","type":"PAYMENT_SUCCEEDED","orderId":"O-1"}`)
	now := time.Unix(1_800_000_000, 0)
	window := 5 * time.Minute
	at := func(d time.Duration) int64 { return now.Add(d).Unix() }
	tests := []struct {
		name      string
		secrets   [][]byte // what the receiver accepts
		signWith  []byte
		signedAt  int64
		timestamp string // sent; empty: signedAt
		body      []byte // sent; nil: body
		signature string // sent; empty: the sender's
		want      error
	}{
		{name: "valid", secrets: [][]byte{current}, signWith: current, signedAt: at(0)},
		{name: "valid at the window's edge", secrets: [][]byte{current}, signWith: current, signedAt: at(-window)},
		{name: "wrong secret", secrets: [][]byte{current}, signWith: []byte("someone-else-entirely-00000000000"), signedAt: at(0), want: event.ErrInvalidSignature},
		{name: "previous secret during rotation", secrets: [][]byte{current, previous}, signWith: previous, signedAt: at(0)},
		{name: "previous secret after rotation", secrets: [][]byte{current}, signWith: previous, signedAt: at(0), want: event.ErrInvalidSignature},
		{name: "stale timestamp", secrets: [][]byte{current}, signWith: current, signedAt: at(-window - time.Second), want: event.ErrStaleSignature},
		{name: "future timestamp", secrets: [][]byte{current}, signWith: current, signedAt: at(window + time.Second), want: event.ErrStaleSignature},
		{name: "tampered body", secrets: [][]byte{current}, signWith: current, signedAt: at(0), body: []byte(`{"callbackId":"CB-1","type":"PAYMENT_SUCCEEDED","orderId":"O-2"}`), want: event.ErrInvalidSignature},
		{name: "timestamp changed after signing", secrets: [][]byte{current}, signWith: current, signedAt: at(0), timestamp: strconv.FormatInt(at(time.Second), 10), want: event.ErrInvalidSignature},
		{name: "body-only signature", secrets: [][]byte{current}, signWith: current, signedAt: at(0), signature: bodyOnly(current, body), want: event.ErrInvalidSignature},
		{name: "missing timestamp", secrets: [][]byte{current}, signWith: current, signedAt: at(0), timestamp: " ", want: event.ErrInvalidSignature},
		{name: "signed timestamp", secrets: [][]byte{current}, signWith: current, signedAt: at(0), timestamp: "+" + strconv.FormatInt(at(0), 10), want: event.ErrInvalidSignature},
		{name: "missing signature", secrets: [][]byte{current}, signWith: current, signedAt: at(0), signature: " ", want: event.ErrInvalidSignature},
		{name: "no accepted secret", secrets: nil, signWith: current, signedAt: at(0), want: event.ErrInvalidSignature},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sig := event.SignCallback(tt.signWith, tt.signedAt, body)
			if tt.signature != "" {
				sig = tt.signature
			}
			ts := strconv.FormatInt(tt.signedAt, 10)
			if tt.timestamp != "" {
				ts = tt.timestamp
			}
			sent := body
			if tt.body != nil {
				sent = tt.body
			}
			err := event.VerifyCallback(tt.secrets, sent, ts, sig, now, window)
			if tt.want == nil && err != nil {
				t.Fatalf("VerifyCallback: %v", err)
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("VerifyCallback = %v, want %v", err, tt.want)
			}
		})
	}
}

// bodyOnly is a signature of the body alone, without the timestamp.
func bodyOnly(secret, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

func TestCallbackHeadersVerify(t *testing.T) {
	secret := []byte("current-secret-of-at-least-32-bytes!")
	now := time.Unix(1_800_000_000, 0)
	body := []byte(`{"x":1}`)
	h := event.CallbackHeaders(secret, now, body)
	if h[event.SignatureTimestampHeader] != "1800000000" {
		t.Fatalf("timestamp header %q", h[event.SignatureTimestampHeader])
	}
	if err := event.VerifyCallback([][]byte{secret}, body, h[event.SignatureTimestampHeader], h[event.SignatureHeader], now, time.Minute); err != nil {
		t.Fatal(err)
	}
}

// FuzzVerifyCallback checks that verification never panics and accepts a
// callback only when it carries exactly what SignCallback produced for the
// same secret, timestamp and body, within the window.
func FuzzVerifyCallback(f *testing.F) {
	secret := []byte("current-secret-of-at-least-32-bytes!")
	now := time.Unix(1_800_000_000, 0)
	window := 5 * time.Minute
	body := []byte(`{"callbackId":"CB-1"}`)
	f.Add(body, "1800000000", event.SignCallback(secret, 1_800_000_000, body))
	f.Add(body, "1799999700", event.SignCallback(secret, 1_799_999_700, body))
	f.Add(body, "1799999699", event.SignCallback(secret, 1_799_999_699, body))
	f.Add(body, "1800000000", event.SignCallback([]byte("other"), 1_800_000_000, body))
	f.Add([]byte{}, "", "")
	f.Add(body, "-1", "sha256=")
	f.Add(body, "99999999999999999999", "sha256=00")
	f.Add(body, "01800000000", event.SignCallback(secret, 1_800_000_000, body))
	f.Fuzz(func(t *testing.T, body []byte, timestamp, signature string) {
		err := event.VerifyCallback([][]byte{secret}, body, timestamp, signature, now, window)
		if err != nil {
			if !errors.Is(err, event.ErrInvalidSignature) && !errors.Is(err, event.ErrStaleSignature) {
				t.Fatalf("VerifyCallback = %v, want ErrInvalidSignature or ErrStaleSignature", err)
			}
			return
		}
		ts, perr := strconv.ParseInt(timestamp, 10, 64)
		if perr != nil || strconv.FormatInt(ts, 10) != timestamp {
			t.Fatalf("accepted timestamp %q, which is not canonical Unix seconds", timestamp)
		}
		if d := now.Sub(time.Unix(ts, 0)); d > window || d < -window {
			t.Fatalf("accepted timestamp %d outside the window", ts)
		}
		if want := event.SignCallback(secret, ts, body); signature != want {
			t.Fatalf("accepted signature %q, want %q", signature, want)
		}
	})
}
