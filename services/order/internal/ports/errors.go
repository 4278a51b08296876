package ports

import (
	"errors"
	"net/http"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/services/order/internal/domain/order"
)

// Business codes of the order service, besides httpapi's shared ones.
const (
	CodeOrderNotFound      = "ORDER_NOT_FOUND"
	CodeOrderExists        = "ORDER_EXISTS"
	CodeInvalidSignature   = "INVALID_SIGNATURE"
	CodeConcurrentUpdate   = "CONCURRENT_UPDATE"
	CodeNotCheckoutable    = "ORDER_NOT_CHECKOUTABLE"
	CodeNotCancellable     = "ORDER_NOT_CANCELLABLE"
	CodeNotRefundable      = "ORDER_NOT_REFUNDABLE"
	CodeNotPayable         = "ORDER_NOT_PAYABLE"
	CodeNotRefunding       = "ORDER_NOT_REFUNDING"
	CodeAmountMismatch     = "AMOUNT_MISMATCH"
	CodeRefundMismatch     = "REFUND_MISMATCH"
	CodeOrderMismatch      = "ORDER_MISMATCH"
	CodeBusinessRejection  = "BUSINESS_REJECTION"
	CodeRefundExceedsOrder = "REFUND_EXCEEDS_ORDER"
	// CodeRefundInFlight answers a shortage reported while a refund of the
	// order is in flight: a conflict (409), so the inventory service's
	// relay delivers it again once that refund is settled.
	CodeRefundInFlight = "REFUND_IN_FLIGHT"
	// CodePaymentRejected answers a payment the order could not take: it
	// is recorded (OrderPaymentRejected) and returned to the customer.
	CodePaymentRejected = "PAYMENT_REJECTED"
)

// CodeSignatureExpired answers a callback signed outside the replay window
// (CALLBACK_REPLAY_WINDOW): too old, or dated in the future.
const CodeSignatureExpired = "SIGNATURE_EXPIRED"

// rejectionCode names a business rejection: an accepted request whose
// answer is "no" (200 with this businessCode), as opposed to a malformed
// request or a failure. It reports false for any other error.
func rejectionCode(err error) (string, bool) {
	var terr *order.TransitionError
	var merr *order.MismatchError
	var rerr *order.ReturnError
	switch {
	case errors.As(err, &rerr):
		return CodeRefundExceedsOrder, true
	case errors.As(err, &terr):
		switch terr.Action {
		case order.ActionCheckout:
			return CodeNotCheckoutable, true
		case order.ActionCancel:
			return CodeNotCancellable, true
		case order.ActionRequestRefund:
			return CodeNotRefundable, true
		case order.ActionPay:
			return CodeNotPayable, true
		case order.ActionCompleteRefund, order.ActionRejectRefund:
			return CodeNotRefunding, true
		}
		return CodeBusinessRejection, true
	case errors.As(err, &merr):
		switch merr.Field {
		case "amount", "currency":
			return CodeAmountMismatch, true
		case "refundId":
			return CodeRefundMismatch, true
		case "orderId":
			return CodeOrderMismatch, true
		}
		return CodeBusinessRejection, true
	}
	return "", false
}

// MapError is the one place the order service's errors become HTTP
// answers (httpapi.Config.MapError). It returns nil for errors it does not
// know: httpapi answers a broken value rule (*rules.RuleError) with 400 and
// anything else with 500.
func MapError(err error) *httpapi.Error {
	switch {
	case errors.Is(err, event.ErrInvalidSignature):
		return &httpapi.Error{Status: http.StatusUnauthorized, BusinessCode: CodeInvalidSignature,
			Message: err.Error() + ": want " + event.SignatureTimestampHeader + " (Unix seconds) and " +
				event.SignatureHeader + ": sha256=<hex HMAC-SHA256 of the timestamp, \".\" and the raw body>"}
	case errors.Is(err, event.ErrStaleSignature):
		return &httpapi.Error{Status: http.StatusUnauthorized, BusinessCode: CodeSignatureExpired, Message: err.Error()}
	case errors.Is(err, order.ErrNotFound):
		return &httpapi.Error{Status: http.StatusNotFound, BusinessCode: CodeOrderNotFound, Message: err.Error()}
	case errors.Is(err, order.ErrExists):
		return &httpapi.Error{Status: http.StatusConflict, BusinessCode: CodeOrderExists, Message: err.Error()}
	case errors.Is(err, order.ErrConcurrentUpdate):
		return &httpapi.Error{Status: http.StatusConflict, BusinessCode: CodeConcurrentUpdate, Message: err.Error()}
	case errors.Is(err, order.ErrRefundInFlight):
		return &httpapi.Error{Status: http.StatusConflict, BusinessCode: CodeRefundInFlight, Message: err.Error()}
	}
	if code, ok := rejectionCode(err); ok {
		return &httpapi.Error{Status: http.StatusOK, BusinessCode: code, Message: err.Error()}
	}
	return nil
}

// outcome splits the result of a command into the businessCode of a 200
// answer (SUCCESS or a named rejection, with its message) and an error for
// MapError.
func outcome(err error) (code, message string, _ error) {
	if err == nil {
		return httpapi.CodeSuccess, "", nil
	}
	if code, ok := rejectionCode(err); ok {
		return code, err.Error(), nil
	}
	return "", "", err
}
