package faultproxy

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
)

// MaxCount bounds a fault's count, as the control API bounds it.
const MaxCount = 1000

// ArmRequest is the body of POST /fault.
type ArmRequest struct {
	Topic string `json:"topic"`
	Count int    `json:"count"`
}

// View is the admin API's answer: the armed fault, if any.
type View struct {
	Fault *Fault `json:"fault"`
	Error string `json:"error,omitempty"`
}

// Handler serves the admin API the compose control process uses:
//
//	GET    /fault    the armed fault and its hits
//	POST   /fault    {"topic":"order-events","count":4} arms it (JSON only)
//	DELETE /fault    removes it
//	GET    /healthz  200 while the proxy runs
func (p *Proxy) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
	})
	mux.HandleFunc("GET /fault", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, p.view())
	})
	mux.HandleFunc("DELETE /fault", func(w http.ResponseWriter, _ *http.Request) {
		p.Clear()
		writeJSON(w, http.StatusOK, p.view())
	})
	mux.HandleFunc("POST /fault", func(w http.ResponseWriter, r *http.Request) {
		req, err := decodeArm(r)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, View{Error: err.Error()})
			return
		}
		p.Arm(req.Topic, req.Count)
		writeJSON(w, http.StatusOK, p.view())
	})
	return mux
}

func (p *Proxy) view() View {
	f, ok := p.Fault()
	if !ok {
		return View{}
	}
	return View{Fault: &f}
}

// decodeArm reads a POST /fault body; a JSON content type is required, so
// a browser's form post cannot arm a fault.
func decodeArm(r *http.Request) (ArmRequest, error) {
	var req ArmRequest
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		return req, errors.New("content type: want application/json")
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, fmt.Errorf(`body: want {"topic":"...","count":N}: %w`, err)
	}
	switch {
	case req.Topic == "":
		return req, errors.New("topic is required")
	case req.Count < 1 || req.Count > MaxCount:
		return req, fmt.Errorf("count %d: want 1..%d", req.Count, MaxCount)
	}
	return req, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
