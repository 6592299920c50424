package netnsutil

import (
	"bytes"
	"io"
	"sync/atomic"
)

var counter atomic.Int64

func nextID() int64 { return counter.Add(1) }

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }
