package payment_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/reliable-orders/fulfillment/pkg/rules"
	"github.com/reliable-orders/fulfillment/services/payment/internal/domain/payment"
)

func dec(s string) decimal.Decimal { return decimal.RequireFromString(s) }

func TestNewRequest(t *testing.T) {
	tests := []struct {
		name      string
		orderID   string
		amount    string
		currency  string
		wantField string // empty: valid
		wantAmt   string
	}{
		{"valid two places", "O-1", "80.00", "CNY", "", "80"},
		{"valid integer", "O-1", "80", "CNY", "", "80"},
		{"valid one place", "O-1", "0.5", "USD", "", "0.5"},
		{"missing order id", "", "80.00", "CNY", "orderId", ""},
		// The order service's rule for an order id, which is all a payment
		// can be for.
		{"order id with a space", "O 1", "80.00", "CNY", "orderId", ""},
		{"order id too long", strings.Repeat("O", 129), "80.00", "CNY", "orderId", ""},
		{"leading zero", "O-1", "080.00", "CNY", "amount", ""},
		{"empty amount", "O-1", "", "CNY", "amount", ""},
		{"zero amount", "O-1", "0.00", "CNY", "amount", ""},
		{"negative amount", "O-1", "-1.00", "CNY", "amount", ""},
		{"three places", "O-1", "80.001", "CNY", "amount", ""},
		{"exponent", "O-1", "8e1", "CNY", "amount", ""},
		{"spaces", "O-1", " 80.00", "CNY", "amount", ""},
		{"trailing dot", "O-1", "80.", "CNY", "amount", ""},
		{"too many digits", "O-1", "12345678901234567.00", "CNY", "amount", ""},
		{"largest", "O-1", "9999999999999999.99", "CNY", "", "9999999999999999.99"},
		{"lower-case currency", "O-1", "80.00", "cny", "currency", ""},
		{"short currency", "O-1", "80.00", "CN", "currency", ""},
		{"long currency", "O-1", "80.00", "CNYY", "currency", ""},
		{"missing currency", "O-1", "80.00", "", "currency", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := payment.NewRequest(tt.orderID, tt.amount, tt.currency)
			if tt.wantField == "" {
				if err != nil {
					t.Fatalf("NewRequest: %v", err)
				}
				if !r.Amount.Equal(dec(tt.wantAmt)) {
					t.Fatalf("amount = %s, want %s", r.Amount, tt.wantAmt)
				}
				return
			}
			var fe *rules.RuleError
			if !errors.As(err, &fe) {
				t.Fatalf("error = %v, want *rules.RuleError", err)
			}
			if fe.Field != tt.wantField || !strings.HasPrefix(fe.Error(), tt.wantField) {
				t.Fatalf("field = %s (%v), want %s", fe.Field, fe, tt.wantField)
			}
		})
	}
}

