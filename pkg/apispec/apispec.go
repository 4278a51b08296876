// Package apispec describes a service's HTTP API as an OpenAPI 3.1
// document generated from the Go types its handlers decode and answer
// (docs/decisions.md, The HTTP contract is generated from the handlers'
// types). Each route is declared once more, next to its registration, as an
// Operation naming those types; Document reflects them into the document
// the service serves on GET /openapi.json, and Check holds the declared
// operations and the routes Echo registered to each other, so neither can
// change without the other.
package apispec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path"
	"reflect"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/swaggest/jsonschema-go"
	"github.com/swaggest/openapi-go"
	"github.com/swaggest/openapi-go/openapi31"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/httpapi"
)

// Path is where every service serves its document.
const Path = "/openapi.json"

// Version is the documents' info.version: the contract is versioned with
// the suite, not per service.
const Version = "1.0.0"

// adminSecurity names the bearer token of the /admin routes in the
// documents (ADMIN_TOKEN).
const adminSecurity = "adminToken"

// Operation is one route of a service's API as its document describes it.
type Operation struct {
	// Method and Path are the route as registered with Echo:
	// "GET", "/orders/:id".
	Method string
	Path   string
	// Summary is the operation's one-line description.
	Summary string
	// Query names the query parameters the route reads; they are optional.
	Query []string
	// Body is a value of the JSON request body's type; nil for none.
	// OptionalBody marks a body the route accepts but does not need.
	Body         any
	OptionalBody bool
	// Answer is a value of the JSON type of the answer with Status
	// (200 when zero); nil with ContentType for a body that is not JSON.
	Answer      any
	Status      int
	ContentType string
}

// admin reports whether the route is behind the admin token.
func (o Operation) admin() bool { return o.Path == "/admin" || strings.HasPrefix(o.Path, "/admin/") }

// key names the route as Echo and Check do: "GET /orders/:id".
func (o Operation) key() string { return o.Method + " " + o.Path }

// openAPIPath turns Echo's ":name" segments into OpenAPI's "{name}".
func openAPIPath(p string) (string, []string) {
	segs := strings.Split(p, "/")
	var params []string
	for i, s := range segs {
		if name, ok := strings.CutPrefix(s, ":"); ok {
			segs[i] = "{" + name + "}"
			params = append(params, name)
		}
	}
	return strings.Join(segs, "/"), params
}

// Common are the routes every server of pkg/httpapi registers, with the
// profiling routes when profiling is on (PPROF_ENABLED).
func Common(profiling bool) []Operation {
	type status struct {
		Status string `json:"status"`
	}
	ops := []Operation{
		{Method: http.MethodGet, Path: "/healthz", Summary: "Liveness: the process serves.", Answer: status{}},
		{Method: http.MethodGet, Path: "/readyz", Summary: "Readiness: the service can serve (its database answers).", Answer: status{}},
		{Method: http.MethodGet, Path: "/metrics", Summary: "Prometheus metrics.", ContentType: "text/plain"},
		{Method: http.MethodGet, Path: Path, Summary: "This document.", ContentType: "application/json"},
	}
	if profiling {
		for _, p := range []string{"/", "/cmdline", "/profile", "/symbol", "/trace", "/:name"} {
			op := Operation{Method: http.MethodGet, Path: "/admin/debug/pprof" + p, Summary: "Go's profiles (PPROF_ENABLED).",
				ContentType: "application/octet-stream"}
			if p == "/profile" || p == "/trace" {
				op.Query = []string{"seconds"}
			}
			ops = append(ops, op)
		}
	}
	return ops
}

