package gateway

import (
	"bufio"
	"io"
	"net"
	"sync"

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

	bufs net.Buffers // pieces of the next write, in order
	// small is the backing store of the copied pieces (cap
	// frameSmallBytes), taken from smallBufs when a piece needs it and
	// given back by release: an idle connection holds none.
	small *[]byte
	tail  bool // the last piece of bufs ends small
	size  int  // bytes in bufs
}

// smallBufs holds the frameWriters' small buffers between writes.
var smallBufs = sync.Pool{New: func() any {
	b := make([]byte, 0, frameSmallBytes)
	return &b
}}

func newFrameWriter(conn net.Conn) *frameWriter {
	w := &frameWriter{conn: conn}
	if _, ok := conn.(*net.TCPConn); !ok {
		w.buffered = bufio.NewWriterSize(conn, frameSmallBytes)
	}
	return w
}

// release gives the small buffer back once everything added was written
// (the writer calls it when its queue is empty).
func (w *frameWriter) release() {
	if w.small != nil && len(w.bufs) == 0 {
		*w.small = (*w.small)[:0]
		smallBufs.Put(w.small)
		w.small = nil
	}
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
		if w.small == nil {
			w.small = smallBufs.Get().(*[]byte)
		}
		if len(*w.small)+len(p) > cap(*w.small) {
			if err := w.flush(); err != nil {
				return err
			}
		}
		small := *w.small
		start := len(small)
		small = append(small, p...)
		*w.small = small
		if w.tail {
			// The last piece is small's tail: extend it over p's copy.
			last := w.bufs[len(w.bufs)-1]
			w.bufs[len(w.bufs)-1] = last[:len(last)+len(p)]
		} else {
			w.bufs = append(w.bufs, small[start:])
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
	w.bufs, w.tail, w.size = w.bufs[:0], false, 0
	if w.small != nil {
		*w.small = (*w.small)[:0]
	}
	return err
}
