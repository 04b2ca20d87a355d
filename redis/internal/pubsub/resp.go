// Package resp reads commands and writes replies in RESP2, the Redis
// serialization protocol, as far as the sharded client's pub/sub fan-in
// needs: commands are arrays of bulk strings; replies are arrays of bulk
// strings, integers and nulls, simple strings and errors.
package resp

import (
	"bufio"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// MaxBulk bounds one argument's length (512 MiB, Redis's proto-max-bulk-len).
const MaxBulk = 512 << 20

// maxArgs bounds the number of arguments of one command.
const maxArgs = 1 << 20

// ReadCommand reads one command: an array of bulk strings.
func ReadCommand(r *bufio.Reader) ([]string, error) {
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
		if size < 0 || size > MaxBulk {
			return nil, fmt.Errorf("resp: bulk string of %d bytes", size)
		}
		buf := make([]byte, size+2)
		if _, err := readFull(r, buf); err != nil {
			return nil, err
		}
		if buf[size] != '\r' || buf[size+1] != '\n' {
			return nil, errors.New("resp: bulk string not followed by CRLF")
		}
		args[i] = string(buf[:size])
	}
	return args, nil
}

func readFull(r *bufio.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
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

// AppendArray appends an array reply whose items are strings (bulk
// strings), int or int64 (integers), or nil (null bulk string).
func AppendArray(b []byte, items ...any) []byte {
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

// AppendError appends an error reply; line breaks in msg become spaces.
func AppendError(b []byte, msg string) []byte {
	msg = strings.NewReplacer("\r", " ", "\n", " ").Replace(msg)
	b = append(b, '-')
	b = append(b, msg...)
	return append(b, '\r', '\n')
}