// Document returns the OpenAPI 3.1 document of ops, titled title, as
// indented JSON. Every operation answers its errors as httpapi.ErrorBody;
// the /admin ones require the admin token.
func Document(title, description string, ops []Operation) ([]byte, error) {
	r := openapi31.NewReflector()
	r.Spec.Info.WithTitle(title).WithVersion(Version).WithDescription(description)
	r.Spec.SetHTTPBearerTokenSecurity(adminSecurity, "", "ADMIN_TOKEN, sent as Authorization: Bearer <token>.")
	r.DefaultOptions = append(r.DefaultOptions, jsonschema.InterceptSchema(shape), jsonschema.InterceptDefName(defName))
	sorted := slices.Clone(ops)
	slices.SortFunc(sorted, func(a, b Operation) int { return strings.Compare(a.Path+" "+a.Method, b.Path+" "+b.Method) })
	for _, op := range sorted {
		if err := add(r, op); err != nil {
			return nil, fmt.Errorf("%s: %w", op.key(), err)
		}
	}
	doc, err := r.Spec.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("marshal document: %w", err)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, doc, "", "  "); err != nil {
		return nil, fmt.Errorf("indent document: %w", err)
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

func add(r *openapi31.Reflector, op Operation) error {
	path, params := openAPIPath(op.Path)
	oc, err := r.NewOperationContext(op.Method, path)
	if err != nil {
		return err
	}
	oc.SetSummary(op.Summary)
	if op.admin() {
		oc.AddSecurity(adminSecurity)
		oc.SetTags("admin")
	}
	if in := parameters(params, op.Query); in != nil {
		oc.AddReqStructure(in)
	}
	if op.Body != nil {
		oc.AddReqStructure(op.Body, func(cu *openapi.ContentUnit) {
			cu.Customize = func(cor openapi.ContentOrReference) {
				if rb, ok := cor.(*openapi31.RequestBodyOrReference); ok && rb.RequestBody != nil {
					rb.RequestBody.WithRequired(!op.OptionalBody)
				}
			}
		})
	}
	status := op.Status
	if status == 0 {
		status = http.StatusOK
	}
	switch {
	case op.Answer != nil:
		oc.AddRespStructure(op.Answer, openapi.WithHTTPStatus(status))
	default:
		oc.AddRespStructure(nil, openapi.WithHTTPStatus(status), openapi.WithContentType(op.ContentType))
	}
	for _, family := range []int{4, 5} {
		oc.AddRespStructure(httpapi.ErrorBody{}, openapi.WithHTTPStatus(family), func(cu *openapi.ContentUnit) {
			cu.Description = "An error: businessCode names it, message says why."
		})
	}
	return r.AddOperation(oc)
}

// parameters returns a value of a struct type whose fields are the path
// parameters and query parameters named, all strings, as the reflector
// reads parameters from tags; nil when there are none.
func parameters(path, query []string) any {
	var fields []reflect.StructField
	for i, name := range path {
		fields = append(fields, reflect.StructField{Name: fmt.Sprintf("P%d", i), Type: reflect.TypeFor[string](),
			Tag: reflect.StructTag(fmt.Sprintf(`path:%q required:"true"`, name))})
	}
	for i, name := range query {
		fields = append(fields, reflect.StructField{Name: fmt.Sprintf("Q%d", i), Type: reflect.TypeFor[string](),
			Tag: reflect.StructTag(fmt.Sprintf(`query:%q`, name))})
	}
	if fields == nil {
		return nil
	}
	return reflect.New(reflect.StructOf(fields)).Interface()
}

// defName names a schema after its Go type. A service's own types (its
// contract package, <service>api, and its ports) are named by the type
// alone: a document holds one service's. The kit's keep their package's
// name (AdminDeadLetters, OutboxEvent), which tells them apart from the
// service's. An instance of a generic type is named by the type alone
// (ReconciliationViews, not the type argument's import path spelt out):
// a service's document holds one instance of each.
func defName(t reflect.Type, def string) string {
	if name, _, ok := strings.Cut(t.Name(), "["); ok {
		return name
	}
	kit := path.Dir(reflect.TypeFor[Operation]().PkgPath())
	if pkg := t.PkgPath(); strings.HasPrefix(pkg, path.Dir(kit)+"/") && !strings.HasPrefix(pkg, kit+"/") {
		name := t.Name()
		return strings.ToUpper(name[:1]) + name[1:]
	}
	return def
}

// moneyPattern is event.Money's JSON: a decimal string with two places.
const moneyPattern = `^-?[0-9]+\.[0-9]{2}$`

// shape adjusts the reflected schemas to what the handlers do: money is a
// string of two decimal places, and an answer's struct requires every
// field it always writes (a json tag without omitempty, not promoted from
// an embedded pointer, which is absent when nil).
func shape(p jsonschema.InterceptSchemaParams) (bool, error) {
	if !p.Value.IsValid() {
		return false, nil
	}
	t := p.Value.Type()
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == reflect.TypeFor[event.Money]() {
		p.Schema.TypeEns().SimpleTypes = nil
		p.Schema.WithType(jsonschema.String.Type()).WithPattern(moneyPattern)
		p.Schema.Properties = nil
		p.Schema.Ref = nil
		return true, nil
	}
	if !p.Processed || t.Kind() != reflect.Struct {
		return false, nil
	}
	oc, ok := openapi.OperationCtx(p.Context)
	if !ok || !oc.IsProcessingResponse() || oc.ProcessingIn() != openapi.InBody {
		return false, nil
	}
	if req := alwaysWritten(t); len(req) > 0 && len(p.Schema.Properties) > 0 {
		p.Schema.Required = req
	}
	return false, nil
}

// alwaysWritten returns the JSON names of the fields encoding/json always
// writes for a value of struct type t.
func alwaysWritten(t reflect.Type) []string {
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		tag, hasTag := f.Tag.Lookup("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" && opts == "" {
			continue
		}
		if f.Anonymous && !hasTag {
			if f.Type.Kind() == reflect.Struct {
				names = append(names, alwaysWritten(f.Type)...)
			}
			continue
		}
		if !f.IsExported() || slices.Contains(strings.Split(opts, ","), "omitempty") ||
			slices.Contains(strings.Split(opts, ","), "omitzero") {
			continue
		}
		if name == "" {
			name = f.Name
		}
		names = append(names, name)
	}
	return names
}

// Check returns an error naming every route registered with Echo that ops
// do not declare and every operation of ops that no route serves, so a
// document cannot omit a route nor describe one the service lacks. Echo's
// own catch-all routes (method "echo_route_any") are not the API's.
func Check(ops []Operation, routes []*echo.Route) error {
	declared := map[string]bool{}
	for _, op := range ops {
		declared[op.key()] = true
	}
	served := map[string]bool{}
	var errs []error
	for _, rt := range routes {
		if rt.Method == echo.RouteNotFound || strings.HasPrefix(rt.Method, "echo_route") {
			continue
		}
		k := rt.Method + " " + rt.Path
		served[k] = true
		if !declared[k] {
			errs = append(errs, fmt.Errorf("route %s is served but not in the OpenAPI document", k))
		}
	}
	for _, op := range ops {
		if !served[op.key()] {
			errs = append(errs, fmt.Errorf("operation %s is in the OpenAPI document but not served", op.key()))
		}
	}
	return errors.Join(errs...)
}
