package pubsub

// The fan-in's side of RESP2, the Redis serialization protocol, as far as
// it needs: commands are arrays of bulk strings; replies are arrays of bulk
// strings, integers and nulls, and errors.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// maxBulk bounds one argument's length (512 MiB, Redis's proto-max-bulk-len).
const maxBulk = 512 << 20

// maxArgs bounds the number of arguments of one command.
const maxArgs = 1 << 20

// readCommand reads one command: an array of bulk strings.
func readCommand(r *bufio.Reader) ([]string, error) {
	n, err := readHeader(r, '*')
	if err != nil {
		return nil, err
	}
	if n < 1 || n > maxArgs {
		return nil, fmt.Errorf("resp: command of %d arguments", n)
	}
	args := make([]string, n)
	for i := range args {
		size, err := readHeader(r, '$')
		if err != nil {
			return nil, err
		}
		if size < 0 || size > maxBulk {
			return nil, fmt.Errorf("resp: bulk string of %d bytes", size)
		}
		buf := make([]byte, size+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		if buf[size] != '\r' || buf[size+1] != '\n' {
			return nil, errors.New("resp: bulk string not followed by CRLF")
		}
		args[i] = string(buf[:size])
	}
	return args, nil
}

// readHeader reads a line "<kind><integer>\r\n".
func readHeader(r *bufio.Reader, kind byte) (int, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return 0, err
	}
	if len(line) < 4 || line[0] != kind || !strings.HasSuffix(line, "\r\n") {
		return 0, fmt.Errorf("resp: expected %q header, got %q", kind, line)
	}
	return strconv.Atoi(line[1 : len(line)-2])
}

// appendArray appends an array reply whose items are strings (bulk
// strings), int or int64 (integers), or nil (null bulk string).
func appendArray(b []byte, items ...any) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(items)), 10)
	b = append(b, '\r', '\n')
	for _, it := range items {
		switch v := it.(type) {
		case string:
			b = append(b, '$')
			b = strconv.AppendInt(b, int64(len(v)), 10)
			b = append(b, '\r', '\n')
			b = append(b, v...)
			b = append(b, '\r', '\n')
		case int:
			b = appendInt(b, int64(v))
		case int64:
			b = appendInt(b, v)
		default:
			b = append(b, "$-1\r\n"...)
		}
	}
	return b
}

func appendInt(b []byte, n int64) []byte {
	b = append(b, ':')
	b = strconv.AppendInt(b, n, 10)
	return append(b, '\r', '\n')
}

// appendError appends an error reply; line breaks in msg become spaces.
func appendError(b []byte, msg string) []byte {
	msg = strings.NewReplacer("\r", " ", "\n", " ").Replace(msg)
	b = append(b, '-')
	b = append(b, msg...)
	return append(b, '\r', '\n')
}
