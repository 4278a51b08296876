package event_test

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/rules"
)

// The schemas under testdata/compat are the published contract of each
// (eventType, eventVersion). A change to a schema inside one version must be
// FULL compatible with it: old readers read new events and new readers read
// old events. So a field may be added only as optional, and no field may be
// removed, retyped or become (un)required. Anything else is a new
// eventVersion: a new schema file with a new baseline.
func TestSchemasStayFullyCompatibleWithinAVersion(t *testing.T) {
	names, err := fs.Glob(event.Schemas, "schemas/*.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		base := filepath.Base(name)
		t.Run(base, func(t *testing.T) {
			published, err := os.ReadFile(filepath.Join("testdata", "compat", base))
			if err != nil {
				t.Fatalf("no published baseline for %s: copy it to testdata/compat once its version is released", base)
			}
			current, err := event.Schemas.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			for _, problem := range compatibility(t, published, current) {
				t.Error(problem)
			}
		})
	}
}

func TestCompatibilityCheckCatchesBreakingChanges(t *testing.T) {
	published := `{"properties":{"data":{"type":"object","required":["a"],"properties":{"a":{"type":"string"},"b":{"type":"integer"}}}}}`
	tests := []struct {
		name     string
		current  string
		breaking bool
	}{
		{"unchanged", published, false},
		{"optional field added", `{"properties":{"data":{"type":"object","required":["a"],"properties":{"a":{"type":"string"},"b":{"type":"integer"},"c":{"type":"string"}}}}}`, false},
		{"field removed", `{"properties":{"data":{"type":"object","required":["a"],"properties":{"a":{"type":"string"}}}}}`, true},
		{"field retyped", `{"properties":{"data":{"type":"object","required":["a"],"properties":{"a":{"type":"number"},"b":{"type":"integer"}}}}}`, true},
		{"new required field", `{"properties":{"data":{"type":"object","required":["a","c"],"properties":{"a":{"type":"string"},"b":{"type":"integer"},"c":{"type":"string"}}}}}`, true},
		{"required dropped", `{"properties":{"data":{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}}}}}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := compatibility(t, []byte(published), []byte(tt.current))
			if (len(got) > 0) != tt.breaking {
				t.Fatalf("problems %v, want breaking=%v", got, tt.breaking)
			}
		})
	}
}

type schemaNode struct {
	Ref        string                 `json:"$ref"`
	Type       any                    `json:"type"`
	Const      any                    `json:"const"`
	Required   []string               `json:"required"`
	Properties map[string]*schemaNode `json:"properties"`
	Items      *schemaNode            `json:"items"`
}

func compatibility(t *testing.T, published, current []byte) []string {
	t.Helper()
	var old, cur schemaNode
	if err := json.Unmarshal(published, &old); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(current, &cur); err != nil {
		t.Fatal(err)
	}
	return compareNodes("$", &old, &cur, ruleDefs(t))
}

// ruleDefs are the definitions of rules.json, which schema fields reference
// ("rules.json#/$defs/id"): a field's shape is its own plus its rule's.
func ruleDefs(t *testing.T) map[string]*schemaNode {
	t.Helper()
	raw := rules.Schema()
	var doc struct {
		Defs map[string]*schemaNode `json:"$defs"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Defs
}

// resolved returns n with the fields of the rule it references filled in
// where n leaves them out.
func resolved(n *schemaNode, defs map[string]*schemaNode) *schemaNode {
	if n == nil || n.Ref == "" {
		return n
	}
	name := n.Ref[strings.LastIndex(n.Ref, "/")+1:]
	def, ok := defs[name]
	if !ok {
		return n
	}
	def = resolved(def, defs)
	out := *n
	out.Ref = ""
	if out.Type == nil {
		out.Type = def.Type
	}
	if out.Required == nil {
		out.Required = def.Required
	}
	if out.Properties == nil {
		out.Properties = def.Properties
	}
	if out.Items == nil {
		out.Items = def.Items
	}
	return &out
}

func compareNodes(path string, old, cur *schemaNode, defs map[string]*schemaNode) []string {
	old, cur = resolved(old, defs), resolved(cur, defs)
	var problems []string
	if fmt.Sprint(old.Type) != fmt.Sprint(cur.Type) {
		problems = append(problems, fmt.Sprintf("%s: type changed from %v to %v", path, old.Type, cur.Type))
	}
	if fmt.Sprint(old.Const) != fmt.Sprint(cur.Const) {
		problems = append(problems, fmt.Sprintf("%s: const changed from %v to %v", path, old.Const, cur.Const))
	}
	oldReq, curReq := slices.Clone(old.Required), slices.Clone(cur.Required)
	sort.Strings(oldReq)
	sort.Strings(curReq)
	if !slices.Equal(oldReq, curReq) {
		problems = append(problems, fmt.Sprintf("%s: required fields changed from %v to %v", path, oldReq, curReq))
	}
	for name, o := range old.Properties {
		c, ok := cur.Properties[name]
		if !ok {
			problems = append(problems, fmt.Sprintf("%s.%s: field removed", path, name))
			continue
		}
		problems = append(problems, compareNodes(path+"."+name, o, c, defs)...)
	}
	if old.Items != nil {
		if cur.Items == nil {
			problems = append(problems, path+"[]: item schema removed")
		} else {
			problems = append(problems, compareNodes(path+"[]", old.Items, cur.Items, defs)...)
		}
	}
	return problems
}
