package admin

import (
	"errors"
	"net/http"

	"github.com/reliable-orders/fulfillment/pkg/failpoint"
	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
)

// mapError turns the errors of the packages the admin endpoints drive into
// their answers: an event id the outbox does not hold and an undeclared
// fail point are 404s with their own codes, a fail point request the
// registry refuses otherwise (an unknown action) is a 400. Anything else
// passes through to the server's own mapping.
func mapError(err error) error {
	switch {
	case errors.Is(err, outbox.ErrNotFound):
		return &httpapi.Error{Status: http.StatusNotFound, BusinessCode: CodeEventNotFound, Message: err.Error(), Err: err}
	case errors.Is(err, failpoint.ErrUnknown):
		return &httpapi.Error{Status: http.StatusNotFound, BusinessCode: CodeUnknownFailPoint, Message: err.Error()}
	case errors.Is(err, failpoint.ErrBadAction):
		return httpapi.BadRequest("%v", err)
	}
	return err
}
