package gateway

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net"
	"testing"
)

// What the frame writer puts on a connection is every frame's head and body
// in queue order, byte for byte: on TCP (gathered, vectored writes: small
// pieces copied, extended in place, large ones referenced; flushes forced by
// the byte and piece bounds and by a full copy buffer) and on any other
// connection (buffered copies).
func TestFrameWriterWritesFramesInOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	bytesSrc := rand.NewChaCha8([32]byte{1})
	piece := func(n int) []byte {
		b := make([]byte, n)
		bytesSrc.Read(b)
		return b
	}
	var frames []outFrame
	for i := range 2000 {
		f := outFrame{head: piece(20 + rng.IntN(100))}
		switch i % 5 {
		case 1: // an entry copied (small)
			f.body = piece(1 + rng.IntN(frameCopyMax))
		case 2: // an entry referenced
			f.body = piece(frameCopyMax + 1 + rng.IntN(200<<10))
		case 3: // a large head, copied only when it fits the buffer
			f.head = piece(frameCopyMax - rng.IntN(10))
		}
		frames = append(frames, f)
	}
	var want bytes.Buffer
	for _, f := range frames {
		want.Write(f.head)
		want.Write(f.body)
	}
	pairs := map[string]func(t *testing.T) (net.Conn, net.Conn){
		"tcp": func(t *testing.T) (net.Conn, net.Conn) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			accepted := make(chan net.Conn, 1)
			go func() {
				c, _ := ln.Accept()
				accepted <- c
			}()
			w, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			r := <-accepted
			if r == nil {
				t.Fatal("accept failed")
			}
			return w, r
		},
		"pipe": func(*testing.T) (net.Conn, net.Conn) { return net.Pipe() },
	}
	for name, pair := range pairs {
		t.Run(name, func(t *testing.T) {
			wc, rc := pair(t)
			defer rc.Close()
			got := make(chan []byte, 1)
			go func() {
				b, _ := io.ReadAll(rc)
				got <- b
			}()
			w := newFrameWriter(wc)
			if (w.buffered == nil) != (name == "tcp") {
				t.Fatalf("%s connection: buffered=%v", name, w.buffered != nil)
			}
			for i, f := range frames {
				if err := w.add(f); err != nil {
					t.Fatal(err)
				}
				if i%97 == 0 { // the session flushes after each queue drain
					if err := w.flush(); err != nil {
						t.Fatal(err)
					}
				}
				if i%291 == 0 { // and releases the small buffer when idle
					w.release()
				}
				copied := 0
				if w.small != nil {
					copied = len(*w.small)
				}
				if w.buffered == nil && (w.size > frameFlushBytes || len(w.bufs) > framePieces || copied > frameSmallBytes) {
					t.Fatalf("frame %d: %d bytes in %d pieces gathered, %d copied", i, w.size, len(w.bufs), copied)
				}
			}
			if err := w.flush(); err != nil {
				t.Fatal(err)
			}
			wc.Close()
			if b := <-got; !bytes.Equal(b, want.Bytes()) {
				t.Fatalf("%d bytes arrived, want %d (equal: %v)", len(b), want.Len(), bytes.Equal(b, want.Bytes()))
			}
		})
	}
}
