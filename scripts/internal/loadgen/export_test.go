package loadgen

import (
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// PaidRecord is the record the broker path publishes for order i of run
// runID over skus SKUs, occurred at now, built from the OrderPaid template.
func PaidRecord(runID string, skus, i int, now time.Time) (*kgo.Record, error) {
	t, err := newPaidTemplate(runID, skus)
	if err != nil {
		return nil, err
	}
	var rec kgo.Record
	t.record(&rec, nil, nil, i, appendStamp(nil, now))
	return &rec, nil
}
