package supervise

import (
	"bytes"
	"io"
	"sync"
)

// SyncWriter serialises writes to an io.Writer: each Write reaches the
// underlying writer whole, never interleaved with another.
type SyncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// NewSyncWriter wraps w.
func NewSyncWriter(w io.Writer) *SyncWriter { return &SyncWriter{w: w} }

// Write writes p to the underlying writer while holding the lock.
func (s *SyncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// maxLine bounds a line held back while waiting for its newline.
const maxLine = 64 << 10

// lineWriter cuts a child's output into lines and writes each one, prefixed,
// in a single Write. os/exec calls Write from one goroutine per stream.
type lineWriter struct {
	out     io.Writer
	prefix  []byte
	pending []byte
}

func newLineWriter(out io.Writer, prefix string) *lineWriter {
	return &lineWriter{out: out, prefix: []byte(prefix)}
}

// Write never fails: a child must not stall or die because the terminal it
// reports to went away.
func (w *lineWriter) Write(p []byte) (int, error) {
	w.pending = append(w.pending, p...)
	rest := w.pending
	for {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			break
		}
		w.emit(rest[:i])
		rest = rest[i+1:]
	}
	if len(rest) > maxLine {
		w.emit(rest)
		rest = nil
	}
	w.pending = append(w.pending[:0], rest...)
	return len(p), nil
}

// flush writes a last line that had no newline.
func (w *lineWriter) flush() {
	if len(w.pending) > 0 {
		w.emit(w.pending)
		w.pending = w.pending[:0]
	}
}

func (w *lineWriter) emit(line []byte) {
	line = bytes.TrimSuffix(line, []byte("\r"))
	buf := make([]byte, 0, len(w.prefix)+len(line)+1)
	buf = append(buf, w.prefix...)
	buf = append(buf, line...)
	buf = append(buf, '\n')
	_, _ = w.out.Write(buf)
}
