package gateway

import (
	"strings"
	"testing"

	"github.com/lakegate/lakegate/protocol/pb"
)

// Features lakegate does not support answer with a ServerError clients
// treat as final, with a message naming the feature (docs/compatibility.md).
// Regression: a non-persistent topic was InvalidTopicName, which the C++
// and Python clients retry until their operation timeout.
func TestUnsupportedFeaturesGetClearErrors(t *testing.T) {
	_, err := ParseTopicName("non-persistent://public/default/t")
	if code := serverError(err); code != pb.ServerError_NotAllowedError || !strings.Contains(err.Error(), "non-persistent topics are not supported") {
		t.Errorf("non-persistent topic: %v %v", code, err)
	}
	if _, err := ParseTopicName("http://public/default/t"); serverError(err) != pb.ServerError_InvalidTopicName {
		t.Errorf("unknown scheme: %v", err)
	}
	for _, name := range []string{txnCoordinatorAssignTopic, txnCoordinatorAssignTopic + "-partition-3"} {
		if !isTxnCoordinatorTopic(name) {
			t.Errorf("%s is not recognised as the transaction coordinator topic", name)
		}
	}
	if isTxnCoordinatorTopic("persistent://pulsar/system/transaction_coordinator_assignx") {
		t.Error("a topic merely starting with the coordinator topic's name is recognised")
	}
}