func TestCheckPayable(t *testing.T) {
	order := payment.Order{ID: "O-1", Status: payment.OrderStatusPendingPayment, Version: 2, Amount: dec("80.00"), Currency: "CNY"}
	withStatus := func(s string) payment.Order { o := order; o.Status = s; return o }
	tests := []struct {
		name    string
		order   payment.Order
		amount  string
		curr    string
		wantErr error
	}{
		{"payable", order, "80.00", "CNY", nil},
		{"same amount other scale", order, "80", "CNY", nil},
		{"created", withStatus("CREATED"), "80.00", "CNY", payment.ErrOrderNotPayable},
		{"paid", withStatus("PAID"), "80.00", "CNY", payment.ErrOrderNotPayable},
		{"cancelled", withStatus("CANCELLED"), "80.00", "CNY", payment.ErrOrderNotPayable},
		{"less", order, "79.99", "CNY", payment.ErrAmountMismatch},
		{"more", order, "80.01", "CNY", payment.ErrAmountMismatch},
		{"other currency", order, "80.00", "USD", payment.ErrAmountMismatch},
		{"not payable wins over mismatch", withStatus("PAID"), "1.00", "USD", payment.ErrOrderNotPayable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := payment.NewRequest("O-1", tt.amount, tt.curr)
			if err != nil {
				t.Fatal(err)
			}
			if err := payment.CheckPayable(tt.order, r); !errors.Is(err, tt.wantErr) {
				t.Fatalf("CheckPayable = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func TestNewPayment(t *testing.T) {
	r, err := payment.NewRequest("O-1", "80.00", "CNY")
	if err != nil {
		t.Fatal(err)
	}
	p := payment.New(r)
	if !strings.HasPrefix(p.ID, "P-") || p.Status != payment.StatusSucceeded || !p.Refunded.IsZero() || p.OrderID != "O-1" {
		t.Fatalf("New = %+v", p)
	}
	if other := payment.New(r); other.ID == p.ID {
		t.Fatalf("two payments share id %s", p.ID)
	}
	if err := p.Matches(r); err != nil {
		t.Fatalf("Matches(same request) = %v", err)
	}
	r2, _ := payment.NewRequest("O-1", "81.00", "CNY")
	if err := p.Matches(r2); !errors.Is(err, payment.ErrAmountMismatch) {
		t.Fatalf("Matches(other amount) = %v, want ErrAmountMismatch", err)
	}
}

func TestRefund(t *testing.T) {
	tests := []struct {
		name         string
		refunded     string
		amount       string
		currency     string
		wantReason   string // empty: accepted
		wantRefunded string
		wantStatus   payment.Status
	}{
		{"full", "0", "80.00", "CNY", "", "80.00", payment.StatusRefunded},
		{"partial", "0", "30.00", "CNY", "", "30.00", payment.StatusPartiallyRefunded},
		{"rest after partial", "30.00", "50.00", "CNY", "", "80.00", payment.StatusRefunded},
		{"second partial", "30.00", "10", "CNY", "", "40.00", payment.StatusPartiallyRefunded},
		{"above paid", "0", "80.01", "CNY", payment.ReasonRefundExceedsPayment, "0", payment.StatusSucceeded},
		{"above rest", "30.00", "50.01", "CNY", payment.ReasonRefundExceedsPayment, "30.00", payment.StatusPartiallyRefunded},
		{"after full", "80.00", "0.01", "CNY", payment.ReasonRefundExceedsPayment, "80.00", payment.StatusRefunded},
		{"zero", "0", "0", "CNY", payment.ReasonInvalidRefundAmount, "0", payment.StatusSucceeded},
		{"fraction of a cent", "0", "1.001", "CNY", payment.ReasonInvalidRefundAmount, "0", payment.StatusSucceeded},
		{"other currency", "0", "10.00", "USD", payment.ReasonCurrencyMismatch, "0", payment.StatusSucceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status := payment.StatusSucceeded
			switch {
			case dec(tt.refunded).Equal(dec("80")):
				status = payment.StatusRefunded
			case dec(tt.refunded).IsPositive():
				status = payment.StatusPartiallyRefunded
			}
			p := payment.Payment{ID: "P-1", OrderID: "O-1", Amount: dec("80.00"), Currency: "CNY",
				Status: status, Refunded: dec(tt.refunded)}
			err := p.Refund(dec(tt.amount), tt.currency)
			if tt.wantReason == "" {
				if err != nil {
					t.Fatalf("Refund: %v", err)
				}
			} else {
				var re *payment.RefundError
				if !errors.As(err, &re) || re.Reason != tt.wantReason {
					t.Fatalf("Refund error = %v, want reason %s", err, tt.wantReason)
				}
			}
			if !p.Refunded.Equal(dec(tt.wantRefunded)) || p.Status != tt.wantStatus {
				t.Fatalf("after refund: refunded %s status %s, want %s %s", p.Refunded, p.Status, tt.wantRefunded, tt.wantStatus)
			}
		})
	}
}
