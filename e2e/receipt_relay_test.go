package e2e

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/lakegate/lakegate/protocol/pb"
)

// receiptRelay is a TCP relay between Pulsar clients and a gateway that
// loses a receipt on demand, deterministically: armed (loseNextReceipt), it
// drops the next SEND_RECEIPT the gateway sends — the message is stored,
// the client never hears of it — and closes the client's connection, so
// the client reconnects and resends the message (same producer name,
// sequence id, transaction). Point the gateway's advertised address at it
// (lookups then send the client back through it). Frames from the gateway
// are read whole (the 4-byte size, then the command); everything else
// passes unchanged.
type receiptRelay struct {
	t      *testing.T
	ln     net.Listener
	target string

	mu     sync.Mutex
	arm    *relayArm
	paused bool       // new connections are held until resume
	held   []net.Conn // accepted while paused
	conns  []net.Conn // every connection, closed at cleanup
}

// relayArm is what to do at the next SEND_RECEIPT.
type relayArm struct {
	// keepUpstream leaves the gateway's side of the connection open: the
	// gateway does not see the client leave (its producer stays attached
	// until the gateway dies, e.g. a kill -9).
	keepUpstream bool
	// pause holds the connections made after the drop until resume.
	pause bool
	lost  chan uint64 // the dropped receipt's sequence id
}

// startReceiptRelay listens on 127.0.0.1 and relays to target (host:port).
func startReceiptRelay(t *testing.T, target string) *receiptRelay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &receiptRelay{t: t, ln: ln, target: target}
	t.Cleanup(r.close)
	go r.accept()
	return r
}

func (r *receiptRelay) addr() string { return r.ln.Addr().String() }

// loseNextReceipt arms the relay; the returned channel gets the sequence id
// of the receipt it drops.
func (r *receiptRelay) loseNextReceipt(keepUpstream, pause bool) <-chan uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	a := &relayArm{keepUpstream: keepUpstream, pause: pause, lost: make(chan uint64, 1)}
	r.arm = a
	return a.lost
}

// resume relays the connections held since a drop that paused.
func (r *receiptRelay) resume() {
	r.mu.Lock()
	held := r.held
	r.held, r.paused = nil, false
	r.mu.Unlock()
	for _, c := range held {
		go r.serve(c)
	}
}

func (r *receiptRelay) close() {
	r.ln.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range append(r.conns, r.held...) {
		c.Close()
	}
}

func (r *receiptRelay) track(c net.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.conns = append(r.conns, c)
}

func (r *receiptRelay) accept() {
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.track(c)
		r.mu.Lock()
		if r.paused {
			r.held = append(r.held, c)
			r.mu.Unlock()
			continue
		}
		r.mu.Unlock()
		go r.serve(c)
	}
}

// serve relays one client connection.
func (r *receiptRelay) serve(client net.Conn) {
	up, err := net.Dial("tcp", r.target)
	if err != nil {
		client.Close()
		return
	}
	r.track(up)
	var keepUp atomic.Bool // the gateway's side stays open when the client's closes
	go func() {
		io.Copy(up, client) // ends when the client's side closes
		if !keepUp.Load() {
			up.Close()
		}
	}()
	br := bufio.NewReader(up)
	for {
		frame, cmd, err := readRawFrame(br)
		if err != nil {
			client.Close()
			return
		}
		if cmd.GetType() == pb.BaseCommand_SEND_RECEIPT {
			r.mu.Lock()
			a := r.arm
			r.arm = nil
			if a != nil && a.pause {
				r.paused = true // before the client can reconnect
			}
			r.mu.Unlock()
			if a != nil {
				keepUp.Store(a.keepUpstream)
				client.Close()
				a.lost <- cmd.GetSendReceipt().GetSequenceId()
				io.Copy(io.Discard, up) // the gateway's pings, until it closes
				up.Close()
				return
			}
		}
		if _, err := client.Write(frame); err != nil {
			up.Close()
			return
		}
	}
}

// readRawFrame reads one frame: its bytes as they came and its command.
func readRawFrame(br *bufio.Reader) ([]byte, *pb.BaseCommand, error) {
	var size [4]byte
	if _, err := io.ReadFull(br, size[:]); err != nil {
		return nil, nil, err
	}
	total := binary.BigEndian.Uint32(size[:])
	if total < 4 || total > 64<<20 {
		return nil, nil, fmt.Errorf("frame of %d bytes", total)
	}
	frame := make([]byte, 4+total)
	copy(frame, size[:])
	if _, err := io.ReadFull(br, frame[4:]); err != nil {
		return nil, nil, err
	}
	cmdSize := binary.BigEndian.Uint32(frame[4:8])
	if uint64(cmdSize) > uint64(total-4) {
		return nil, nil, fmt.Errorf("command of %d bytes in a frame of %d", cmdSize, total)
	}
	cmd := &pb.BaseCommand{}
	if err := proto.Unmarshal(frame[8:8+cmdSize], cmd); err != nil {
		return nil, nil, err
	}
	return frame, cmd, nil
}
