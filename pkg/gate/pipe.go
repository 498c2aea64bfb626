package gate

import (
	"bufio"
	"errors"
	"io"
	"net"
	"sync"
)

// copyBuffer is the size of each direction's buffer of a proxy connection
// (nest.sock connections have none: pipeNest): with the connection
// limits, what bounds the gate's memory (docs/isolation.md). TLS records
// are at most 16 KiB.
const copyBuffer = 16 << 10

// takeFunc charges n bytes about to be sent out and returns how many of
// them may go (fewer once the cap is reached).
type takeFunc func(n int64) int64

// splice copies chickR to dest and dest to chick until both directions
// end, then closes both. A direction that ends cleanly half-closes its
// far side (so a client's shutdown reaches the server); one that fails,
// or is cut at the cap, closes both at once. out counts the bytes written
// to dest, in the bytes written to chick.
func splice(chickR io.Reader, chick, dest net.Conn, take takeFunc) (out, in int64, capped bool) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var err error
		out, capped, err = copyOut(dest, chickR, take)
		if capped || err != nil {
			chick.Close()
			dest.Close()
			return
		}
		closeWrite(dest)
	}()
	in, err := io.CopyBuffer(countWriter{chick, nil}, dest, make([]byte, copyBuffer))
	if err != nil {
		chick.Close()
		dest.Close()
	} else {
		closeWrite(chick)
	}
	wg.Wait()
	chick.Close()
	dest.Close()
	return out, in, capped
}

// copyOut copies src to dst, asking take before each write. It returns
// the bytes written and whether take cut it short.
func copyOut(dst io.Writer, src io.Reader, take takeFunc) (n int64, capped bool, err error) {
	buf := make([]byte, copyBuffer)
	for {
		nr, rerr := src.Read(buf)
		if nr > 0 {
			k := int64(nr)
			if take != nil {
				k = take(k)
			}
			if k > 0 {
				nw, werr := dst.Write(buf[:k])
				n += int64(nw)
				if werr != nil {
					if take != nil && int64(nw) < k {
						take(int64(nw) - k) // give back what did not go
					}
					return n, false, werr
				}
			}
			if k < int64(nr) {
				return n, true, nil
			}
		}
		if rerr != nil {
			if errors.Is(rerr, io.EOF) {
				return n, false, nil
			}
			return n, false, rerr
		}
	}
}

// countWriter counts what it writes into *n (if n is set).
type countWriter struct {
	w io.Writer
	n *int64
}

func (c countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	if c.n != nil {
		*c.n += int64(n)
	}
	return n, err
}

// countReader counts what it reads into *n.
type countReader struct {
	r io.Reader
	n *int64
}

func (c countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	*c.n += int64(n)
	return n, err
}

// capWriter writes to w what take allows and fails with errCapped past
// it, counting what it wrote into *n.
type capWriter struct {
	w    io.Writer
	take takeFunc
	n    *int64
}

var errCapped = errors.New("byte cap reached")

func (c capWriter) Write(p []byte) (int, error) {
	k := int64(len(p))
	if c.take != nil {
		k = c.take(k)
	}
	var nw int
	var err error
	if k > 0 {
		nw, err = c.w.Write(p[:k])
		*c.n += int64(nw)
		if err != nil {
			if c.take != nil && int64(nw) < k {
				c.take(int64(nw) - k)
			}
			return nw, err
		}
	}
	if k < int64(len(p)) {
		return nw, errCapped
	}
	return nw, nil
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
		return
	}
	c.Close()
}

// pipeNest carries a nest.sock connection: what came with the preface
// (buffered in br) first, then both directions with io.Copy between the
// unix and TCP sockets, which Linux does with splice(2): no buffer of the
// gate's per connection, and no copy through it (the relay of every
// chick's events passes here). It returns when both directions end.
func pipeNest(br *bufio.Reader, chick, up net.Conn) {
	if n := br.Buffered(); n > 0 {
		b, _ := br.Peek(n)
		if _, err := up.Write(b); err != nil {
			return
		}
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if _, err := io.Copy(up, chick); err != nil {
			chick.Close()
			up.Close()
			return
		}
		closeWrite(up)
	}()
	if _, err := io.Copy(chick, up); err != nil {
		chick.Close()
		up.Close()
	} else {
		closeWrite(chick)
	}
	wg.Wait()
	chick.Close()
	up.Close()
}
