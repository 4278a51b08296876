package rules

import (
	"bytes"
	"fmt"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// referenceBase is where rules.json says it lives ($id).
const referenceBase = "https://schemas.reliable-orders.dev/"

// reference is rules.json's definitions compiled by the generic JSON
// Schema validator: the reference the compiled checks are tested against.
var reference = sync.OnceValues(func() (map[string]*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(Schema()))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource(referenceBase+File, doc); err != nil {
		return nil, err
	}
	out := map[string]*jsonschema.Schema{}
	for _, rule := range []string{RuleID, RuleAmount, RulePositiveAmount, RuleQuantity, RuleCurrency, RuleReason,
		RuleItems, RuleReturnedItems, RulePricedItems} {
		s, err := c.Compile(referenceBase + File + "#/$defs/" + rule)
		if err != nil {
			return nil, fmt.Errorf("compile rule %s: %w", rule, err)
		}
		out[rule] = s
	}
	return out, nil
})

// CheckReference is a value rule function's answer as the generic JSON
// Schema validator evaluates definition rule over v, a value as JSON
// decodes it (string, json.Number): the reference ValidateID and the
// others must agree with. got is how a refused value is quoted back.
func CheckReference(field, rule string, v any, got string) error {
	defs, err := reference()
	if err != nil {
		return fmt.Errorf("load value rules: %w", err)
	}
	if defs[rule].Validate(v) == nil {
		return nil
	}
	return refuse(field, rule, got)
}
