package httpapi

import (
	"bufio"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"
)

// Business codes of the requests a browser may send but no client of a
// service would.
const (
	CodeUnsupportedMediaType = "UNSUPPORTED_MEDIA_TYPE"
	CodeForbiddenOrigin      = "FORBIDDEN_ORIGIN"
	CodeForbiddenHost        = "FORBIDDEN_HOST"
)

// changesState reports whether method may change something: the methods
// guardOrigin checks.
func changesState(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// guardOrigin refuses what a web page open in the developer's or an
// operator's browser could make it send to a service (docs/security.md):
// the business routes have no credentials, and in development mode neither
// has /admin, so a page's no-cors fetch or form would otherwise be
// executed.
//   - With loopbackHost (a development service listening on loopback), a
//     Host that is not a loopback name or address answers 403
//     FORBIDDEN_HOST, whatever the method: a page that rebinds its own
//     name to 127.0.0.1 sends its own name as Host (DNS rebinding).
//   - A POST, PUT, PATCH or DELETE whose Origin is not the request's own
//     origin answers 403 FORBIDDEN_ORIGIN: browsers send Origin on every
//     such request, other clients send none.
//   - A POST, PUT, PATCH or DELETE with a body that is not
//     Content-Type: application/json answers 415 UNSUPPORTED_MEDIA_TYPE:
//     a page cannot send that type cross-site without a CORS preflight,
//     which no service answers. A request without a body (a checkout)
//     needs no type.
func guardOrigin(loopbackHost bool) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			if loopbackHost && !isLoopbackHost(r.Host) {
				return &Error{Status: http.StatusForbidden, BusinessCode: CodeForbiddenHost,
					Message: "Host " + quoteHeader(r.Host) + ": this development service answers a loopback name or address only (localhost, 127.0.0.1, [::1])"}
			}
			if !changesState(r.Method) {
				return next(c)
			}
			if origin := r.Header.Get("Origin"); origin != "" && !sameOrigin(origin, r.Host) {
				return &Error{Status: http.StatusForbidden, BusinessCode: CodeForbiddenOrigin,
					Message: "Origin " + quoteHeader(origin) + ": a change is accepted from the service's own origin only"}
			}
			hasBody, err := peekBody(r)
			if err != nil {
				return BadRequest("read body: %v", err)
			}
			if hasBody {
				if mt, _, err := mime.ParseMediaType(r.Header.Get(echo.HeaderContentType)); err != nil || mt != echo.MIMEApplicationJSON {
					return &Error{Status: http.StatusUnsupportedMediaType, BusinessCode: CodeUnsupportedMediaType,
						Message: r.Method + " with a body needs Content-Type: application/json"}
				}
			}
			return next(c)
		}
	}
}

// peekBody reports whether r has a body of at least one byte. A body of
// unknown length (chunked) is peeked at and put back.
func peekBody(r *http.Request) (bool, error) {
	switch {
	case r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0:
		return false, nil
	case r.ContentLength > 0:
		return true, nil
	}
	br := bufio.NewReaderSize(r.Body, 16)
	if _, err := br.Peek(1); err == io.EOF {
		return false, nil
	} else if err != nil {
		return false, err
	}
	r.Body = struct {
		io.Reader
		io.Closer
	}{br, r.Body}
	return true, nil
}

// sameOrigin reports whether origin is the origin of a request to host:
// http or https, host equal to host (the port included), nothing else.
// "null", which sandboxed pages and file:// send, is nobody's origin.
func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return false
	}
	return strings.EqualFold(u.Host, host)
}

// isLoopbackHost reports whether a Host header names this machine's
// loopback: localhost or a loopback address, with or without a port.
func isLoopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// quoteHeader quotes a header value for a message, cut short.
func quoteHeader(v string) string {
	const show = 100
	if len(v) > show {
		v = v[:show]
	}
	return strconv.Quote(v)
}
