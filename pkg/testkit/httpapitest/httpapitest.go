// Package httpapitest serves requests to a service's Echo handlers in
// memory and checks their answers by the suite's HTTP conventions, for the
// fuzz targets of every service's request decoders.
package httpapitest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

// Do serves one request with body as JSON on h.
func Do(h http.Handler, method, target string, body []byte, header map[string]string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// CheckAnswer fails the test unless rec is a 2xx or 4xx answer whose body
// is a JSON object, and a 4xx one carries a businessCode and a message (as
// pkg/httpapi writes every error). requireCode asks the same businessCode
// of a 2xx answer, for the commands that answer one. A 5xx (a panic is one,
// through Echo's recover) is a decoder or validation gap: bad input must
// be refused as the client's, never fail the server.
func CheckAnswer(tb testing.TB, rec *httptest.ResponseRecorder, requireCode bool) {
	tb.Helper()
	var body map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		tb.Fatalf("answer %d is not a JSON object (%v): %s", rec.Code, err, rec.Body)
	}
	switch {
	case rec.Code >= 200 && rec.Code < 300:
		if requireCode {
			if code, _ := body["businessCode"].(string); code == "" {
				tb.Fatalf("answer %d has no businessCode: %s", rec.Code, rec.Body)
			}
		}
	case rec.Code >= 400 && rec.Code < 500:
		code, _ := body["businessCode"].(string)
		msg, isString := body["message"].(string)
		if code == "" || !isString || msg == "" {
			tb.Fatalf("answer %d is not {\"businessCode\",\"message\"}: %s", rec.Code, rec.Body)
		}
	default:
		tb.Fatalf("answer %d, want 2xx or 4xx: %s", rec.Code, rec.Body)
	}
}
