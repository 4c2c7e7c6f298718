package meta

import (
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestEtcdForwardOverflow: a consumer that falls behind by more than the
// buffer has its channel closed; events are translated in order.
func TestEtcdForwardOverflow(t *testing.T) {
	e := &Etcd{opts: EtcdOptions{Prefix: "/p/"}}
	wch := make(chan clientv3.WatchResponse, 2)
	var evs []*clientv3.Event
	for i := range 10 {
		evs = append(evs, &clientv3.Event{Type: clientv3.EventTypePut, Kv: &mvccpb.KeyValue{
			Key: []byte("/p/k"), Value: []byte{byte(i)}, ModRevision: int64(10 + i), CreateRevision: 10,
		}})
	}
	wch <- clientv3.WatchResponse{Events: evs[:2]}
	wch <- clientv3.WatchResponse{Events: evs[2:]}
	close(wch)
	out := make(chan Event, 4)
	e.forward(wch, out) // returns at the 5th event: the buffer is full
	close(out)
	n := 0
	for ev := range out {
		if ev.Kind != EventPut || ev.KV.Key != "k" || ev.KV.ModRevision != int64(10+n) || ev.KV.Value[0] != byte(n) {
			t.Fatalf("event %d: %+v", n, ev)
		}
		n++
	}
	if n != 4 {
		t.Fatalf("%d events forwarded, want 4", n)
	}
	if len(wch) != 0 {
		t.Fatalf("forward stopped before reading the overflowing response")
	}
}

// TestEtcdForwardEnds: a canceled watch response (compaction, errors) ends
// the forwarding; deletes carry the key and revision only.
func TestEtcdForwardEnds(t *testing.T) {
	e := &Etcd{}
	wch := make(chan clientv3.WatchResponse, 3)
	wch <- clientv3.WatchResponse{Events: []*clientv3.Event{{Type: clientv3.EventTypeDelete, Kv: &mvccpb.KeyValue{Key: []byte("k"), ModRevision: 7}}}}
	wch <- clientv3.WatchResponse{Canceled: true, CompactRevision: 9}
	wch <- clientv3.WatchResponse{Events: []*clientv3.Event{{Type: clientv3.EventTypePut, Kv: &mvccpb.KeyValue{Key: []byte("late")}}}}
	out := make(chan Event, 10)
	e.forward(wch, out)
	close(out)
	var got []Event
	for ev := range out {
		got = append(got, ev)
	}
	if len(got) != 1 || got[0].Kind != EventDelete || got[0].KV.Key != "k" || got[0].KV.ModRevision != 7 || got[0].KV.CreateRevision != 0 {
		t.Fatalf("forwarded %+v", got)
	}
}

// TestCheckTxn pins the request checks shared by Mem and Etcd.
func TestCheckTxn(t *testing.T) {
	if err := checkTxn(nil, nil, 1, 100); err != nil {
		t.Fatal(err)
	}
	if err := checkTxn(nil, []Op{Put("k", make([]byte, 100))}, 1, 100); err == nil {
		t.Fatal("oversized request accepted")
	}
	if err := checkTxn([]Cmp{{Key: "k", ModRevision: -1}}, nil, 1, 100); err == nil {
		t.Fatal("negative compare revision accepted")
	}
	if err := checkTxn(nil, []Op{{Kind: 99, Key: "k"}}, 1, 100); err == nil {
		t.Fatal("unknown op kind accepted")
	}
}
