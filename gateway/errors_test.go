package gateway

import (
	"fmt"
	"testing"

	"github.com/lakegate/lakegate/actors"
	"github.com/lakegate/lakegate/protocol/pb"
)

// TestActorBoundsHaveServerErrors checks that the actors' bounds reach a
// client as the Pulsar code it retries on, not UnknownError.
func TestActorBoundsHaveServerErrors(t *testing.T) {
	for _, c := range []struct {
		err  error
		want pb.ServerError
	}{
		{actors.ErrPartitionBusy, pb.ServerError_ServiceNotReady},
		{actors.ErrSubscriptionBusy, pb.ServerError_ConsumerBusy},
		{actors.ErrTxnConflict, pb.ServerError_TransactionConflict},
		{actors.ErrTxnAckLimit, pb.ServerError_NotAllowedError},
	} {
		if got := serverError(fmt.Errorf("wrapped: %w", c.err)); got != c.want {
			t.Errorf("%v: %v, want %v", c.err, got, c.want)
		}
	}
}
