package admin

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/pkg/rules"
)

// OperatorHeader names who asks for an operator action (a refund, a
// replay, a republish, a reconciliation run): a person, or the
// reconciliation run acting for one. The action's audit records it.
const OperatorHeader = "X-Operator"

// CodeOperatorRequired answers an operator action without OperatorHeader.
const CodeOperatorRequired = "OPERATOR_REQUIRED"

// Operator returns who asks for the operator action of c: OperatorHeader,
// required (400 OPERATOR_REQUIRED without it), and held to the rule of
// free text (one line, no control characters, at most the reason's
// length), since the audit stores and shows it.
func Operator(c echo.Context) (string, error) {
	op := c.Request().Header.Get(OperatorHeader)
	if strings.TrimSpace(op) == "" {
		return "", &httpapi.Error{Status: http.StatusBadRequest, BusinessCode: CodeOperatorRequired,
			Message: OperatorHeader + " is required: name who asks for this action; the audit records it"}
	}
	if err := rules.ValidateReason(OperatorHeader, op); err != nil {
		return "", err
	}
	return op, nil
}
