package gateway

import (
	"testing"

	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/protocol/pb"
)

// Features lakegate does not support answer with a ServerError clients
// treat as final, with a message naming the feature (docs/compatibility.md).
func TestUnsupportedFeaturesGetClearErrors(t *testing.T) {
	tn, err := broker.ParseTopicName("non-persistent://public/default/t")
	if err != nil || !tn.NonPersistent || tn.String() != "non-persistent://public/default/t" {
		t.Errorf("non-persistent topic: %+v %v", tn, err)
	}
	if _, err := broker.ParseTopicName("http://public/default/t"); serverError(err) != pb.ServerError_InvalidTopicName {
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
