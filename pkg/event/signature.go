package event

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The headers that carry a callback's signature (docs/security.md,
// Callback signing). The signature covers the timestamp as well as the
// body, so a captured callback cannot be replayed once the receiver's
// window has passed.
const (
	// SignatureHeader carries "sha256=<hex HMAC-SHA256(secret, timestamp
	// + "." + body)>".
	SignatureHeader = "X-Signature"
	// SignatureTimestampHeader carries the Unix time in seconds at which
	// the sender signed.
	SignatureTimestampHeader = "X-Signature-Timestamp"
)

// DefaultReplayWindow is how far a callback's timestamp may be from the
// receiver's clock, either way (CALLBACK_REPLAY_WINDOW).
const DefaultReplayWindow = 5 * time.Minute

// The reasons VerifyCallback refuses a callback.
var (
	// ErrInvalidSignature is a missing or malformed signature or
	// timestamp, or a signature no accepted secret produced.
	ErrInvalidSignature = errors.New("invalid callback signature")
	// ErrStaleSignature is a well-formed timestamp outside the replay
	// window: too old, or too far in the future.
	ErrStaleSignature = errors.New("callback timestamp outside the replay window")
)

// SignCallback returns the SignatureHeader value of body signed at
// timestamp (Unix seconds) under secret.
func SignCallback(secret []byte, timestamp int64, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(strconv.FormatInt(timestamp, 10)))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// CallbackHeaders returns both signature headers of body signed now under
// secret.
func CallbackHeaders(secret []byte, now time.Time, body []byte) map[string]string {
	ts := now.Unix()
	return map[string]string{
		SignatureTimestampHeader: strconv.FormatInt(ts, 10),
		SignatureHeader:          SignCallback(secret, ts, body),
	}
}

// VerifyCallback checks the headers of a received callback: timestamp must
// be within window of now, and signature must be SignCallback of body at
// that timestamp under one of secrets (the current secret and, while it is
// rotated, the previous ones). The comparison takes constant time for each
// secret. It returns nil, or an error wrapping ErrInvalidSignature or
// ErrStaleSignature.
func VerifyCallback(secrets [][]byte, body []byte, timestamp, signature string, now time.Time, window time.Duration) error {
	// Only plain decimal seconds: ParseInt would also take "+12", which
	// signs differently than the sender's "12".
	if timestamp == "" || len(timestamp) > 19 || strings.TrimLeft(timestamp, "0123456789") != "" ||
		(len(timestamp) > 1 && timestamp[0] == '0') {
		return fmt.Errorf("%w: %s must be Unix seconds", ErrInvalidSignature, SignatureTimestampHeader)
	}
	ts, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %s must be Unix seconds", ErrInvalidSignature, SignatureTimestampHeader)
	}
	got, ok := strings.CutPrefix(signature, "sha256=")
	if !ok {
		return fmt.Errorf("%w: %s must be sha256=<hex>", ErrInvalidSignature, SignatureHeader)
	}
	if skew := now.Sub(time.Unix(ts, 0)); skew > window || skew < -window {
		return fmt.Errorf("%w: signed %s from the receiver's clock, more than %s", ErrStaleSignature, skew.Round(time.Second), window)
	}
	match := false
	for _, secret := range secrets {
		want := SignCallback(secret, ts, body)[len("sha256="):]
		if hmac.Equal([]byte(want), []byte(got)) {
			match = true
		}
	}
	if !match {
		return fmt.Errorf("%w: no accepted secret signed this timestamp and body", ErrInvalidSignature)
	}
	return nil
}
