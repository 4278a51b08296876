package devrun

import (
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
)

// guard lets through only requests a program on this machine sent on
// purpose (docs/security.md, The runner's control API). The control API
// has no token, so a web page the developer visits must not reach it:
//   - Host must name the loopback at the listener's port, which defeats
//     DNS rebinding;
//   - an Origin, when a browser sends one, must be that same loopback
//     origin;
//   - a POST, PUT, PATCH or DELETE must be Content-Type: application/json,
//     which a cross-site form or simple fetch cannot send without a
//     preflight the API never answers.
func guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		port := localPort(r)
		if !loopbackHost(r.Host, port) {
			writeError(w, http.StatusForbidden, fmt.Errorf("host %q: the control API answers 127.0.0.1:%s or localhost:%s only", r.Host, port, port))
			return
		}
		if origin := r.Header.Get("Origin"); origin != "" {
			u, err := url.Parse(origin)
			if err != nil || u.Scheme != "http" || u.Path != "" || !loopbackHost(u.Host, port) {
				writeError(w, http.StatusForbidden, fmt.Errorf("origin %q: the control API accepts requests from its own loopback origin only", origin))
				return
			}
		}
		switch r.Method {
		case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
			if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
				writeError(w, http.StatusUnsupportedMediaType, fmt.Errorf("%s %s: want Content-Type: application/json", r.Method, r.URL.Path))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// localPort is the port the request arrived on.
func localPort(r *http.Request) string {
	if addr, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if _, port, err := net.SplitHostPort(addr.String()); err == nil {
			return port
		}
	}
	return ""
}

// loopbackHost reports whether hostport names this machine's loopback at
// port.
func loopbackHost(hostport, port string) bool {
	host, p, err := net.SplitHostPort(hostport)
	if err != nil || p != port || port == "" {
		return false
	}
	return strings.EqualFold(host, "localhost") || host == "127.0.0.1" || host == "::1"
}

// RestartVarsAllowed are the variables a restart may add, a * standing
// for the rest of a name: the ones drills and tests turn (fail points,
// retry, batching, parking, relay pacing, log level). Anything else,
// LD_PRELOAD, PATH or DATABASE_URL say, would let a caller run code or
// redirect a service.
const RestartVarsAllowed = "FAILPOINTS, LOG_LEVEL, RETRY_*, CONSUMER_BATCH_*, PARK_*, OUTBOX_*"

// restartVarAllowed reports whether RestartVarsAllowed names name.
func restartVarAllowed(name string) bool {
	return slices.ContainsFunc(strings.Split(RestartVarsAllowed, ", "), func(pattern string) bool {
		// Variable names hold no '/', the only byte * does not match.
		ok, _ := path.Match(pattern, name)
		return ok
	})
}

// checkLoopback fails unless addr listens on loopback only.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	ip := net.ParseIP(host)
	if !strings.EqualFold(host, "localhost") && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("%q listens beyond this machine: the control API has no token, use 127.0.0.1", addr)
	}
	return nil
}
