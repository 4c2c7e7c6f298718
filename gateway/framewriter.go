package gateway

import (
	"bufio"
	"io"
	"net"

	"github.com/lakegate/lakegate/protocol"
)

// outFrame is one queued frame: head's bytes, then body's. body is a stored
// entry that goes to the socket without being copied into the frame (nil
// for a frame encoded whole); neither changes once queued.
type outFrame struct{ head, body []byte }

// entryFrame encodes f (a MESSAGE with its Entry) as a head and f.Entry
// referenced as the body.
func entryFrame(f protocol.Frame) (outFrame, error) {
	head, err := protocol.AppendFrameHead(nil, f)
	return outFrame{head: head, body: f.Entry}, err
}

const (
	// frameCopyMax: pieces up to this size are copied into the writer's
	// buffer; larger ones (the entries of MESSAGE frames) are referenced.
	frameCopyMax = 8 << 10
	// frameSmallBytes is the buffer the small pieces are copied into.
	frameSmallBytes = 64 << 10
	// frameFlushBytes and framePieces bound what one vectored write
	// gathers (and what the writer keeps referenced between writes).
	frameFlushBytes = 1 << 20
	framePieces     = 256
)

// frameWriter writes a session's frames. On a TCP connection it gathers
// them for one vectored write (writev): small pieces copied into one
// buffer, entries referenced where they lie. On any other connection (TLS)
// it copies them through a buffered writer, so that small frames still
// share records.
type frameWriter struct {
	conn     io.Writer
	buffered *bufio.Writer // not a TCP connection

	bufs  net.Buffers // pieces of the next write, in order
	small []byte      // backing store of the copied pieces; cap frameSmallBytes
	tail  bool        // the last piece of bufs ends small
	size  int         // bytes in bufs
}

func newFrameWriter(conn net.Conn) *frameWriter {
	w := &frameWriter{conn: conn}
	if _, ok := conn.(*net.TCPConn); !ok {
		w.buffered = bufio.NewWriterSize(conn, frameSmallBytes)
		return w
	}
	w.small = make([]byte, 0, frameSmallBytes)
	return w
}

// add queues f's bytes; it writes what is gathered once that reaches a
// bound.
func (w *frameWriter) add(f outFrame) error {
	if err := w.piece(f.head); err != nil {
		return err
	}
	return w.piece(f.body)
}

func (w *frameWriter) piece(p []byte) error {
	if len(p) == 0 {
		return nil
	}
	if w.buffered != nil {
		_, err := w.buffered.Write(p)
		return err
	}
	if len(p) <= frameCopyMax {
		if len(w.small)+len(p) > cap(w.small) {
			if err := w.flush(); err != nil {
				return err
			}
		}
		start := len(w.small)
		w.small = append(w.small, p...)
		if w.tail {
			// The last piece is small's tail: extend it over p's copy.
			last := w.bufs[len(w.bufs)-1]
			w.bufs[len(w.bufs)-1] = last[:len(last)+len(p)]
		} else {
			w.bufs = append(w.bufs, w.small[start:len(w.small)])
			w.tail = true
		}
	} else {
		w.bufs = append(w.bufs, p)
		w.tail = false
	}
	w.size += len(p)
	if w.size >= frameFlushBytes || len(w.bufs) >= framePieces {
		return w.flush()
	}
	return nil
}

// flush writes everything added.
func (w *frameWriter) flush() error {
	if w.buffered != nil {
		return w.buffered.Flush()
	}
	if len(w.bufs) == 0 {
		return nil
	}
	pieces := w.bufs
	_, err := pieces.WriteTo(w.conn)
	clear(w.bufs) // the entries written are not kept alive by the writer
	w.bufs, w.small, w.tail, w.size = w.bufs[:0], w.small[:0], false, 0
	return err
}
